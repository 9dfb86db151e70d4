/**
 * Who may see and decide what. The host authenticates (`authenticate(request) -> Principal`); here every read and
 * every decision is checked against tenant and user: a caller sees a task that is theirs, or one whose pending
 * confirmation they may approve (they hold its approver scope and are not the requester). A task the caller may
 * not see answers exactly like one that does not exist (404 `task_not_found`), so ids leak nothing.
 *
 * CSRF: a request that carries cookies (a browser session) must send `x-csrf-token`, an HMAC of the caller's
 * tenant and user under the service's secret (the pages read it from `GET /api/session`, which another origin
 * cannot read), and its `Origin`, when sent, must be this host. A request without cookies (curl with a bearer
 * token) carries no ambient credential and needs neither.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { principalSchema, type Principal } from '../../machines/context.js';
import type { TaskStatus } from '../orchestrator/status.js';
import { type ServiceError, serviceError } from './serviceError.js';

export type Authenticate = (request: FastifyRequest) => Principal | null | Promise<Principal | null>;

/** Why a caller sees a task. */
export type Access = 'owner' | 'approver';

export async function authenticateRequest(request: FastifyRequest, authenticate: Authenticate): Promise<Principal> {
  let principal: Principal | null;
  try {
    principal = await authenticate(request);
  } catch (error) {
    throw serviceError(401, 'unauthenticated', `not signed in: ${(error as Error).message ?? String(error)}`);
  }
  if (!principal) throw serviceError(401, 'unauthenticated', 'not signed in');
  const parsed = principalSchema.safeParse(principal);
  if (!parsed.success)
    throw serviceError(500, 'invalid_principal', 'authenticate returned something that is not a principal');
  return parsed.data;
}

/** May approve: holds the pending confirmation's approver scope and is not the requester. */
export function mayApprove(
  principal: Principal,
  status: Pick<TaskStatus, 'pendingConfirmation' | 'principal'>,
): boolean {
  const pending = status.pendingConfirmation;
  return (
    pending !== null &&
    pending.approverScope !== null &&
    principal.userId !== pending.userId &&
    principal.scopes.includes(pending.approverScope) &&
    !pending.approvals.some((approval) => approval.userId === principal.userId)
  );
}

/** How `principal` may see the task, or null when it may not. */
export function accessOf(
  principal: Principal,
  status: Pick<TaskStatus, 'pendingConfirmation' | 'principal'>,
): Access | null {
  if (principal.tenantId !== status.principal.tenantId) return null;
  if (principal.userId === status.principal.userId) return 'owner';
  return mayApprove(principal, status) ? 'approver' : null;
}

/** Whether the caller is who the pending confirmation waits for (as its requester, or as one of its approvers). */
export function decidesPending(principal: Principal, status: TaskStatus): 'requester' | 'approver' | null {
  const pending = status.pendingConfirmation;
  if (!pending || principal.tenantId !== status.principal.tenantId) return null;
  if (pending.approverScope === null) return principal.userId === pending.userId ? 'requester' : null;
  return mayApprove(principal, status) ? 'approver' : null;
}

export function notFound(taskId: string): ServiceError {
  return serviceError(404, 'task_not_found', `no task ${taskId} that this session may see`);
}

export class CsrfGuard {
  private readonly secret: Buffer;

  constructor(secret?: string) {
    this.secret = secret ? Buffer.from(secret, 'utf8') : randomBytes(32);
  }

  token(principal: Principal): string {
    return createHmac('sha256', this.secret)
      .update(`${principal.tenantId}\u0000${principal.userId}`)
      .digest('base64url');
  }

  /** Throws 403 for a browser request without the right token or from another origin. */
  check(request: FastifyRequest, principal: Principal): void {
    const origin = request.headers.origin;
    if (origin !== undefined && !sameOrigin(origin, request.headers.host)) {
      throw serviceError(403, 'cross_origin', `requests from ${origin} are not accepted`);
    }
    if (request.headers.cookie === undefined) return;
    const sent = request.headers['x-csrf-token'];
    const expected = Buffer.from(this.token(principal));
    const given = Buffer.from(typeof sent === 'string' ? sent : '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw serviceError(
        403,
        'csrf_token_invalid',
        'a request with cookies needs the x-csrf-token header from GET /api/session',
      );
    }
  }
}

function sameOrigin(origin: string, host: string | undefined): boolean {
  try {
    return host !== undefined && new URL(origin).host === host;
  } catch {
    return false;
  }
}
