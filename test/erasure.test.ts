/**
 * Erasure and retention at the orchestrator: what it refuses to erase, what it cancels first when asked, and how
 * every later call about an erased task answers. The stores' own erasure is the contract suite's
 * (test/support/erasureContract.ts).
 */
import { describe, expect, it } from 'vitest';
import {
  AgentError,
  HostRequestError,
  TaskBusyError,
  TaskErasedError,
  TaskNotFoundError,
  TaskRunningError,
} from '../src/errors.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { ManualClock } from '../src/testing/manualClock.js';
import { reply } from '../src/testing/scriptedModel.js';
import { E17, SUPPORT, harness, until } from './support/harness.js';

const GDPR = { reason: 'gdpr_erasure', by: 'dpo-7' };
const OTHER = { ...E17, userId: 'E99' };

/**
 * Decides by the goal: "hang..." waits until the task is cancelled, "ask..." asks the user, anything else answers.
 * Counts the turns in flight, so a test can wait for a hanging one.
 */
function byGoal(): AgentModel & { hanging: number } {
  const model = {
    name: 'by-goal',
    hanging: 0,
    async decide(request: Parameters<AgentModel['decide']>[0]) {
      if (request.goal.startsWith('hang')) {
        model.hanging += 1;
        try {
          await new Promise((_, reject) =>
            request.signal.addEventListener('abort', () => reject(request.signal.reason), { once: true }),
          );
        } finally {
          model.hanging -= 1;
        }
      }
      return request.goal.startsWith('ask') ? reply.ask('Which building?') : reply.answer('Booked R7.');
    },
  };
  return model;
}

function setup(options: { store?: MemoryStore; clock?: ManualClock } = {}) {
  const model = byGoal();
  const clock = options.clock ?? new ManualClock();
  const store = options.store ?? new MemoryStore();
  const h = harness({ model, clock, store, expirySweepMs: 0 });
  return { ...h, store, model, clock };
}

