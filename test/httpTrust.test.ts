/**
 * The service's trust boundary: the caller's body gives the goal, a task id and an input the host reads; the
 * host's session gives who the task runs as; the host's `startRequest` gives the mandate, the limits and the success
 * criterion. A body that tries to set any of them is refused before the host's code runs, and nothing starts.
 */
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { DEMO_USERS } from '../examples/booking/service.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { MemoryStore, type Orchestrator, type Principal, createOrchestrator } from '../src/index.js';
import {
  CALLER_FORBIDDEN_FIELDS,
  ServiceError,
  ServiceOptionsError,
  agentService,
  callerTaskId,
  type AgentServiceOptions,
  type StartRequest,
} from '../src/http/index.js';
import { startRequestSchema } from '../src/orchestrator/options.js';
import { reply, scriptedModel } from '../src/testing/index.js';
import { getOrder } from '../tools/getOrder.js';
import { refundMandate } from '../tools/mandates.js';
import { refundOrder } from '../tools/refundOrder.js';

const E17 = DEMO_USERS.E17!;
const FIFTY_THOUSAND = 5_000_000;

/** The host's own records: what each tenant's customers asked to have refunded. */
const REFUND_REQUESTS: Record<string, { tenantId: string; orderId: string; maxCents: number }> = {
  'ticket-7': { tenantId: 'acme', orderId: 'O-1001', maxCents: 19_900 },
};

/** The host's `startRequest`: the ticket the caller names gives the mandate; the caller gives the goal. */
const fromTickets: StartRequest = (body, principal) => {
  const ticket = z.strictObject({ ticket: z.string() }).safeParse(body.input);
  const record = ticket.success ? REFUND_REQUESTS[ticket.data.ticket] : undefined;
  if (!record || record.tenantId !== principal.tenantId)
    throw new ServiceError(400, 'unknown_ticket', 'no such ticket');
  return {
    principal,
    goal: body.goal,
    taskId: body.taskId,
    mandate: refundMandate.of({ order_id: record.orderId, max_amount_cents: record.maxCents }),
  };
};

let app: FastifyInstance | null = null;
let orchestrator: Orchestrator | null = null;

/** An orchestrator with no tools and a model that is never asked: for the service's own checks. */
const toollessOrchestrator = () =>
  createOrchestrator({ tools: [], model: scriptedModel([]), store: new MemoryStore(), expirySweepMs: 0 });
afterEach(async () => {
  await app?.close();
  await orchestrator?.close();
  app = orchestrator = null;
});

/** A refund service whose model proposes refunding 50,000.00 on O-1001. */
async function refundService(startRequest: StartRequest = fromTickets, server: FastifyServerOptions = {}) {
  const desk = new RefundDesk();
  const store = new MemoryStore();
  orchestrator = createOrchestrator({
    tools: [getOrder(desk), refundOrder(desk, { confirmAboveCents: 10_000 })],
    mandates: [refundMandate],
    model: scriptedModel([
      reply.call('refund_order', { order_id: 'O-1001', amount_cents: FIFTY_THOUSAND, reason: 'customer asked' }),
      reply.answer('I could not refund 50,000.00.'),
    ]),
    store,
    expirySweepMs: 0,
  });
  const host = vi.fn(startRequest);
  app = Fastify(server);
  await app.register(agentService, {
    orchestrator,
    authenticate: (request) => DEMO_USERS[String(request.headers['x-user'])] ?? null,
    startRequest: host,
    pages: false,
  });
  const start = (payload: object, user = 'E17') =>
    app!.inject({ method: 'POST', url: '/api/tasks', headers: { 'x-user': user }, payload });
  return { desk, store, host, start, orchestrator };
}

const body = { goal: 'Refund 50,000.00 on order O-1001', input: { ticket: 'ticket-7' } };

