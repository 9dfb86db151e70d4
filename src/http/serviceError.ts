/**
 * The service's errors: one small class carrying the HTTP status and a specific code, one for options the service
 * refuses to start with, and the table that maps the chart's (and the host's) refusal codes of a decision to an HTTP
 * status.
 */
import type { ReplyCode } from '../../machines/failures.js';
import type { HttpErrorCode } from '../errorCodes.js';
import { AgentError } from '../errors.js';
import type { UserEventResult } from '../orchestrator/status.js';

/**
 * An HTTP answer other than 2xx: its status, a code and a sentence. The service's own codes are `HttpErrorCode`
 * (made with `serviceError`, which checks them); a host's `startRequest` may throw one with a code of its own
 * (`new ServiceError(400, 'unknown_order', ...)`), which is why `C` is open.
 */
export class ServiceError<C extends string = HttpErrorCode> extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: C,
    message: string,
    /** The task's status after a refused decision (nothing changed). */
    readonly status?: unknown,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** A `ServiceError` with one of the service's own codes: the code is checked against `HttpErrorCode`. */
export function serviceError(
  statusCode: number,
  code: HttpErrorCode,
  message: string,
  status?: unknown,
): ServiceError<HttpErrorCode> {
  return new ServiceError(statusCode, code, message, status);
}

/** Thrown when the service is registered with options it cannot run with safely (before it serves anything). */
export class ServiceOptionsError extends AgentError<'invalid_service_options'> {
  constructor(
    /** The option at fault, as `AgentServiceOptions` names it. */
    readonly option: string,
    message: string,
  ) {
    super('invalid_service_options', message);
  }
}

/** HTTP status of a refused decision, by the code the chart or the host gave. */
const REFUSAL_STATUS: Partial<Record<ReplyCode, number>> = {
  wrong_tenant: 404,
  wrong_user: 403,
  self_approval: 403,
  missing_approver_scope: 403,
  permission_denied: 403,
  not_a_reviewer: 403,
  operator_only: 403,
  confirmation_expired: 410,
  question_expired: 410,
};

export function refusalStatus(code: string | null): number {
  return (code && REFUSAL_STATUS[code as ReplyCode]) || 409;
}

/** The chart's answer to a decision as HTTP: the result when taken, else the refusal's status and code. */
export function answered<R extends UserEventResult>(result: R): R {
  if (!result.accepted)
    throw serviceError(refusalStatus(result.code), result.code ?? 'not_taken', result.message, result.status);
  return result;
}
