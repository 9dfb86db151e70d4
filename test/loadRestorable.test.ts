/**
 * Restoring a task reads its quarantine mark and its envelope at once (one round trip on a pipelining client). A
 * quarantined task is refused whatever the load says; a corrupt one is quarantined, whether the store throws or
 * rejects; nothing is left as an unhandled rejection.
 */
import { describe, expect, it } from 'vitest';
import { CorruptTaskError, TaskQuarantinedError } from '../src/errors.js';
import type { TaskEnvelope } from '../src/store/envelope.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { TakenTask } from '../src/store/taskStore.js';
import { reply } from '../src/testing/index.js';
import { BOOKING_GOAL, E17, harness } from './support/harness.js';

/**
 * Breaks `load` and `quarantined` on demand. As it overrides them, the orchestrator calls them after taking the
 * lease (the store's `acquireAndRead` leaves the reads to them).
 */
class FlakyStore extends MemoryStore {
  syncCorrupt = false;
  asyncCorrupt = false;
  quarantineLookupFails = false;
  override load(taskId: string): Promise<TaskEnvelope | null> {
    // A store whose load checks synchronously before returning its promise (not `async`).
    if (this.syncCorrupt) throw new CorruptTaskError(taskId, 'bad bytes');
    if (this.asyncCorrupt) return Promise.reject(new CorruptTaskError(taskId, 'bad bytes'));
    return super.load(taskId);
  }
  override quarantined(taskId: string): Promise<string | null> {
    if (this.quarantineLookupFails) return Promise.reject(new Error('lookup failed'));
    return super.quarantined(taskId);
  }
}

async function waitingTask(store: FlakyStore) {
  const h = harness({ store, script: [reply.ask('Which building?')] });
  const waiting = await h.orchestrator.run({ principal: E17, goal: BOOKING_GOAL, taskId: 'q' });
  expect(waiting.state).toBe('waiting_for_user');
  return h;
}

/** Reads in the lease acquisition (`acquireAndRead`), and can make what it read fail to parse. */
class CorruptReadStore extends MemoryStore {
  corrupt = false;
  override async acquireAndRead(taskId: string, ttlMs: number): Promise<TakenTask | null> {
    const taken = await super.acquireAndRead(taskId, ttlMs);
    if (!taken?.read || !this.corrupt) return taken;
    const load = () => {
      throw new CorruptTaskError(taskId, 'bad bytes read with the lease');
    };
    return { ...taken, read: { ...taken.read, load } };
  }
}

describe('restoring a task from what the lease acquisition read', () => {
  it('quarantines a task whose envelope read with the lease does not parse, and refuses a quarantined one', async () => {
    const store = new CorruptReadStore();
    const h = harness({ store, script: [reply.ask('Which building?')] });
    expect((await h.orchestrator.run({ principal: E17, goal: BOOKING_GOAL, taskId: 'q' })).state).toBe(
      'waiting_for_user',
    );
    store.corrupt = true;
    const error = await h.orchestrator.answer('q', E17, 'Main').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskQuarantinedError);
    expect(await store.quarantined('q')).toContain('bad bytes read with the lease');
    // The lease was given back: another taker gets it.
    expect(await store.leases.acquire('q', 1_000)).not.toBeNull();
  });
});

describe('restoring a task: its quarantine mark and its envelope, read together', () => {
  it('refuses a quarantined task even when its load fails too, leaving no unhandled rejection', async () => {
    const store = new FlakyStore();
    const h = await waitingTask(store);
    await store.quarantine('q', 'manual');
    store.asyncCorrupt = true;
    const unhandled: unknown[] = [];
    const on = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', on);
    await expect(h.orchestrator.answer('q', E17, 'Main')).rejects.toBeInstanceOf(TaskQuarantinedError);
    expect(await store.quarantined('q')).toBe('manual');
    await new Promise((r) => setTimeout(r, 20));
    process.off('unhandledRejection', on);
    expect(unhandled).toEqual([]);
  });

  it('quarantines a task whose load throws CorruptTaskError synchronously, as when it rejects', async () => {
    const store = new FlakyStore();
    const h = await waitingTask(store);
    store.syncCorrupt = true;
    const error = await h.orchestrator.answer('q', E17, 'Main').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskQuarantinedError);
    expect(await store.quarantined('q')).toContain('bad bytes');
  });

  it('leaves no unhandled rejection when the quarantine lookup fails and the load throws', async () => {
    const store = new FlakyStore();
    const h = await waitingTask(store);
    store.syncCorrupt = true;
    store.quarantineLookupFails = true;
    const unhandled: unknown[] = [];
    const on = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', on);
    await h.orchestrator.answer('q', E17, 'Main').catch(() => {});
    await new Promise((r) => setTimeout(r, 20));
    process.off('unhandledRejection', on);
    expect(unhandled).toEqual([]);
  });
});