describe('a start body that sets the rules', () => {
  it('refuses a 50,000.00 refund under a mandate the caller wrote (403 caller_cannot_set_rules), and starts nothing', async () => {
    const { desk, store, host, start } = await refundService();
    const forged = await start({
      ...body,
      mandate: refundMandate.of({ order_id: 'O-1001', max_amount_cents: FIFTY_THOUSAND }),
      limits: { money: FIFTY_THOUSAND },
    });
    expect([forged.statusCode, forged.json().code]).toEqual([403, 'caller_cannot_set_rules']);
    expect(forged.json().message).toMatch(/may not set mandate, limits:/);
    expect(host).not.toHaveBeenCalled();
    expect(await store.list()).toEqual([]);
    expect(desk.refunds).toEqual([]);
  });

  it('runs the same request under the mandate the host derives, which refuses the 50,000.00', async () => {
    const { desk, host, start, orchestrator } = await refundService();
    const started = await start({ ...body, taskId: 'refund-1' });
    expect(started.statusCode).toBe(201);
    expect(host).toHaveBeenCalledWith(
      { goal: body.goal, input: body.input, taskId: 'refund-1' },
      E17,
      expect.anything(),
    );
    const status = await orchestrator.settled(callerTaskId(E17, 'refund-1'));
    expect(status.mandate).toEqual({
      kind: 'refund',
      terms: { order_id: 'O-1001', max_amount_cents: 19_900 },
      id: expect.any(String),
    });
    expect(status.budget.limits.money).toBe(19_900);
    expect(status.principal).toEqual(E17);
    const audit = await orchestrator.audit(callerTaskId(E17, 'refund-1'));
    expect(audit.some((entry) => JSON.stringify(entry).includes('"outside_mandate"'))).toBe(true);
    expect(desk.refunds).toEqual([]);
  });

  it('knows every field of the core start request the body lacks as one the caller may not set', () => {
    expect([...CALLER_FORBIDDEN_FIELDS].sort()).toEqual(['limits', 'mandate', 'principal', 'success', 'workflow']);
  });

  it.each([
    ['principal', DEMO_USERS.M1],
    ['mandate', refundMandate.of({ order_id: 'O-1001', max_amount_cents: 1 })],
    ['mandate', null],
    ['limits', { money: 1 }],
    ['success', { tool: 'refund_order', match: { status: 'succeeded' } }],
  ])('refuses a body that sets %s (%j) before the host sees it', async (field, value) => {
    const { store, host, start } = await refundService();
    const response = await start({ ...body, [field]: value });
    expect([response.statusCode, response.json().code]).toEqual([403, 'caller_cannot_set_rules']);
    expect(response.json().message).toContain(`may not set ${field}:`);
    expect(host).not.toHaveBeenCalled();
    expect(await store.list()).toEqual([]);
  });

  it('names the rules first, even in a body that is wrong in other ways', async () => {
    const { start } = await refundService();
    const response = await start({ principal: DEMO_USERS.M1, success: {}, extra: 1 });
    expect([response.statusCode, response.json().message]).toEqual([
      403,
      expect.stringContaining('may not set principal, success:'),
    ]);
  });
});

describe('the principal a task runs as', () => {
  it.each([
    ['another user of the tenant', DEMO_USERS.E99!],
    ['a user of another tenant', { ...E17, tenantId: 'globex' }],
    ['the caller with a scope the session lacks', { ...E17, scopes: [...E17.scopes, 'refunds:approve'] }],
  ])(
    'refuses a startRequest that returns %s (500 start_request_principal_mismatch)',
    async (_name, principal: Principal) => {
      const { store, start } = await refundService(async (...args) => ({ ...(await fromTickets(...args)), principal }));
      const response = await start(body);
      expect([response.statusCode, response.json().code]).toEqual([500, 'start_request_principal_mismatch']);
      expect(response.json().message).toMatch(/startRequest/);
      expect(await store.list()).toEqual([]);
    },
  );

  it("refuses a startRequest that edits the principal it was given (the check is against the session's)", async () => {
    const { store, start } = await refundService((input, principal, request) => {
      principal.userId = 'M1';
      return fromTickets(input, principal, request);
    });
    expect((await start(body)).json().code).toBe('start_request_principal_mismatch');
    expect(await store.list()).toEqual([]);
  });

  it('runs as the caller when startRequest leaves the principal out, and with fewer scopes when it narrows them', async () => {
    const { start, orchestrator } = await refundService(async (...args) => {
      const { principal: _left, ...rest } = await fromTickets(...args);
      return args[0].taskId === 'narrow' ? { ...rest, principal: { ...E17, scopes: ['orders:read'] } } : rest;
    });
    expect((await start({ ...body, taskId: 'plain' })).statusCode).toBe(201);
    expect((await orchestrator.status(callerTaskId(E17, 'plain'))).principal).toEqual(E17);
    expect((await start({ ...body, taskId: 'narrow' })).statusCode).toBe(201);
    expect((await orchestrator.status(callerTaskId(E17, 'narrow'))).principal).toEqual({
      ...E17,
      scopes: ['orders:read'],
    });
  });

  it('refuses a startRequest that returns nothing (500 start_request_invalid)', async () => {
    const { store, start } = await refundService((() => undefined) as unknown as StartRequest);
    expect((await start(body)).json().code).toBe('start_request_invalid');
    expect(await store.list()).toEqual([]);
  });

  it("answers with the host's own refusal for an input it cannot take, and starts nothing", async () => {
    const { store, start } = await refundService();
    const other = await start({ ...body, input: { ticket: 'ticket-404' } });
    expect([other.statusCode, other.json().code]).toEqual([400, 'unknown_ticket']);
    const otherTenant = await start(body, 'Z5');
    expect([otherTenant.statusCode, otherTenant.json().code]).toEqual([400, 'unknown_ticket']);
    expect(await store.list()).toEqual([]);
  });
});

