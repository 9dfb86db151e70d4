/**
 * The orphan sweep asks the store for running tasks nobody holds (`leases.orphans`) instead of trying a lease on every
 * running task: tasks another live process drives cost it one EXISTS each, no script and no summary. The listing on
 * both stores that have leases, then the sweep on Redis: a sweep over tasks held elsewhere tries no lease at all, and
 * the same tasks, handed back by a clean close, are taken over by the next sweep.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { E17, until } from './support/harness.js';
import { useTestRedis } from './support/redis.js';
import { noteWriter, readThenWrite, slowRead } from './support/takeover.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();
afterAll(() => redis?.stop());

function processOn(store: TaskStore, name: string, read: ReturnType<typeof slowRead>, orphanSweepMs = 0) {
  const recovered: string[] = [];
  const orchestrator = createOrchestrator({
    tools: [read.tool(name), noteWriter().tool],
    model: readThenWrite(),
    store,
    lease: { ttlMs: 5_000, renewEveryMs: 1_000 },
    expirySweepMs: 0,
    orphanSweepMs,
    hooks: { recovered: ({ report }) => recovered.push(...report.resumed) },
  });
  return { orchestrator, recovered };
}

const stores: [string, () => { store: TaskStore; done: () => Promise<void> }][] = [
  ['memory', () => ({ store: new MemoryStore(), done: async () => {} })],
];
if (redis) {
  stores.push([
    'redis',
    () => {
      const prefix = redis.freshPrefix();
      const store = new RedisStore({ url: redis.url, prefix, buckets: 3 });
      return {
        store,
        done: async () => {
          await store.close();
          await redis.deleteKeys(prefix);
        },
      };
    },
  ]);
}

describe.each(stores)('leases.orphans on the %s store', (_name, open) => {
  it('lists running tasks whose lease nobody holds, never ended or held ones, up to the limit', async () => {
    const { store, done } = open();
    const read = slowRead('gate');
    const a = processOn(store, 'a', read);
    try {
      const ids = ['p0', 'p1', 'p2', 'p3'];
      for (const taskId of ids) await a.orchestrator.start({ principal: E17, goal: 'read, then note', taskId });
      await until(() => read.started.length === ids.length, scaled(5_000));
      // All four held by a live process.
      expect(await store.leases!.orphans!(100)).toEqual([]);
      // A clean close hands the leases back: all four are orphans now, still running.
      await a.orchestrator.close();
      expect([...(await store.leases!.orphans!(100))].sort()).toEqual(ids);
      expect(await store.leases!.orphans!(2)).toHaveLength(2);
      // A quarantined one is nobody's to take over: not listed (so that many never hide the rest).
      await store.quarantine('p3', 'test');
      expect([...(await store.leases!.orphans!(100))].sort()).toEqual(['p0', 'p1', 'p2']);
      // Taken over by another process and run to the end: no longer listed.
      const b = processOn(store, 'b', read);
      read.release();
      expect((await b.orchestrator.recover()).resumed).toHaveLength(3);
      for (const taskId of ['p0', 'p1', 'p2']) expect((await b.orchestrator.settled(taskId)).state).toBe('answered');
      expect(await store.leases!.orphans!(100)).toEqual([]);
      await b.orchestrator.close();
    } finally {
      read.release();
      await done();
    }
  });
});

describe.skipIf(!redis)('the orphan sweep on Redis', () => {
  it('tries no lease for tasks another process holds, and takes them over once they are handed back', async () => {
    const prefix = redis!.freshPrefix();
    const read = slowRead('gate');
    const holderStore = new RedisStore({ url: redis!.url, prefix });
    const sweeperStore = new RedisStore({ url: redis!.url, prefix });
    let leaseTries = 0;
    const acquireAndRead = sweeperStore.acquireAndRead.bind(sweeperStore);
    sweeperStore.acquireAndRead = (taskId, ttlMs) => (leaseTries++, acquireAndRead(taskId, ttlMs));
    const holder = processOn(holderStore, 'holder', read);
    const sweeper = processOn(sweeperStore, 'sweeper', read, 50);
    try {
      const ids = Array.from({ length: 5 }, (_, i) => `s${i}`);
      for (const taskId of ids) await holder.orchestrator.start({ principal: E17, goal: 'read, then note', taskId });
      await until(() => read.started.length === ids.length, scaled(5_000));
      // About ten sweeps over five running tasks that a live process holds: before, 50 lease scripts.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(leaseTries).toBe(0);
      expect(sweeper.recovered).toEqual([]);
      // Handed back by a clean close: the next sweep takes each over, once.
      await holder.orchestrator.close();
      read.release();
      await until(() => sweeper.recovered.length === ids.length, scaled(5_000));
      expect([...sweeper.recovered].sort()).toEqual(ids);
      for (const taskId of ids) expect((await sweeper.orchestrator.settled(taskId)).state).toBe('answered');
      expect(leaseTries).toBe(ids.length);
    } finally {
      read.release();
      await sweeper.orchestrator.close();
      for (const store of [holderStore, sweeperStore]) await store.close();
      await redis!.deleteKeys(prefix);
    }
  });
});
