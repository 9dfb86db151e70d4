/**
 * A clean shutdown hands the work over: `orchestrator.close()` resolves only once the leases of the tasks it drove
 * are given back, so a host that closes the store right after (the order the docs show) strands nothing, and another
 * process's `recover()` resumes every task at once instead of finding them `busy` until their leases expire.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { E17, until } from './support/harness.js';
import { useTestRedis } from './support/redis.js';
import { scaled } from './support/timeScale.js';
import { ChildPool } from './support/workers.js';
import { noteWriter, readThenWrite, slowRead } from './support/takeover.js';

const redis = await useTestRedis();
afterAll(() => redis?.stop());

/** One process on the test Redis under `prefix`: its store and an orchestrator with the read-then-note tools. */
function processOn(
  prefix: string,
  name: string,
  tools: { read: ReturnType<typeof slowRead>; notes: ReturnType<typeof noteWriter> },
) {
  const store = new RedisStore({ url: redis!.url, prefix });
  const orchestrator = createOrchestrator({
    tools: [tools.read.tool(name), tools.notes.tool],
    model: readThenWrite(),
    store,
    expirySweepMs: 0,
  });
  return { store, orchestrator };
}

describe.skipIf(!redis)('closing an orchestrator, then its store', () => {
  it.each([1, 5, 40])('leaves %i running tasks for the next process to resume at once, none busy', async (count) => {
    const prefix = redis!.freshPrefix();
    const read = slowRead('gate');
    const notes = noteWriter();
    // The default lease TTL (15 s): had the releases been dropped, every task would stay busy for the whole test.
    const { store: first, orchestrator: before } = processOn(prefix, 'before', { read, notes });
    for (let i = 0; i < count; i++) await before.start({ principal: E17, goal: 'read, then note', taskId: `t${i}` });
    await until(() => read.started.length === count);
    expect(before.inFlight().leases).toBe(count);
    await before.close();
    await first.close();

    const { store: second, orchestrator: after } = processOn(prefix, 'after', { read, notes });
    try {
      const report = await after.recover();
      expect(report.busy).toEqual([]);
      expect(report.resumed.sort()).toEqual(Array.from({ length: count }, (_, i) => `t${i}`).sort());
      read.release();
      for (let i = 0; i < count; i++) await after.settled(`t${i}`);
      expect(notes.executed).toHaveLength(count);
    } finally {
      await after.close();
      await second.close();
      await redis!.deleteKeys(prefix);
    }
  });
});

describe.skipIf(!redis)('recovery, many take-overs at once', () => {
  it('resumes 200 tasks once each when two processes recover at the same time', async () => {
    const prefix = redis!.freshPrefix();
    const read = slowRead('gate');
    const notes = noteWriter();
    const make = (name: string) => processOn(prefix, name, { read, notes });
    const before = make('before');
    const ids = Array.from({ length: 200 }, (_, i) => `r${i}`);
    await Promise.all(
      ids.map((taskId) => before.orchestrator.start({ principal: E17, goal: 'read, then note', taskId })),
    );
    await until(() => read.started.length === ids.length);
    await before.orchestrator.close();
    await before.store.close();

    const [a, b] = [make('a'), make('b')];
    try {
      const [ra, rb] = await Promise.all([
        a.orchestrator.recover({ concurrency: 16 }),
        b.orchestrator.recover({ concurrency: 64 }),
      ]);
      // Each task taken over by exactly one of them; the other saw it leased (busy) or already resumed.
      expect([...ra.resumed, ...rb.resumed].sort()).toEqual([...ids].sort());
      expect(ra.resumed.filter((id) => rb.resumed.includes(id))).toEqual([]);
      read.release();
      for (const taskId of ids) {
        const driver = ra.resumed.includes(taskId) ? a : b;
        expect((await driver.orchestrator.settled(taskId)).state).toBe('answered');
      }
      // One write per task: nothing ran twice.
      expect(new Set(notes.executed).size).toBe(ids.length);
      expect(notes.executed).toHaveLength(ids.length);
      await expect(a.orchestrator.recover({ concurrency: 0 })).rejects.toMatchObject({ code: 'invalid_request' });
    } finally {
      for (const side of [a, b]) {
        await side.orchestrator.close();
        await side.store.close();
      }
      await redis!.deleteKeys(prefix);
    }
  });
});

describe.skipIf(!redis)('the orphan sweep', () => {
  const pool = new ChildPool();
  afterAll(() => pool.killAll());

  it('resumes the tasks of a killed process with no call to recover()', async () => {
    const prefix = redis!.freshPrefix();
    // Scaled: the holder must keep its leases (renewed every ttl/3) until it is killed, also on a loaded machine.
    const ttlMs = scaled(600);
    const read = slowRead({ ms: 5 });
    const notes = noteWriter();
    const recovered: string[] = [];
    const store = new RedisStore({ url: redis!.url, prefix });
    // The survivor sweeps every lease TTL or so (the default interval), jittered.
    const survivor = createOrchestrator({
      tools: [read.tool('survivor'), notes.tool],
      model: readThenWrite(),
      store,
      lease: { ttlMs, renewEveryMs: 200 },
      expirySweepMs: 0,
      hooks: { recovered: ({ report }) => recovered.push(...report.resumed) },
    });
    const holder = pool.spawnTs('holder', 'test/support/orphanHolder.ts', [
      JSON.stringify({ url: redis!.url, prefix, count: 20, ttlMs }),
    ]);
    try {
      await holder.waitFor('holding 20', 30_000);
      await holder.kill();
      const ids = Array.from({ length: 20 }, (_, i) => `o${i}`);
      await until(() => recovered.length === ids.length, 15_000);
      expect([...recovered].sort()).toEqual([...ids].sort());
      for (const taskId of ids) expect((await survivor.settled(taskId)).state).toBe('answered');
      expect(notes.executed).toHaveLength(ids.length);
      expect(read.started).toHaveLength(ids.length);
    } finally {
      await survivor.close();
      await store.close();
      await redis!.deleteKeys(prefix);
    }
  });
});