describe("a task id that is too long once it is the caller's", () => {
  it('says how long it may be for this caller (it is stored under their tenant and user), and asks nothing of the host', async () => {
    // URLs long enough for any stored id: the library's own limit is the one that holds.
    const { start, host, store } = await refundService(fromTickets, { routerOptions: { maxParamLength: 600 } });
    // 510 characters pass the start request's own limit (512), but not once stored as acme:E17:<id>.
    const refused = await start({ ...body, taskId: 'r'.repeat(510) });
    expect([refused.statusCode, refused.json().code]).toEqual([400, 'invalid_request']);
    expect(refused.json().message).toBe(
      'body: taskId: at most 503 characters for this caller (the service stores it as acme:E17:<taskId>, at most 512 characters); this one has 510',
    );
    expect(host).not.toHaveBeenCalled();
    expect(await store.list()).toEqual([]);
    const started = await start({ ...body, taskId: 'r'.repeat(503) });
    expect(started.statusCode).toBe(201);
    const url = `/api/tasks/${encodeURIComponent(started.json().status.taskId)}`;
    expect((await app!.inject({ url, headers: { 'x-user': 'E17' } })).statusCode).toBe(200);
  });

  it("refuses one that the app's URLs could not carry, so no task is started that nobody can read", async () => {
    // Fastify's default maxParamLength (100): approvers and pages address a task by its stored id, percent-encoded.
    const { start, host, store } = await refundService();
    // acme:E17:<id> is acme%3AE17%3A<id> in a path: 13 + 87 = 100 characters fit, 88 do not.
    const refused = await start({ ...body, taskId: 'r'.repeat(88) });
    expect([refused.statusCode, refused.json().code]).toEqual([400, 'invalid_request']);
    expect(refused.json().message).toBe(
      "body: taskId: too long for this service's URLs: the task's id acme:E17:<taskId> takes 101 characters percent-encoded in a path, and this app's router takes at most 100 (Fastify's routerOptions.maxParamLength; raise it where the app is created)",
    );
    expect(host).not.toHaveBeenCalled();
    expect(await store.list()).toEqual([]);
    const started = await start({ ...body, taskId: 'r'.repeat(87) });
    expect(started.statusCode).toBe(201);
    const url = `/api/tasks/${encodeURIComponent(started.json().status.taskId)}`;
    expect(url.length - '/api/tasks/'.length).toBe(100);
    expect((await app!.inject({ url, headers: { 'x-user': 'E17' } })).statusCode).toBe(200);
  });

  it('takes the limit from the top-level maxParamLength too (deprecated in Fastify 5, still obeyed)', async () => {
    const { start } = await refundService(fromTickets, { maxParamLength: 40 } as FastifyServerOptions);
    expect((await start({ ...body, taskId: 'r'.repeat(28) })).json().message).toContain('router takes at most 40');
    expect((await start({ ...body, taskId: 'r'.repeat(27) })).statusCode).toBe(201);
  });
});

