/**
 * The orchestrator chooses its mode once, when it is constructed (`taskMode.ts`): local without a dispatch, and
 * dispatched with one. These check the choice through the public API with a dispatch that records what it is given
 * (the BullMQ dispatch itself: dispatch.redis.test.ts, workers.process.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { HostRequestError } from '../src/errors.js';
import type { Dispatch, DriveJob } from '../src/orchestrator/dispatch.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { keyedSealer } from '../src/privacy/sealer.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { TaskInbox } from '../src/store/taskStore.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { E17 } from './support/harness.js';

/** A dispatch that records the jobs it is given and has no worker: nothing it is given is ever driven. */
function recordingDispatch(): Dispatch & { jobs: DriveJob[] } {
  const jobs: DriveJob[] = [];
  return {
    kind: 'recording',
    jobs,
    waits: { replyTimeoutMs: 1_000, inboxLimit: 10 },
    enqueue: async (job) => void jobs.push(job),
    assertRoom: async () => {},
    pendingStart: async (taskId) =>
      (
        jobs.find((job) => job.kind === 'start' && job.taskId === taskId) as
          Extract<DriveJob, { kind: 'start' }> | undefined
      )?.input ?? null,
    startFailure: async () => null,
    forgetStart: async () => false,
    pendingStarts: async () => [],
    retryFailedStarts: async () => 0,
    work: () => ({ pause: async () => {}, close: async () => {} }),
    onEvent: () => () => {},
    depth: async () => ({ waiting: jobs.length, active: 0, delayed: 0, failed: 0 }),
    close: async () => {},
  };
}

/** A memory store given an inbox that keeps the reserved ids (the memory store has none of its own). */
function storeWithInbox(): MemoryStore & { reserved: Set<string> } {
  const reserved = new Set<string>();
  const inbox: TaskInbox = {
    append: async () => 1,
    after: async () => [],
    trim: async () => {},
    reserve: async (taskId, undo) => void (undo ? reserved.delete(taskId) : reserved.add(taskId)),
    pending: async () => [],
    forget: async () => {},
  };
  return Object.assign(new MemoryStore(), { inbox, reserved });
}

describe('the orchestrator mode', () => {
  describe('without a dispatch (local)', () => {
    it('drives a started task in this process and refuses to make a worker', async () => {
      const model = scriptedModel([reply.answer('Done.')]);
      const orchestrator = createOrchestrator({ tools: [], model, expirySweepMs: 0 });
      try {
        const status = await orchestrator.run({ principal: E17, goal: 'Say done' });
        expect(status.state).toBe('answered');
        expect(model.turns).toBe(1);
        expect(() => orchestrator.createWorker()).toThrow(HostRequestError);
        expect(() => orchestrator.createWorker()).toThrow(/createWorker needs the dispatch option/);
      } finally {
        await orchestrator.close();
      }
    });
  });

  describe('with a dispatch', () => {
    it('records a start job and drives nothing here; resume records a wake only for a created task', async () => {
      const dispatch = recordingDispatch();
      const store = storeWithInbox();
      const model = scriptedModel([]);
      const orchestrator = createOrchestrator({
        tools: [],
        model,
        store,
        dispatch,
        expirySweepMs: 0,
        privacy: { sealer: keyedSealer({ key: new Uint8Array(32).fill(7) }) },
      });
      try {
        const status = await orchestrator.start({ principal: E17, goal: 'Say done' });
        expect(status).toMatchObject({ state: 'running', revision: 0 });
        expect(dispatch.jobs).toEqual([expect.objectContaining({ kind: 'start', taskId: status.taskId })]);
        expect(store.reserved.has(status.taskId)).toBe(true);
        expect(orchestrator.liveTasks).toBe(0);
        expect(model.turns).toBe(0);
        // Not created yet: its status is the queued start's, and a resume has nothing for a worker to drive.
        expect(await orchestrator.status(status.taskId)).toMatchObject({ taskId: status.taskId, revision: 0 });
        await orchestrator.resume(status.taskId);
        expect(dispatch.jobs.map((job) => job.kind)).toEqual(['start']);
      } finally {
        await orchestrator.close();
      }
    });

    it('refuses a store without inboxes when the orchestrator is constructed', () => {
      expect(() =>
        createOrchestrator({
          tools: [],
          model: scriptedModel([]),
          store: new MemoryStore(),
          dispatch: recordingDispatch(),
          expirySweepMs: 0,
        }),
      ).toThrow(/dispatch needs a store with leases and inboxes \(RedisStore\); the memory store has no inboxes/);
    });

    it('refuses host redactors with a memory sealer (a worker elsewhere could not open what they seal), not with a keyed one', async () => {
      const redactors = [{ name: 'ticket', pattern: /TCK-\d+/g }];
      const options = {
        tools: [],
        model: scriptedModel([]),
        store: storeWithInbox(),
        dispatch: recordingDispatch(),
        expirySweepMs: 0,
      };
      expect(() => createOrchestrator({ ...options, privacy: { redactors } })).toThrow(/needs a durable sealer/);
      const keyed = createOrchestrator({
        ...options,
        privacy: { redactors, sealer: keyedSealer({ key: new Uint8Array(32).fill(7) }) },
      });
      await keyed.close();
    });
  });
});
