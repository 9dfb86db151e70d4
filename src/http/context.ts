/** What every route of the service shares: the orchestrator, the session checks, parsing, and the caller's view of a task. */
import type { FastifyRequest } from 'fastify';
import type { AnyStateMachine } from 'xstate';
import type { z } from 'zod';
import type { Principal } from '../../machines/context.js';
import type { Clock } from '../clock.js';
import type { HttpErrorCode } from '../errorCodes.js';
import { TaskNotFoundError } from '../errors.js';
import type { Orchestrator, TaskStatus } from '../orchestrator/orchestrator.js';
import {
  type Access,
  type Authenticate,
  CsrfGuard,
  accessOf,
  authenticateRequest,
  decidedAsApprover,
  notFound,
} from './access.js';
import { serviceError } from './serviceError.js';
import type { RouteRateLimit } from './rateLimit.js';
import { OpenStreams, type SseOptions } from './sse.js';
import { type StartRequest, callerTaskId } from './start.js';
import type { Stepper } from './stepper.js';
import type { StatelyInspection } from '../inspect/statelyInspector.js';

export interface ServiceContext {
  orchestrator: Orchestrator;
  machine: AnyStateMachine;
  clock: Clock;
  csrf: CsrfGuard;
  stepper: Stepper | null;
  /** Where the replay route also shows the step (the Stately inspector), if anywhere. */
  inspector: Pick<StatelyInspection, 'showStep'> | null;
  sse: SseOptions;
  /** The event streams open now: ended when the server closes. */
  streams: OpenStreams;
  bodyLimit: number;
  /** Each limited route's `config.rateLimit`, or null when the rate limit is off. */
  rateLimit: RouteRateLimit | null;
  startRequest: StartRequest;
  /** The signed-in caller, or 401 (asked of `authenticate` once per request: the rate limit asks first). */
  principal(request: FastifyRequest): Promise<Principal>;
  /**
   * The task as the caller may see it, or 404 (also when it exists but is not theirs to see). `taskId` is the
   * stored id or the caller's own name for a task they started over HTTP (`refund-1` for `acme:E17:refund-1`); use the
   * returned `status.taskId` from then on.
   */
  visible(principal: Principal, taskId: string): Promise<{ status: TaskStatus; access: Access }>;
  /**
   * The task a decision names, with the caller's access to it before the decision (null: not theirs to see), or
   * 404 when no such task is stored. A decision goes to the chart whoever sends it (the chart refuses strangers and
   * audits the attempt, exactly as through the library); only the answer to a caller without access is a 404.
   */
  addressed(principal: Principal, taskId: string): Promise<{ status: TaskStatus; access: Access | null }>;
}

export function createContext(options: {
  orchestrator: Orchestrator;
  authenticate: Authenticate;
  machine: AnyStateMachine;
  clock: Clock;
  csrfSecret?: string;
  trustProxy?: boolean;
  allowedOrigins?: readonly string[];
  stepper?: Stepper;
  inspector?: Pick<StatelyInspection, 'showStep'>;
  sse?: Partial<SseOptions>;
  bodyLimit?: number;
  rateLimit: RouteRateLimit | null;
  startRequest: StartRequest;
}): ServiceContext {
  const { orchestrator, authenticate } = options;
  const principals = new WeakMap<FastifyRequest, Promise<Principal>>();
  return {
    orchestrator,
    machine: options.machine,
    clock: options.clock,
    csrf: new CsrfGuard(options.csrfSecret, {
      ...(options.trustProxy !== undefined ? { trustProxy: options.trustProxy } : {}),
      ...(options.allowedOrigins !== undefined ? { allowedOrigins: options.allowedOrigins } : {}),
    }),
    stepper: options.stepper ?? null,
    inspector: options.inspector ?? null,
    sse: { pollMs: options.sse?.pollMs ?? 2_000, heartbeatMs: options.sse?.heartbeatMs ?? 15_000 },
    streams: new OpenStreams(),
    bodyLimit: options.bodyLimit ?? 16 * 1024,
    rateLimit: options.rateLimit,
    startRequest: options.startRequest,
    principal(request) {
      let principal = principals.get(request);
      if (!principal) principals.set(request, (principal = authenticateRequest(request, authenticate)));
      return principal;
    },
    async visible(principal, taskId) {
      const found = await addressed(orchestrator, principal, taskId);
      if (!found?.access) throw notFound(taskId);
      return { status: found.status, access: found.access };
    },
    async addressed(principal, taskId) {
      const found = await addressed(orchestrator, principal, taskId);
      if (!found) throw notFound(taskId);
      return found;
    },
  };
}

/**
 * The caller's own name first (a task they started over HTTP is stored under them), then the id as stored: the
 * first the caller may see, else the first that exists (null: none).
 */
async function addressed(
  orchestrator: Orchestrator,
  principal: Principal,
  taskId: string,
): Promise<{ status: TaskStatus; access: Access | null } | null> {
  let first: { status: TaskStatus; access: Access | null } | null = null;
  for (const id of [callerTaskId(principal, taskId), taskId]) {
    let status: TaskStatus;
    try {
      status = await orchestrator.status(id);
    } catch (error) {
      if (error instanceof TaskNotFoundError) continue;
      throw error;
    }
    const access = accessOf(principal, status, orchestrator.adminScope);
    if (access) return { status, access };
    // An approver keeps reading a task they decided (its audit says so), and so sees what their decision did.
    if (principal.tenantId === status.principal.tenantId && decidedAsApprover(principal, await orchestrator.audit(id)))
      return { status, access: 'decided' };
    first ??= { status, access: null };
  }
  return first;
}

/** Parses with a zod schema, or answers 400 with `code` naming the first problem's field. */
export function parse<S extends z.ZodType>(
  schema: S,
  value: unknown,
  what: string,
  code: HttpErrorCode = 'invalid_request',
): z.output<S> {
  const parsed = schema.safeParse(value ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw serviceError(400, code, `${what}: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
}
