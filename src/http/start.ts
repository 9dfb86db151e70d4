/**
 * Starting a task over HTTP, where the trust boundary runs (docs/service.md): the caller's body gives the goal, a
 * task id and an `input` the host reads; the host's session (`authenticate`) gives who the task runs as; the host's
 * code (`startRequest`) gives the rules: mandate, limits, success criterion. A body that tries to set a rule or the
 * principal is refused before the host's code sees it, and a `startRequest` that would start the task as someone
 * other than the caller is refused as the host's bug. Either way nothing starts.
 *
 * Task ids are per caller: a task started here with the id `refund-1` is stored as `acme:E17:refund-1`
 * (`callerTaskId`: tenant, user, id), which is its id in the response's `status.taskId` and for the library; the
 * routes also take the caller's own `refund-1`. Ids are unique in the store, so one shared by everyone would tell a
 * caller that someone else had used it (`409 task_exists` on a start, while a read says `404 task_not_found`):
 * another tenant's, or a colleague's. In their own namespace a caller meets only their own tasks.
 */
import type { FastifyRequest } from 'fastify';
import type { Principal } from '../../machines/context.js';
import { INPUT_LIMITS } from '../../machines/limits.js';
import type { StartTaskRequest } from '../orchestrator/orchestrator.js';
import { CALLER_FORBIDDEN_FIELDS, type StartBody } from './schemas.js';
import { serviceError } from './serviceError.js';

/**
 * What `startRequest` returns: the orchestrator's start request, whose principal may be left out (the caller's is
 * used) and may narrow the caller's scopes, never change who they are.
 */
export type HostStartRequest = Omit<StartTaskRequest, 'principal'> & { principal?: Principal };

/**
 * The type of the `startRequest` option: the start request for a caller's body, with the mandate, the limits and
 * the success criterion derived from the host's own data (for example the order `body.input` names, looked up in
 * the host's records for `principal.tenantId`). Throw a `ServiceError` (a 4xx) for an input it cannot take.
 */
export type StartRequest = (
  body: StartBody,
  principal: Principal,
  request: FastifyRequest,
) => HostStartRequest | Promise<HostStartRequest>;

/** Refuses (403 `caller_cannot_set_rules`) a body that names any field the caller may not set. */
export function refuseCallerRules(body: unknown): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return;
  const named = Object.keys(body).filter((field) => CALLER_FORBIDDEN_FIELDS.includes(field));
  if (named.length === 0) return;
  throw serviceError(
    403,
    'caller_cannot_set_rules',
    `the body may not set ${named.join(', ')}: the service derives the principal from your session and the mandate, limits and success criterion from its own records; send goal, taskId and input`,
  );
}

/** The host's start request for `body`, checked to run as the caller (`session`). */
export async function hostStartRequest(
  startRequest: StartRequest,
  body: StartBody,
  session: Principal,
  request: FastifyRequest,
): Promise<StartTaskRequest> {
  // A copy: a host function that edits the principal it was given must not change what it is checked against.
  const returned = await startRequest(body, { ...session, scopes: [...session.scopes] }, request);
  if (typeof returned !== 'object' || returned === null) {
    throw serviceError(
      500,
      'start_request_invalid',
      `startRequest returned ${returned === null ? 'null' : typeof returned}, not a start request`,
    );
  }
  const { taskId, ...rest } = returned;
  return {
    ...rest,
    ...(typeof taskId === 'string' ? { taskId: callerTaskId(session, taskId) } : {}),
    principal: returned.principal === undefined ? session : checkedPrincipal(returned.principal, session),
  };
}

/**
 * The stored id of the task `taskId` that `principal` started over HTTP: `acme:E17:refund-1`. Tenant and user are
 * percent-encoded (neither has a `:` then), so the first two `:` end them and two callers never share a stored id.
 */
export function callerTaskId(principal: Pick<Principal, 'tenantId' | 'userId'>, taskId: string): string {
  return `${encodeURIComponent(principal.tenantId)}:${encodeURIComponent(principal.userId)}:${taskId}`;
}

/**
 * Refuses (400) a body's `taskId` that is too long once stored under the caller (`callerTaskId`), before the host is
 * asked: longer than the library's limit for a task id, or than a URL of this app can carry. Approvers, operators
 * and the pages address a task by its stored id (`status.taskId`), percent-encoded in the path, and the app's
 * router answers a longer parameter 414 (`routerParamLimit`): such a task could be started but never read.
 */
export function refuseLongTaskId(principal: Principal, taskId: string | undefined, urlLimit: number): void {
  if (taskId === undefined) return;
  const stored = callerTaskId(principal, taskId);
  const prefix = stored.slice(0, stored.length - taskId.length);
  if (stored.length > INPUT_LIMITS.taskId) {
    throw serviceError(
      400,
      'invalid_request',
      `body: taskId: at most ${INPUT_LIMITS.taskId - prefix.length} characters for this caller (the service stores it as ${prefix}<taskId>, at most ${INPUT_LIMITS.taskId} characters); this one has ${taskId.length}`,
    );
  }
  const inUrl = encodeURIComponent(stored).length;
  if (inUrl > urlLimit) {
    throw serviceError(
      400,
      'invalid_request',
      `body: taskId: too long for this service's URLs: the task's id ${prefix}<taskId> takes ${inUrl} characters percent-encoded in a path, and this app's router takes at most ${urlLimit} (Fastify's routerOptions.maxParamLength; raise it where the app is created)`,
    );
  }
}

/** The principal `startRequest` gave, if it is the caller's with the same or fewer scopes; otherwise a 500. */
function checkedPrincipal(given: Principal, session: Principal): Principal {
  const who = (p: Principal) => `user ${JSON.stringify(p.userId)} of tenant ${JSON.stringify(p.tenantId)}`;
  if (given?.userId !== session.userId || given?.tenantId !== session.tenantId) {
    throw serviceError(
      500,
      'start_request_principal_mismatch',
      `startRequest returned a task for ${given ? who(given) : 'nobody'}, but the caller is ${who(session)}: a task runs as the session's principal (authenticate); return the principal startRequest was given, or leave it out`,
    );
  }
  const added = (Array.isArray(given.scopes) ? given.scopes : []).filter((scope) => !session.scopes.includes(scope));
  if (added.length > 0) {
    throw serviceError(
      500,
      'start_request_principal_mismatch',
      `startRequest gave the task scopes the caller's session does not hold (${added.join(', ')}): a task may run with fewer of the caller's scopes, never more`,
    );
  }
  return given;
}
