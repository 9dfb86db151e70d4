/**
 * The demo as an HTTP service (`npm run serve`, examples/booking/serve.ts; the service tests build it too): the
 * `statechart-agent/fastify` plugin over the demo's tools and scripted model, with a demo sign-in. Who you are comes
 * from a `demo_user` cookie (set by `/login?user=E17`, for the pages) or an `Authorization: Bearer <user>` header
 * (for curl); a real host checks its own sessions instead. The host reads the mandate off the request, as the demo
 * does: a start request with the refund goal gets the refund mandate (order O-1001, at most 199.00) and its money
 * budget, the booking goal the booking mandate.
 */
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import type { InspectionEvent } from 'xstate';
import { type AgentModel, type Clock, type Principal, type TaskStore, createOrchestrator, systemClock } from '../../src/index.js';
import type { Orchestrator, StartTaskRequest } from '../../src/index.js';
import { agentService, createStepper, type Stepper } from '../../src/http/index.js';
import { bookingMandate, refundMandate } from '../../tools/mandates.js';
import demoHost from './host.js';
import { BOOKING_GOAL, BOOKING_SUCCESS, BOOKING_TERMS, REFUND_GOAL, REFUND_SUCCESS, REFUND_TERMS } from './requests.js';

/** The demo's people. E17 asks; E99 is a colleague in the same tenant; M1 approves refunds; Z5 is at another company. */
export const DEMO_USERS: Record<string, Principal> = {
  E17: { userId: 'E17', tenantId: 'acme', scopes: ['orders:read', 'refunds:write', 'rooms:read', 'rooms:book'] },
  E99: { userId: 'E99', tenantId: 'acme', scopes: ['orders:read', 'refunds:write', 'rooms:read', 'rooms:book'] },
  M1: { userId: 'M1', tenantId: 'acme', scopes: ['refunds:approve'] },
  Z5: { userId: 'Z5', tenantId: 'globex', scopes: ['orders:read', 'refunds:write', 'rooms:read', 'rooms:book'] },
};

export interface DemoServiceOptions {
  store: TaskStore;
  clock?: Clock;
  /** Step the model: every turn waits for `next` (the live page's button). */
  step?: boolean;
  inspect?: (event: InspectionEvent) => void;
  /** Replaces the demo model (tests). */
  model?: AgentModel;
  expirySweepMs?: number;
  logger?: boolean;
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
  const host = await demoHost({ store: 'file', dataDir: '', prefix: '', clock });
  const model = options.model ?? host.model!;
  const stepper = options.step ? createStepper(model) : null;
  const orchestrator = createOrchestrator({
    tools: host.tools,
    mandates: [refundMandate, bookingMandate],
    model: stepper?.model ?? model,
    store: options.store,
    clock,
    inspect: options.inspect,
    ...(options.expirySweepMs !== undefined ? { expirySweepMs: options.expirySweepMs } : {}),
    // A stepped turn waits for a human.
    ...(stepper ? { modelTimeoutMs: 24 * 3_600_000 } : {}),
  });
  const app = Fastify({ logger: options.logger ?? false });
  app.get('/', async (_request, reply) => reply.type('text/html; charset=utf-8').send(homePage()));
  app.get('/login', async (request, reply) => {
    const { user, next } = request.query as { user?: string; next?: string };
    if (!user || !Object.hasOwn(DEMO_USERS, user)) return reply.code(400).send({ code: 'unknown_user', message: `sign in as one of ${Object.keys(DEMO_USERS).join(', ')}` });
    const target = typeof next === 'string' && /^\/[A-Za-z0-9/_.-]*$/.test(next) ? next : '/inbox';
    return reply.header('set-cookie', `demo_user=${user}; Path=/; HttpOnly; SameSite=Strict`).redirect(target);
  });
  await app.register(agentService, {
    orchestrator,
    authenticate: demoAuthenticate,
    clock,
    ...(stepper ? { stepper } : {}),
    startRequest: demoStartRequest,
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

/** The host reads what the user asked for off the request: the demo's two requests get their mandates, one per request. */
export function demoStartRequest(body: { goal: string; taskId?: string; limits?: Record<string, number> }, principal: Principal): StartTaskRequest {
  const id = body.taskId ? { taskId: body.taskId } : {};
  if (body.goal === REFUND_GOAL) return { principal, goal: body.goal, mandate: refundMandate.of(REFUND_TERMS), success: REFUND_SUCCESS, limits: { money: 19_900 }, ...id };
  if (body.goal === BOOKING_GOAL) return { principal, goal: body.goal, mandate: bookingMandate.of(BOOKING_TERMS), success: BOOKING_SUCCESS, ...id };
  return { principal, goal: body.goal, ...(body.limits ? { limits: body.limits } : {}), ...id };
}

function homePage(): string {
  const users = Object.values(DEMO_USERS)
    .map((p) => `<li><a href="/login?user=${p.userId}">${p.userId}</a> @ ${p.tenantId} <small>(${p.scopes.join(', ')})</small></li>`)
    .join('\n');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>statechart-agent demo service</title>
<link rel="stylesheet" href="/assets/style.css"></head><body><header><h1>statechart-agent demo service</h1></header><main>
<p>Sign in as a demo user (a cookie; curl uses <code>Authorization: Bearer E17</code>), then open the approval inbox.</p>
<ul>${users}</ul><p>API: <a href="/api/openapi.json">/api/openapi.json</a>. A task's live page: <code>/tasks/&lt;taskId&gt;</code>.</p>
</main></body></html>`;
}

export { BOOKING_GOAL, REFUND_GOAL };