describe('Orchestrator.erase', () => {
  describe('when the task has finished', () => {
    it('erases it, returns its tombstone, and answers every later call about it with TaskErasedError', async () => {
      const { orchestrator, store, clock } = setup();
      const done = await orchestrator.run({ principal: E17, goal: 'book a room for 3', taskId: 'done-1' });
      expect(done.state).toBe('answered');
      const audit = await orchestrator.audit('done-1');

      const tombstone = await orchestrator.erase('done-1', GDPR);
      expect(tombstone).toMatchObject({ taskId: 'done-1', erasedAt: clock.now(), reason: 'gdpr_erasure', by: 'dpo-7' });
      expect(tombstone.removed).toMatchObject({ snapshot: true, audit: audit.length, quarantine: false });
      expect(await orchestrator.tombstone('done-1')).toStrictEqual(tombstone);

      const refusals = [
        orchestrator.status('done-1'),
        orchestrator.audit('done-1'),
        orchestrator.transcript('done-1'),
        orchestrator.resume('done-1'),
        orchestrator.answer('done-1', E17, 'B2'),
        orchestrator.cancel('done-1', E17),
        orchestrator.start({ principal: E17, goal: 'a new task under the old id', taskId: 'done-1' }),
      ];
      for (const refusal of await Promise.allSettled(refusals)) {
        expect(refusal.status).toBe('rejected');
        const error = (refusal as PromiseRejectedResult).reason;
        expect(error).toBeInstanceOf(TaskErasedError);
        expect(error).toMatchObject({ code: 'task_erased', erasedAt: clock.now() });
        expect((error as Error).message).toContain(new Date(clock.now()).toISOString());
      }
      expect(await orchestrator.list()).toEqual([]);
      expect(await store.load('done-1').catch((e: unknown) => e)).toBeInstanceOf(TaskErasedError);
      expect(orchestrator.liveTasks).toBe(0);
    });

    it('is idempotent: erasing again returns the first tombstone', async () => {
      const { orchestrator, clock } = setup();
      await orchestrator.run({ principal: E17, goal: 'book', taskId: 'done-2' });
      const first = await orchestrator.erase('done-2', GDPR);
      await clock.advance(60_000);
      expect(await orchestrator.erase('done-2', { reason: 'again' })).toStrictEqual(first);
    });
  });

  describe('when the task waits', () => {
    it('erases a task waiting for the user; the answer is then refused as erased', async () => {
      const { orchestrator } = setup();
      const waiting = await orchestrator.run({ principal: E17, goal: 'ask me first', taskId: 'wait-1' });
      expect(waiting.state).toBe('waiting_for_user');
      await orchestrator.erase('wait-1', GDPR);
      await expect(orchestrator.answer('wait-1', E17, 'B2')).rejects.toBeInstanceOf(TaskErasedError);
      expect(await orchestrator.expireDue()).toBe(0);
    });

    it('erases a task waiting for a confirmation; the write never runs', async () => {
      const h = harness({
        script: [
          reply.call('refund_order', { order_id: 'O-1001', amount_cents: 99_900, reason: 'per note' }),
          reply.answer('refunded'),
        ],
      });
      const status = await h.orchestrator.run({ principal: SUPPORT, goal: 'refund the customer', taskId: 'refund-1' });
      expect(status.state).toBe('waiting_for_confirmation');
      await h.orchestrator.erase('refund-1', GDPR);
      await expect(h.orchestrator.confirm('refund-1', SUPPORT, status.pendingConfirmation!)).rejects.toBeInstanceOf(
        TaskErasedError,
      );
      expect(h.refunds.refunds).toEqual([]);
    });
  });

  describe('when the task is running', () => {
    it('refuses a task running in this process with TaskRunningError and leaves it running', async () => {
      const { orchestrator, model } = setup();
      await orchestrator.start({ principal: E17, goal: 'hang on', taskId: 'run-1' });
      await until(() => model.hanging === 1);
      const error = await orchestrator.erase('run-1', GDPR).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TaskRunningError);
      expect(error).toMatchObject({ code: 'task_running' });
      expect((await orchestrator.status('run-1')).state).toBe('running');
      expect(await orchestrator.tombstone('run-1')).toBeNull();
      expect(model.hanging).toBe(1);
      await orchestrator.close();
    });

    it('cancels it first when asked, then erases it', async () => {
      const { orchestrator, model, store } = setup();
      await orchestrator.start({ principal: E17, goal: 'hang on', taskId: 'run-2' });
      await until(() => model.hanging === 1);
      const tombstone = await orchestrator.erase('run-2', { ...GDPR, cancelRunning: true });
      expect(tombstone.removed.snapshot).toBe(true);
      expect(model.hanging).toBe(0);
      expect(orchestrator.liveTasks).toBe(0);
      await expect(orchestrator.status('run-2')).rejects.toBeInstanceOf(TaskErasedError);
      await expect(store.load('run-2')).rejects.toBeInstanceOf(TaskErasedError);
    });

    it('refuses a task another process drives with TaskBusyError, cancelRunning or not', async () => {
      const store = new MemoryStore();
      const a = setup({ store });
      const b = setup({ store });
      await a.orchestrator.start({ principal: E17, goal: 'hang on', taskId: 'run-3' });
      await until(() => a.model.hanging === 1);
      await expect(b.orchestrator.erase('run-3', GDPR)).rejects.toBeInstanceOf(TaskBusyError);
      await expect(b.orchestrator.erase('run-3', { ...GDPR, cancelRunning: true })).rejects.toBeInstanceOf(
        TaskBusyError,
      );
      expect((await a.orchestrator.status('run-3')).state).toBe('running');
      await a.orchestrator.close();
      // Its process is gone (its lease released): the task can be erased now.
      expect((await b.orchestrator.erase('run-3', GDPR)).taskId).toBe('run-3');
    });

    it('stops a process that still drives the task when the store erases it underneath', async () => {
      const { orchestrator, model, store } = setup();
      await orchestrator.start({ principal: E17, goal: 'hang on', taskId: 'run-4' });
      await until(() => model.hanging === 1);
      await store.erase('run-4', { ...GDPR, at: 1 });
      await orchestrator.cancel('run-4', E17).catch(() => undefined);
      await until(() => orchestrator.liveTasks === 0);
      await expect(store.load('run-4')).rejects.toBeInstanceOf(TaskErasedError);
      expect(await store.tombstone('run-4')).toMatchObject({ erasedAt: 1 });
    });
  });

  it('refuses to erase a task that does not exist with TaskNotFoundError', async () => {
    const { orchestrator } = setup();
    const error = await orchestrator.erase('nobody', GDPR).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskNotFoundError);
    expect(error).not.toBeInstanceOf(TaskErasedError);
  });

  it('refuses a request without a reason, erasing nothing', async () => {
    const { orchestrator } = setup();
    await orchestrator.run({ principal: E17, goal: 'book', taskId: 'keep' });
    await expect(orchestrator.erase('keep', { reason: '' })).rejects.toBeInstanceOf(HostRequestError);
    expect((await orchestrator.status('keep')).state).toBe('answered');
  });

  it('refuses on a store that cannot erase, naming it', async () => {
    const inner = new MemoryStore();
    const store: TaskStore = {
      kind: 'legacy',
      load: (id) => inner.load(id),
      save: (request) => inner.save(request),
      list: (query) => inner.list(query),
      readJournal: (...args) => inner.readJournal(...args),
      quarantine: (id, reason) => inner.quarantine(id, reason),
      quarantined: (id) => inner.quarantined(id),
      close: () => inner.close(),
    };
    const orchestrator = createOrchestrator({ tools: [], model: byGoal(), store, expirySweepMs: 0 });
    await orchestrator.run({ principal: E17, goal: 'book', taskId: 'legacy-1' });
    const error = await orchestrator.erase('legacy-1', GDPR).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AgentError);
    expect(error).toMatchObject({ code: 'erasure_unsupported' });
    expect((error as Error).message).toContain('legacy');
    expect(await orchestrator.tombstone('legacy-1')).toBeNull();
    expect(await orchestrator.sweepRetention()).toStrictEqual({ erased: [], tombstonesRemoved: 0, more: false });
  });
});

