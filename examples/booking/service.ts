/**
 * The demo as an HTTP service (`npm run serve`, examples/booking/serve.ts; the service tests build it too): the
 * `statechart-agent/fastify` plugin over the demo's tools and scripted model, with a demo sign-in. Who you are comes
 * from a `demo_user` cookie (set by `/login?user=E17`, for the pages) or an `Authorization: Bearer <user>` header
 * (for curl); a real host checks its own sessions instead. The rules come from the host's records, never from the
 * caller: a start body names a request on record in `input` (`{ "request": "refund-O-1001" }`), and the host gives
 * the task that request's mandate (order O-1001, at most 199.00), money budget and success criterion.
 */
import Fastify, { type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { InspectionEvent } from 'xstate';
import { z } from 'zod';
import {
  type AgentModel,
  type Clock,
  type Principal,
  type SuccessCriterion,
  type TaskStore,
  createOrchestrator,
  systemClock,
} from '../../src/index.js';
import type { Orchestrator, StartTaskRequest } from '../../src/index.js';
import {
  type AgentServiceOptions,
  ServiceError,
  agentService,
  createStepper,
  problemFrameworkErrors,
  type StartBody,
  type Stepper,
} from '../../src/http/index.js';
import { bookingMandate, refundMandate } from '../../tools/mandates.js';
import { refundDeskAuthority } from '../../tools/refundOrder.js';
import demoHost from './host.js';
import {
  APPROVAL_REFUND_GOAL,
  APPROVAL_REFUND_TERMS,
  APPROVE_ABOVE_CENTS,
  BOOKING_GOAL,
  BOOKING_SUCCESS,
  BOOKING_TERMS,
  REFUND_GOAL,
  REFUND_SUCCESS,
  REFUND_TERMS,
} from './requests.js';

/**
 * The demo's people. E17 asks; E99 is a colleague in the same tenant; M1 is the manager who approves refunds above
 * 300.00 (four eyes: never their own); Z5 is at another company.
 */
export const DEMO_USERS: Record<string, Principal> = {
  E17: { userId: 'E17', tenantId: 'acme', scopes: ['orders:read', 'refunds:write', 'rooms:read', 'rooms:book'] },
  E99: { userId: 'E99', tenantId: 'acme', scopes: ['orders:read', 'refunds:write', 'rooms:read', 'rooms:book'] },
  M1: { userId: 'M1', tenantId: 'acme', scopes: ['refunds:approve'] },
  /**
   * The tenant's operator: sees, cancels and erases every acme task (the orchestrator's adminScope), and resolves
   * the reviews of writes whose outcome is unknown (the policy's review scope).
   */
  O1: { userId: 'O1', tenantId: 'acme', scopes: ['tasks:operate', 'tasks:review'] },
  Z5: { userId: 'Z5', tenantId: 'globex', scopes: ['orders:read', 'refunds:write', 'rooms:read', 'rooms:book'] },
};

export interface DemoServiceOptions {
  store: TaskStore;
  clock?: Clock;
  /** Step the model: every turn waits for `next` (the live page's button). */
  step?: boolean;
  inspect?: (event: InspectionEvent) => void;
  /** Where the live page's step controls also show the step (the Stately inspector's `showStep`). */
  inspector?: AgentServiceOptions['inspector'];
  /** Replaces the demo model (tests). */
  model?: AgentModel;
  expirySweepMs?: number;
  logger?: boolean;
  /**
   * The proxies whose `X-Forwarded-Host` is believed (Fastify's `trustProxy`: an address, CIDRs, a hop count); the
   * service then accepts a browser page served through them (its `trustProxy` option). Default: none.
   */
  trustProxy?: FastifyServerOptions['trustProxy'];
  /** The service's HTTP rate limit (default on; `false` off). */
  rateLimit?: AgentServiceOptions['rateLimit'];
  /** The CSRF tokens' secret (the service's `csrfSecret`); default random per process. */
  csrfSecret?: string;
  /** Extra exact origins whose pages may send decisions (the service's `allowedOrigins`). */
  allowedOrigins?: string[];
}

export interface DemoService {
  app: FastifyInstance;
  orchestrator: Orchestrator;
  stepper: Stepper | null;
  /** The business records the demo tools wrote. */
  rows(): Promise<string[]>;
  close(): Promise<void>;
}

export async function createDemoService(options: DemoServiceOptions): Promise<DemoService> {
  const clock = options.clock ?? systemClock;
  // Up to 100.00 on standing authority, up to 300.00 confirmed by the requester, above that four eyes (M1).
  const host = await demoHost(
    { store: 'file', dataDir: '', prefix: '', clock },
    { approveAboveCents: APPROVE_ABOVE_CENTS },
  );
  const model = options.model ?? host.model!;
  const stepper = options.step ? createStepper(model) : null;
  const orchestrator = createOrchestrator({
    tools: host.tools,
    mandates: [refundMandate, bookingMandate],
    loosen: refundDeskAuthority,
    // Operators (O1) read and cancel any task of their tenant, audited as themselves.
    adminScope: 'tasks:operate',
    model: stepper?.model ?? model,
    store: options.store,
    clock,
    inspect: options.inspect,
    ...(options.expirySweepMs !== undefined ? { expirySweepMs: options.expirySweepMs } : {}),
    // A stepped turn waits for a human.
    ...(stepper ? { modelTimeoutMs: 24 * 3_600_000 } : {}),
  });
  const trustProxy = options.trustProxy ?? false;
  // The router's own errors (a malformed %-escape, a task id past maxParamLength) as the service's problems.
  const app = Fastify({ logger: options.logger ?? false, trustProxy, frameworkErrors: problemFrameworkErrors });
  app.get('/', async (_request, reply) => reply.type('text/html; charset=utf-8').send(homePage()));
  app.get('/login', async (request, reply) => {
    const { user, next } = request.query as { user?: string; next?: string };
    if (!user || !Object.hasOwn(DEMO_USERS, user))
      return reply
        .code(400)
        .send({ code: 'unknown_user', message: `sign in as one of ${Object.keys(DEMO_USERS).join(', ')}` });
    const target = localPath(next) ?? '/inbox';
    return reply.header('set-cookie', `demo_user=${user}; Path=/; HttpOnly; SameSite=Strict`).redirect(target);
  });
  await app.register(agentService, {
    orchestrator,
    authenticate: demoAuthenticate,
    clock,
    ...(stepper ? { stepper } : {}),
    ...(options.inspector ? { inspector: options.inspector } : {}),
    startRequest: demoStartRequest,
    trustProxy: trustProxy !== false,
    ...(options.allowedOrigins ? { allowedOrigins: options.allowedOrigins } : {}),
    ...(options.csrfSecret ? { csrfSecret: options.csrfSecret } : {}),
    ...(options.rateLimit !== undefined ? { rateLimit: options.rateLimit } : {}),
    openapi: { info: { title: 'statechart-agent demo service', license: { name: 'MIT', identifier: 'MIT' } } },
  });
  return {
    app,
    orchestrator,
    stepper,
    rows: () => host.rows?.() ?? Promise.resolve([]),
    async close() {
      await app.close();
      await orchestrator.close();
    },
  };
}

/** The demo session: `Authorization: Bearer <user>` or the `demo_user` cookie. */
export function demoAuthenticate(request: FastifyRequest): Principal | null {
  const bearer = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1];
  const cookie = /(?:^|;\s*)demo_user=([^;]+)/.exec(request.headers.cookie ?? '')?.[1];
  const user = bearer ?? cookie;
  return user && Object.hasOwn(DEMO_USERS, user) ? DEMO_USERS[user]! : null;
}

