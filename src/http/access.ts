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
 *
 * "This host" is the `Host` header, and by default nothing else. Behind a proxy that rewrites `Host` (nginx's
 * default `proxy_set_header Host $proxy_host`), two options say what else counts: `trustProxy` believes the
 * `X-Forwarded-Host` that Fastify's own `trustProxy` believes (`request.host`: only from a proxy the app trusts),
 * and `allowedOrigins` lists exact origins (`https://app.example`) that are always accepted.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { principalSchema, type Principal } from '../../machines/context.js';
import type { AuditEntry } from '../../machines/journal.js';
import type { TaskStatus } from '../orchestrator/status.js';
import { type ServiceError, serviceError } from './serviceError.js';

export type Authenticate = (request: FastifyRequest) => Principal | null | Promise<Principal | null>;

/**
 * Why a caller sees a task: their own; a confirmation waiting for their approval; one they decided as an approver
 * (approved or rejected), which they keep reading, with its outcome, after it stops waiting for them; or any task of
 * their tenant, as an operator (they hold the orchestrator's `adminScope`: they may read and cancel it, and every
 * action of theirs is audited with who did it).
 */
export type Access = 'owner' | 'approver' | 'decided' | 'operator';

export async function authenticateRequest(request: FastifyRequest, authenticate: Authenticate): Promise<Principal> {
  let principal: Principal | null;
  try {
    principal = await authenticate(request);
  } catch (error) {
    // What the host's session check threw is its own internals (a store's address, a token library's words): it
    // goes to the service's log, not to a caller who is not signed in.
    request.log.warn({ err: error }, 'authenticate threw; answered 401 unauthenticated');
    throw serviceError(
      401,
      'unauthenticated',
      "not signed in: the session could not be checked (see the service's log)",
    );
  }
  if (!principal) throw serviceError(401, 'unauthenticated', 'not signed in');
  const parsed = principalSchema.safeParse(principal);
  if (!parsed.success) {
    // Which fields are wrong, never their values (an extra field is often the session's token).
    const problems = parsed.error.issues
      .slice(0, 3)
      .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
      .join('; ');
    throw serviceError(
      500,
      'invalid_principal',
      `authenticate returned something that is not a principal { userId, tenantId, scopes, sessionId? }: ${problems}`,
    );
  }
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

/** Has approved the pending confirmation already (still holding its scope), while it waits for other approvers. */
export function hasApprovedPending(
  principal: Principal,
  status: Pick<TaskStatus, 'pendingConfirmation' | 'principal'>,
): boolean {
  const pending = status.pendingConfirmation;
  return (
    pending !== null &&
    pending.approverScope !== null &&
    principal.scopes.includes(pending.approverScope) &&
    pending.approvals.some((approval) => approval.userId === principal.userId)
  );
}

/**
 * How `principal` may see the task, or null when it may not: its user, an approver of its pending confirmation (one
 * who may decide it, or who approved it and waits for the others), or an operator of its tenant (`operatorScope`).
 */
export function accessOf(
  principal: Principal,
  status: Pick<TaskStatus, 'pendingConfirmation' | 'principal'>,
  operatorScope: string | null = null,
): Access | null {
  if (principal.tenantId !== status.principal.tenantId) return null;
  if (principal.userId === status.principal.userId) return 'owner';
  if (mayApprove(principal, status) || hasApprovedPending(principal, status)) return 'approver';
  return operatorScope !== null && principal.scopes.includes(operatorScope) ? 'operator' : null;
}

/**
 * Whether `principal` decided a confirmation of this task as an approver: an `approved`, `granted` or `rejected`
 * entry of theirs in its audit. A refused attempt gives no access (anyone in the tenant could make one).
 */
export function decidedAsApprover(principal: Principal, audit: readonly AuditEntry[]): boolean {
  return audit.some(
    (e) =>
      e.kind === 'confirmation' &&
      e.decidedAs === 'approver' &&
      e.userId === principal.userId &&
      (e.action === 'approved' || e.action === 'granted' || e.action === 'rejected'),
  );
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

/** Which browser origins may send decisions besides the `Host` itself. */
export interface OriginPolicy {
  /** Also accept the forwarded host as Fastify resolved it (`request.host`, which honours `Fastify({ trustProxy })`). */
  trustProxy?: boolean;
  /** Exact origins always accepted (`scheme://host[:port]`), already checked by `originsOf`. */
  allowedOrigins?: readonly string[];
}

export class CsrfGuard {
  private readonly secret: Buffer;
  private readonly trustProxy: boolean;
  private readonly allowedOrigins: ReadonlySet<string>;

  constructor(secret?: string, policy: OriginPolicy = {}) {
    this.secret = secret ? Buffer.from(secret, 'utf8') : randomBytes(32);
    this.trustProxy = policy.trustProxy ?? false;
    this.allowedOrigins = new Set(policy.allowedOrigins ?? []);
  }

  token(principal: Principal): string {
    return createHmac('sha256', this.secret)
      .update(`${principal.tenantId}\u0000${principal.userId}`)
      .digest('base64url');
  }

  /** Throws 403 for a browser request without the right token or from another origin. */
  check(request: FastifyRequest, principal: Principal): void {
    const origin = request.headers.origin;
    if (origin !== undefined && !this.acceptsOrigin(origin, request)) {
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

  private acceptsOrigin(origin: string, request: FastifyRequest): boolean {
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false;
    }
    if (this.allowedOrigins.has(url.origin)) return true;
    const host = request.headers.host;
    if (host !== undefined && url.host === host) return true;
    // request.host is X-Forwarded-Host only when the peer is a proxy the app's Fastify({ trustProxy }) trusts.
    return this.trustProxy && url.host === request.host;
  }
}

/**
 * The `allowedOrigins` option as exact origins, or the reason one is not an origin (`null`, a path, another scheme):
 * an entry is compared with the browser's `Origin` header as it is, so a typo must not pass as "allowed".
 */
export function originsOf(entries: readonly unknown[]): { origins: string[] } | { invalid: string } {
  const origins: string[] = [];
  for (const entry of entries) {
    let url: URL | null;
    try {
      url = typeof entry === 'string' ? new URL(entry) : null;
    } catch {
      url = null;
    }
    const exact =
      url !== null &&
      (url.protocol === 'https:' || url.protocol === 'http:') &&
      url.pathname === '/' &&
      url.search === '' &&
      url.hash === '' &&
      url.username === '' &&
      (entry === url.origin || entry === `${url.origin}/`);
    if (!exact) return { invalid: JSON.stringify(entry) };
    origins.push(url!.origin);
  }
  return { origins };
}