describe('Orchestrator.eraseUser', () => {
  it("erases the user's finished and waiting tasks, skips the running one, and leaves other users' tasks", async () => {
    const { orchestrator, model } = setup();
    await orchestrator.run({ principal: E17, goal: 'book', taskId: 'u-done' });
    await orchestrator.run({ principal: E17, goal: 'ask me', taskId: 'u-wait' });
    await orchestrator.start({ principal: E17, goal: 'hang on', taskId: 'u-run' });
    await orchestrator.run({ principal: OTHER, goal: 'book', taskId: 'other-done' });
    await orchestrator.run({ principal: { ...E17, tenantId: 'globex' }, goal: 'book', taskId: 'globex-done' });
    await until(() => model.hanging === 1);

    const owner = { tenantId: E17.tenantId, userId: E17.userId };
    const first = await orchestrator.eraseUser(owner, GDPR);
    expect(first.erased.map((t) => t.taskId).sort()).toEqual(['u-done', 'u-wait']);
    expect(first.skipped).toEqual([
      { taskId: 'u-run', code: 'task_running', message: expect.stringContaining('cancelRunning') },
    ]);
    expect((await orchestrator.status('u-run')).state).toBe('running');

    const second = await orchestrator.eraseUser(owner, { ...GDPR, cancelRunning: true });
    expect(second).toMatchObject({ erased: [expect.objectContaining({ taskId: 'u-run' })], skipped: [] });
    expect((await orchestrator.list()).map((s) => s.taskId).sort()).toEqual(['globex-done', 'other-done']);
  });
});

describe('retention', () => {
  it('erases finished tasks past the store period when swept, leaving tombstones with reason "retention"', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore({ retention: { finishedTaskMs: 86_400_000 } });
    const { orchestrator } = setup({ store, clock });
    await orchestrator.run({ principal: E17, goal: 'book', taskId: 'old' });
    await orchestrator.run({ principal: E17, goal: 'ask me', taskId: 'waiting' });
    await clock.advance(86_400_000);
    await orchestrator.run({ principal: E17, goal: 'book', taskId: 'new' });
    const report = await orchestrator.sweepRetention();
    expect(report.erased).toEqual([
      expect.objectContaining({ taskId: 'old', reason: 'retention', erasedAt: clock.now(), by: null }),
    ]);
    expect((await orchestrator.list()).map((s) => s.taskId).sort()).toEqual(['new', 'waiting']);
    await expect(orchestrator.status('old')).rejects.toThrow(/was erased at .* \(retention\)/);
  });

  it('sweeps on a timer once started, until stopped', async () => {
    const store = new MemoryStore({ retention: { finishedTaskMs: 0 } });
    const { orchestrator } = setup({ store });
    await orchestrator.run({ principal: E17, goal: 'book', taskId: 'swept' });
    const errors: unknown[] = [];
    const stop = orchestrator.startRetentionSweep({ everyMs: 10, onError: (error) => errors.push(error) });
    await until(async () => (await orchestrator.tombstone('swept')) !== null);
    stop();
    expect(errors).toEqual([]);
    await orchestrator.run({ principal: E17, goal: 'book', taskId: 'kept' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await orchestrator.list()).map((s) => s.taskId)).toEqual(['kept']);
  });
});