/** A request the demo host has on record: whose it is, what was asked (the mandate), what counts as done, the budget. */
export interface DemoRequest {
  tenantId: string;
  /** Mints the request's mandate: a mandate authorises one task, so each start gets its own. */
  mandate: () => StartTaskRequest['mandate'];
  success: SuccessCriterion;
  limits?: StartTaskRequest['limits'];
}

/** The demo host's records, by id: a real host reads its tickets or orders here. */
export const DEMO_REQUESTS: Record<string, DemoRequest> = {
  'refund-O-1001': {
    tenantId: 'acme',
    mandate: () => refundMandate.of(REFUND_TERMS),
    success: REFUND_SUCCESS,
    limits: { money: 19_900 },
  },
  // Four eyes: 450.00 is above what E17 refunds alone, so M1 (refunds:approve) decides.
  'refund-O-1002': {
    tenantId: 'acme',
    mandate: () => refundMandate.of(APPROVAL_REFUND_TERMS),
    success: REFUND_SUCCESS,
    limits: { money: APPROVAL_REFUND_TERMS.max_amount_cents },
  },
  'booking-2026-09-28': { tenantId: 'acme', mandate: () => bookingMandate.of(BOOKING_TERMS), success: BOOKING_SUCCESS },
};

/** The demo refund's start body, as a caller sends it: the goal in their words and the request on record. */
export const REFUND_START_BODY = { goal: REFUND_GOAL, input: { request: 'refund-O-1001' } };

