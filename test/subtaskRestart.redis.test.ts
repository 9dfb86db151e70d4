/**
 * Sub-tasks across restarts, on Redis: a process stops while the parent waits for its child, while the child's start
 * is in flight, or while the parent's store cannot be read as the child ends. In each case the next process carries
 * both on: one child, one refund, and the parent ends on the child's outcome.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { E17_SUPPORT } from '../examples/booking/requests.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { byKind, until } from './support/harness.js';
import { useTestRedis } from './support/redis.js';
import { scaled } from './support/timeScale.js';
import { childWaiting, startParent, subtaskSetup } from './support/subtasks.js';

const redis = await useTestRedis();

/** The store, with a switch that makes it fail for one task: saves of a state, or every load. */
function faultyStore(inner: TaskStore) {
  const faults = {
    failSaveOf: null as null | { taskId: string; stateValue: string },
    failLoadOf: null as string | null,
  };
  const store = new Proxy(inner, {
    get(target, key, receiver) {
      if (key === 'save')
        return async (request: Parameters<TaskStore['save']>[0]) => {
          const f = faults.failSaveOf;
          if (f && request.envelope.taskId === f.taskId && request.envelope.summary.stateValue === f.stateValue)
            throw new Error('the process died before this save');
          return target.save(request);
        };
      if (key === 'load')
        return async (taskId: string) => {
          if (faults.failLoadOf === taskId) throw new Error('the store is out of reach for this task');
          return target.load(taskId);
        };
      const value = Reflect.get(target, key, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store, faults };
}

describe.skipIf(!redis)('a sub-task across restarts, on Redis', () => {
  afterAll(() => redis?.stop());

  it(
    'carries parent and child on after a restart in the middle of the child',
    { timeout: scaled(30_000) },
    async () => {
      const prefix = redis!.freshPrefix();
      const store = new RedisStore({ client: redis!.connect(), prefix });
      const desk = new RefundDesk();
      try {
        const first = subtaskSetup({ store, desk });
        await startParent(first.orchestrator, 'r-mid');
        const child = await childWaiting(first.orchestrator, 'r-mid');
        await first.orchestrator.close(); // the process goes away with the parent waiting and the child waiting

        const second = subtaskSetup({ store, desk });
        await second.orchestrator.recover();
        const ok = await second.orchestrator.confirm(child.taskId, E17_SUPPORT, child.pendingConfirmation!);
        expect(ok.accepted).toBe(true);
        await until(async () => (await second.orchestrator.status('r-mid')).outcome !== null);
        const parent = await second.orchestrator.status('r-mid');
        expect(parent.state).toBe('done');
        expect(desk.refunds).toHaveLength(1);
        expect((await store.list()).map((t) => t.taskId).sort()).toEqual(['r-mid', child.taskId].sort());
        await second.orchestrator.close();
      } finally {
        await redis!.deleteKeys(prefix);
      }
    },
  );

  it(
    'finds the child a start already made when the process died before the parent recorded it: no second child',
    {
      timeout: scaled(30_000),
    },
    async () => {
      const prefix = redis!.freshPrefix();
      const { store, faults } = faultyStore(new RedisStore({ client: redis!.connect(), prefix }));
      const desk = new RefundDesk();
      try {
        faults.failSaveOf = { taskId: 'r-start', stateValue: 'executing.awaitingSubtask' };
        const first = subtaskSetup({ store, desk });
        await startParent(first.orchestrator, 'r-start');
        // The child was made and runs; the parent's record of it never landed.
        await until(async () => (await store.list()).length === 2);
        const childId = (await store.list()).find((t) => t.taskId !== 'r-start')!.taskId;
        await until(async () => (await store.load(childId))?.summary.state === 'waiting_for_confirmation');
        expect((await store.load('r-start'))?.summary.stateValue).toBe('executing.writing');
        await first.orchestrator.close();
        faults.failSaveOf = null;

        const second = subtaskSetup({ store, desk });
        const report = await second.orchestrator.recover();
        expect(report.resumed).toContain('r-start');
        await until(async () => (await store.load('r-start'))?.summary.state === 'waiting_for_subtask');
        const child = await second.orchestrator.status(childId);
        await second.orchestrator.confirm(childId, E17_SUPPORT, child.pendingConfirmation!);
        await until(async () => (await second.orchestrator.status('r-start')).outcome !== null);
        expect((await second.orchestrator.status('r-start')).state).toBe('done');
        expect(await store.list()).toHaveLength(2);
        expect(desk.refunds).toHaveLength(1);
        const audit = await second.orchestrator.audit('r-start');
        expect(byKind(audit, 'tool_started').filter((e) => e.tool === 'delegate_refund')).toHaveLength(1);
        expect(byKind(audit, 'write_lookup').map((e) => `${e.tool}:${e.result}`)).toEqual(['delegate_refund:found']);
        await second.orchestrator.close();
      } finally {
        await redis!.deleteKeys(prefix);
      }
    },
  );

  it(
    'gives the parent its child outcome at recovery when the child ended while the parent could not be reached',
    {
      timeout: scaled(30_000),
    },
    async () => {
      const prefix = redis!.freshPrefix();
      const { store, faults } = faultyStore(new RedisStore({ client: redis!.connect(), prefix }));
      const desk = new RefundDesk();
      try {
        const first = subtaskSetup({ store, desk });
        await startParent(first.orchestrator, 'r-late');
        const child = await childWaiting(first.orchestrator, 'r-late');
        faults.failLoadOf = 'r-late';
        await first.orchestrator.confirm(child.taskId, E17_SUPPORT, child.pendingConfirmation!);
        await until(async () => (await store.load(child.taskId))?.summary.state === 'done');
        await first.orchestrator.close(); // the child's end did not reach the parent
        faults.failLoadOf = null;
        expect((await store.load('r-late'))?.summary.state).toBe('waiting_for_subtask');

        const second = subtaskSetup({ store, desk });
        await second.orchestrator.recover();
        await until(async () => (await store.load('r-late'))?.summary.state === 'done');
        expect(desk.refunds).toHaveLength(1);
        expect(await store.list()).toHaveLength(2);
        await second.orchestrator.close();
      } finally {
        await redis!.deleteKeys(prefix);
      }
    },
  );
});
