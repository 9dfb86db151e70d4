/**
 * Task ids over HTTP are per caller: a start with an id someone else already uses answers as if the id were free
 * (201, the caller's own task), so a start can no longer tell a caller that another tenant, or a colleague, has a task
 * by that id, while a read of it says 404. The stored id is `tenant:user:id`; the routes take the caller's own id too.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEMO_USERS, REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { agentService, callerTaskId } from '../src/http/index.js';
import { MemoryStore, type Orchestrator, createOrchestrator } from '../src/index.js';
import { reply, scriptedModel } from '../src/testing/index.js';

/** A greeting service (no rules to derive) where E17, E99 (acme) and Z5 (globex) may all start tasks. */
let app: FastifyInstance;
let orchestrator: Orchestrator;
let demo: DemoService;
beforeEach(async () => {
  const greetings = Array.from({ length: 10 }, () => reply.answer('Hello.'));
  orchestrator = createOrchestrator({ tools: [], model: scriptedModel(greetings), store: new MemoryStore() });
  app = Fastify();
  await app.register(agentService, {
    orchestrator,
    authenticate: (request) =>
      DEMO_USERS[/^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1] ?? ''] ?? null,
    startRequest: (body) => ({ goal: body.goal, ...(body.taskId ? { taskId: body.taskId } : {}) }),
    pages: false,
  });
  demo = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0 });
});
afterEach(async () => {
  await app.close();
  await orchestrator.close();
  await demo.close();
});

const call = (user: string, method: 'GET' | 'POST', url: string, payload?: object, on = app) =>
  on.inject({ method, url, headers: { authorization: `Bearer ${user}` }, ...(payload ? { payload } : {}) });
const start = (user: string, taskId: string) => call(user, 'POST', '/api/tasks', { goal: 'Greet me', taskId });

describe('task ids over HTTP', () => {
  it('give another tenant no sign of a task id in use: its start is 201, as for a free id, and reads stay 404', async () => {
    const mine = await start('E17', 'shared-id');
    expect(mine.statusCode).toBe(201);
    expect(mine.json().status.taskId).toBe('acme:E17:shared-id');
    await orchestrator.settled('acme:E17:shared-id');

    for (const id of ['shared-id', 'acme:E17:shared-id'])
      expect((await call('Z5', 'GET', `/api/tasks/${id}`)).statusCode, id).toBe(404);
    // Z5 (globex) and E99 (E17's colleague) start the same id: each gets a task of their own, not 409 task_exists.
    for (const [user, stored] of [
      ['Z5', 'globex:Z5:shared-id'],
      ['E99', 'acme:E99:shared-id'],
    ] as const) {
      const theirs = await start(user, 'shared-id');
      expect([user, theirs.statusCode, theirs.json().status.taskId]).toEqual([user, 201, stored]);
      await orchestrator.settled(stored);
      // Their own id names their own task; a second start of it is theirs to be told about.
      expect((await call(user, 'GET', '/api/tasks/shared-id')).json().status.taskId).toBe(stored);
      const again = await start(user, 'shared-id');
      expect([again.statusCode, again.json().code]).toEqual([409, 'task_exists']);
    }
    // E17 still reaches their own, by either id, and nothing of theirs changed.
    expect((await call('E17', 'GET', '/api/tasks/shared-id')).json().status.taskId).toBe('acme:E17:shared-id');
    expect((await call('E17', 'GET', '/api/tasks/acme:E17:shared-id')).statusCode).toBe(200);
  });

  it("cannot reach into another caller's namespace by naming its stored id", async () => {
    expect((await start('E17', 'x')).statusCode).toBe(201);
    const forged = await start('Z5', 'acme:E17:x');
    expect([forged.statusCode, forged.json().status.taskId]).toEqual([201, 'globex:Z5:acme:E17:x']);
    expect(callerTaskId({ tenantId: 'a:b', userId: 'c' }, 'd')).not.toBe(
      callerTaskId({ tenantId: 'a', userId: 'b:c' }, 'd'),
    );
  });

  it('carries the stored id through the inbox and decisions', async () => {
    const started = await call('E17', 'POST', '/api/tasks', { ...REFUND_START_BODY, taskId: 'refund-9' }, demo.app);
    const taskId = started.json().status.taskId as string;
    expect(taskId).toBe('acme:E17:refund-9');
    const status = await demo.orchestrator.settled(taskId);
    const inbox = (await call('E17', 'GET', '/api/inbox', undefined, demo.app)).json().items as { taskId: string }[];
    expect(inbox.map((item) => item.taskId)).toEqual([taskId]);
    const pending = status.pendingConfirmation!;
    const confirmed = await call(
      'E17',
      'POST',
      `/api/tasks/${taskId}/confirm`,
      { confirmationId: pending.id, argsHash: pending.argsHash },
      demo.app,
    );
    expect([confirmed.statusCode, confirmed.json().accepted]).toEqual([200, true]);
  });
});