/** The four-eyes refund's start body: E17 asks, M1 approves (the refund is above 300.00). */
export const APPROVAL_REFUND_START_BODY = { goal: APPROVAL_REFUND_GOAL, input: { request: 'refund-O-1002' } };

/** What the demo reads in a start body's `input`: the id of a request on record. */
const demoInput = z.strictObject({ request: z.string().min(1).max(128) });

/**
 * The demo's `startRequest`: the request `body.input` names, looked up in the host's records for the caller's
 * tenant, gives the mandate, the money budget and the success criterion; the caller gives only the goal and the id.
 */
export function demoStartRequest(body: StartBody, principal: Principal): StartTaskRequest {
  const input = demoInput.safeParse(body.input);
  if (!input.success) {
    throw new ServiceError(
      400,
      'invalid_input',
      `input: name a request on record, as { "request": "refund-O-1001" } (${input.error.issues[0]!.message})`,
    );
  }
  const id = input.data.request;
  const record = Object.hasOwn(DEMO_REQUESTS, id) ? DEMO_REQUESTS[id]! : null;
  // Another tenant's request answers like one that does not exist.
  if (!record || record.tenantId !== principal.tenantId)
    throw new ServiceError(400, 'unknown_request', `no request ${JSON.stringify(id)} on record for your tenant`);
  return {
    principal,
    goal: body.goal,
    mandate: record.mandate(),
    success: record.success,
    ...(record.limits ? { limits: record.limits } : {}),
    ...(body.taskId ? { taskId: body.taskId } : {}),
  };
}

function homePage(): string {
  const users = Object.values(DEMO_USERS)
    .map(
      (p) =>
        `<li><a href="/login?user=${p.userId}">${p.userId}</a> @ ${p.tenantId} <small>(${p.scopes.join(', ')})</small></li>`,
    )
    .join('\n');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>statechart-agent demo service</title>
<link rel="stylesheet" href="/assets/style.css"></head><body><header><h1>statechart-agent demo service</h1></header><main>
<p>Sign in as a demo user (a cookie; curl uses <code>Authorization: Bearer E17</code>), then open the approval inbox.
The operator O1 has a console of every acme task: <a href="/login?user=O1&amp;next=/console">sign in as O1 and open it</a>.</p>
<ul>${users}</ul><p>API: <a href="/api/openapi.json">/api/openapi.json</a>. A task's live page: <code>/tasks/&lt;taskId&gt;</code>.</p>
</main></body></html>`;
}

export { APPROVAL_REFUND_GOAL, BOOKING_GOAL, REFUND_GOAL };

/**
 * `next` when it is a path on this site: one leading slash, then plain path characters. `//evil.example` is another
 * site to a browser (a scheme-relative URL), so no `//` is followed anywhere in it: no open redirect.
 */
export function localPath(next: unknown): string | null {
  return typeof next === 'string' && /^\/[A-Za-z0-9/_.-]*$/.test(next) && !next.includes('//') ? next : null;
}