describe('registering the service', () => {
  const base = () => ({ orchestrator: orchestrator!, authenticate: () => E17, pages: false });

  it('throws ServiceOptionsError without startRequest, saying what to write', async () => {
    orchestrator = toollessOrchestrator();
    app = Fastify();
    const registering = app.register(agentService, base() as unknown as AgentServiceOptions);
    await expect(registering).rejects.toThrow(ServiceOptionsError);
    await expect(registering).rejects.toMatchObject({
      option: 'startRequest',
      message: expect.stringMatching(/derive the task's mandate, limits and success criterion from your own data/),
    });
  });

  it('throws ServiceOptionsError without authenticate', async () => {
    orchestrator = toollessOrchestrator();
    app = Fastify();
    const options = { ...base(), authenticate: undefined, startRequest: fromTickets };
    await expect(app.register(agentService, options as unknown as AgentServiceOptions)).rejects.toMatchObject({
      name: 'ServiceOptionsError',
      option: 'authenticate',
    });
  });
});

describe('a session check that throws', () => {
  it("answers 401 without the thrown message (it is the host's internals), and logs it", async () => {
    orchestrator = toollessOrchestrator();
    const logged: unknown[] = [];
    app = Fastify({
      logger: { level: 'warn', stream: { write: (line: string) => void logged.push(JSON.parse(line)) } },
    });
    await app.register(agentService, {
      orchestrator,
      authenticate: () => {
        throw new Error('connect ECONNREFUSED 10.0.0.5:6379 (redis://sessions:s3cret@10.0.0.5/0)');
      },
      startRequest: fromTickets,
      pages: false,
    });
    for (const [method, url] of [
      ['GET', '/api/tasks'],
      ['POST', '/api/tasks'],
    ] as const) {
      const response = await app.inject({ method, url, ...(method === 'POST' ? { payload: body } : {}) });
      expect([response.statusCode, response.json().code]).toEqual([401, 'unauthenticated']);
      expect(response.body).not.toMatch(/10\.0\.0\.5|s3cret|ECONNREFUSED/);
      expect(response.json().message).toMatch(/^not signed in: the session could not be checked/);
    }
    expect(JSON.stringify(logged)).toMatch(/ECONNREFUSED 10\.0\.0\.5/);
    expect(await orchestrator.list()).toEqual([]);
  });
});

describe('a session check that returns more than a principal', () => {
  it('answers 500 invalid_principal naming the field (never its value), so the host sees what to drop', async () => {
    orchestrator = toollessOrchestrator();
    app = Fastify();
    await app.register(agentService, {
      orchestrator,
      // The host's session user, as its login library keeps it: with the bearer token beside who the caller is.
      authenticate: () => ({ ...E17, accessToken: 'eyJhbGciOi.secret-token' }) as unknown as Principal,
      startRequest: fromTickets,
      pages: false,
    });
    const response = await app.inject({ method: 'GET', url: '/api/tasks' });
    expect([response.statusCode, response.json().code]).toEqual([500, 'invalid_principal']);
    expect(response.json().message).toMatch(/accessToken/);
    expect(response.json().message).toMatch(/userId, tenantId, scopes/);
    expect(response.body).not.toMatch(/secret-token/);
  });
});

describe('the start route in the OpenAPI document', () => {
  it("documents the body as goal, taskId and input (the core's goal and task id) and the refusals", async () => {
    await refundService();
    const document = (await app!.inject({ url: '/api/openapi.json' })).json();
    const start = document.paths['/api/tasks'].post;
    const schema = start.requestBody.content['application/json'].schema;
    expect(Object.keys(schema.properties).sort()).toEqual(['goal', 'input', 'taskId']);
    expect(schema.additionalProperties).toBe(false);
    const core = z.toJSONSchema(startRequestSchema, { io: 'input' }) as { properties: Record<string, object> };
    expect(schema.properties.goal).toMatchObject(core.properties.goal!);
    expect(schema.properties.taskId).toMatchObject(core.properties.taskId!);
    expect(start.responses['403'].description).toContain('caller_cannot_set_rules');
    expect(start.responses['500'].description).toContain('start_request_principal_mismatch');
  });
});
