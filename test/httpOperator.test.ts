/**
 * The operator over HTTP: a holder of the orchestrator's adminScope sees every task of their tenant (never another
 * tenant's), filters and pages the list, reads a colleague's task and cancels it; the cancel is audited as theirs.
 * A colleague without the scope still gets 404, like for a task that does not exist.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEMO_USERS, type DemoService, REFUND_START_BODY, createDemoService } from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';
import { ManualClock } from '../src/testing/index.js';

let service: DemoService;

beforeEach(async () => {
  service = await createDemoService({ store: new MemoryStore(), clock: new ManualClock(), expirySweepMs: 0 });
});
afterEach(() => service.close());

const call = (user: string, method: 'GET' | 'POST', url: string, payload?: object) =>
  service.app.inject({ method, url, headers: { authorization: `Bearer ${user}` }, ...(payload ? { payload } : {}) });

async function startAs(user: string, taskId: string) {
  const started = await call(user, 'POST', '/api/tasks', { ...REFUND_START_BODY, taskId });
  expect(started.statusCode).toBe(201);
  const id = started.json().status.taskId as string;
  await service.orchestrator.settled(id);
  return id;
}

describe('an operator of the tenant', () => {
  it('lists, filters and pages every task of the tenant, and none of another', async () => {
    const e17 = await startAs('E17', 'refund-a');
    const e99 = await startAs('E99', 'refund-b');
    // Another tenant's task (started through the library: the demo's requests are acme's).
    await service.orchestrator.start({ principal: DEMO_USERS.Z5!, goal: 'Book a room', taskId: 'globex-1' });

    const all = (await call('O1', 'GET', '/api/tasks')).json().tasks as { taskId: string; access: string }[];
    expect(all.map((t) => t.taskId).sort()).toEqual([e17, e99].sort());
    expect(all.every((t) => t.access === 'operator')).toBe(true);
    const byUser = (await call('O1', 'GET', '/api/tasks?user=E99')).json().tasks as { taskId: string }[];
    expect(byUser.map((t) => t.taskId)).toEqual([e99]);
    const search = (await call('O1', 'GET', '/api/tasks?q=refund-a')).json().tasks as { taskId: string }[];
    expect(search.map((t) => t.taskId)).toEqual([e17]);
    const first = (await call('O1', 'GET', '/api/tasks?limit=1')).json().tasks as { taskId: string }[];
    const second = (await call('O1', 'GET', '/api/tasks?limit=1&offset=1')).json().tasks as { taskId: string }[];
    expect([...first, ...second].map((t) => t.taskId).sort()).toEqual([e17, e99].sort());
    // A colleague without the scope sees only their own.
    const colleague = (await call('E99', 'GET', '/api/tasks')).json().tasks as { taskId: string }[];
    expect(colleague.map((t) => t.taskId)).toEqual([e99]);
  });

  it("reads a colleague's task and cancels it, audited as the operator; a colleague without the scope gets 404", async () => {
    const id = await startAs('E17', 'refund-x');
    expect((await call('E99', 'GET', `/api/tasks/${encodeURIComponent(id)}`)).statusCode).toBe(404);
    expect(
      (await call('E99', 'POST', `/api/tasks/${encodeURIComponent(id)}/cancel`, { reason: 'no' })).statusCode,
    ).toBe(404);
    const read = await call('O1', 'GET', `/api/tasks/${encodeURIComponent(id)}`);
    expect(read.statusCode).toBe(200);
    expect(read.json()).toMatchObject({ access: 'operator' });
    const cancelled = await call('O1', 'POST', `/api/tasks/${encodeURIComponent(id)}/cancel`, {
      reason: 'stuck order',
    });
    expect(cancelled.statusCode).toBe(200);
    const status = await service.orchestrator.settled(id);
    expect(status.state).toBe('cancelled');
    expect(status.outcome?.reason.message).toBe('cancelled by O1: stuck order');
    const audit = await service.orchestrator.audit(id);
    expect(audit.find((e) => e.kind === 'cancel_requested' || e.kind === 'task_stopped')).toBeTruthy();
  });
});
