/**
 * A tenant's cap across processes (`capacity.tenantCap`), counted atomically on Redis: orchestrators sharing a cap
 * of 3 accept exactly 3 of 10 concurrent starts of one tenant, whichever process each reaches; another tenant is not
 * affected; a process that is SIGKILLed while its tasks hold slots frees them once the lease TTL has run out.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { CapacityError, TaskExistsError } from '../src/errors.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { E17 } from './support/harness.js';
import { useTestRedis } from './support/redis.js';
import { noteWriter, readThenWrite, slowRead } from './support/takeover.js';
import { scaled } from './support/timeScale.js';
import { ChildPool } from './support/workers.js';

const redis = await useTestRedis();
afterAll(() => redis?.stop());

const OTHER = { ...E17, userId: 'O1', tenantId: 'globex' };

/** One process on the test Redis: its store and an orchestrator whose tasks wait in their read until released. */
function processOn(prefix: string, name: string, options: { ttlMs?: number } = {}) {
  const store = new RedisStore({ url: redis!.url, prefix });
  const read = slowRead('gate');
  const ttlMs = options.ttlMs ?? 15_000;
  const orchestrator = createOrchestrator({
    tools: [read.tool(name), noteWriter().tool],
    model: readThenWrite(),
    store,
    capacity: { tenantCap: 3 },
    lease: { ttlMs, renewEveryMs: Math.max(1, Math.floor(ttlMs / 3)) },
    expirySweepMs: 0,
    orphanSweepMs: 0,
  });
  return { store, orchestrator, read };
}

const outcome = (promise: Promise<{ taskId: string }>) =>
  promise.then(
    (status) => ({ accepted: status.taskId }),
    (error: unknown) => ({ error }),
  );

describe.skipIf(!redis)('a tenant cap across processes', () => {
  it('accepts exactly the cap of concurrent starts over two processes, and leaves other tenants alone', async () => {
    const prefix = redis!.freshPrefix();
    const [a, b] = [processOn(prefix, 'a'), processOn(prefix, 'b')];
    try {
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          outcome((i % 2 ? a : b).orchestrator.start({ principal: E17, goal: 'read, then note', taskId: `t${i}` })),
        ),
      );
      const accepted = results.flatMap((r) => ('accepted' in r ? [r.accepted] : []));
      const refused = results.flatMap((r) => ('error' in r ? [r.error] : []));
      expect(accepted).toHaveLength(3);
      expect(refused).toHaveLength(7);
      for (const error of refused) {
        expect(error).toBeInstanceOf(CapacityError);
        expect(error).toMatchObject({ code: 'tenant_at_capacity', scope: 'tenant', limitName: 'tenantCap', limit: 3 });
        expect((error as Error).message).toMatch(/3 running tasks across every process \(capacity\.tenantCap\)/);
      }
      // Nothing stored for a refused start.
      for (let i = 0; i < 10; i++) if (!accepted.includes(`t${i}`)) expect(await a.store.load(`t${i}`)).toBeNull();
      expect(await a.store.tenantSlots.count('acme')).toBe(3);
      const refusedHere = a.orchestrator.stats().refused.tenantCap + b.orchestrator.stats().refused.tenantCap;
      expect(refusedHere).toBe(7);

      // Another tenant is not affected.
      await expect(
        a.orchestrator.start({ principal: OTHER, goal: 'read, then note', taskId: 'g1' }),
      ).resolves.toMatchObject({ state: 'running' });

      // A cancelled task gives its slot back; once another takes it, a retried start of the cancelled one is told the
      // task exists, not that the tenant is full.
      const [first] = accepted as [string];
      const owner = Number(first.slice(1)) % 2 ? a : b;
      await owner.orchestrator.cancel(first, E17, 'test');
      expect((await owner.orchestrator.settled(first)).state).toBe('cancelled');
      await expect(
        a.orchestrator.start({ principal: E17, goal: 'read, then note', taskId: 'refill' }),
      ).resolves.toBeTruthy();
      accepted.splice(0, 1, 'refill');
      await expect(
        a.orchestrator.start({ principal: E17, goal: 'read, then note', taskId: 'over' }),
      ).rejects.toMatchObject({ code: 'tenant_at_capacity' });
      await expect(
        b.orchestrator.start({ principal: E17, goal: 'read, then note', taskId: first }),
      ).rejects.toBeInstanceOf(TaskExistsError);

      // The tasks end (their reads answer) and give their slots back: the next start is accepted.
      a.read.release();
      b.read.release();
      for (const taskId of accepted) {
        const side = taskId === 'refill' || Number(taskId.slice(1)) % 2 ? a : b;
        expect((await side.orchestrator.settled(taskId)).state).toBe('answered');
      }
      await expect(
        b.orchestrator.start({ principal: E17, goal: 'read, then note', taskId: 'after' }),
      ).resolves.toMatchObject({ taskId: 'after' });
    } finally {
      for (const side of [a, b]) {
        side.read.release();
        await side.orchestrator.close();
      }
      // Closed: every slot was given back.
      expect(await a.store.tenantSlots.count('acme')).toBe(0);
      for (const side of [a, b]) await side.store.close();
      await redis!.deleteKeys(prefix);
    }
  });

  describe('when a process holding slots is killed', () => {
    const pool = new ChildPool();
    afterAll(() => pool.killAll());

    it('frees its slots once the lease TTL has run out', async () => {
      const prefix = redis!.freshPrefix();
      // Scaled: the slots must outlive the holder's renewals on a loaded machine, and the first start after the kill.
      const ttlMs = scaled(1_500);
      const here = processOn(prefix, 'here');
      const holder = pool.spawnTs('holder', 'test/support/orphanHolder.ts', [
        JSON.stringify({ url: redis!.url, prefix, count: 3, ttlMs, tenantCap: 3 }),
      ]);
      try {
        await holder.waitFor('holding 3', 30_000);
        expect(await here.store.tenantSlots.count('acme')).toBe(3);
        await expect(
          here.orchestrator.start({ principal: E17, goal: 'read, then note', taskId: 'x0' }),
        ).rejects.toMatchObject({ code: 'tenant_at_capacity', limitName: 'tenantCap' });
        // Another tenant starts meanwhile.
        await expect(
          here.orchestrator.start({ principal: OTHER, goal: 'read, then note', taskId: 'g0' }),
        ).resolves.toMatchObject({ state: 'running' });

        await holder.kill();
        const killedAt = Date.now();
        // Renewed every ttl/3 until the kill: the slots still hold for a while.
        await expect(
          here.orchestrator.start({ principal: E17, goal: 'read, then note', taskId: 'x1' }),
        ).rejects.toMatchObject({ code: 'tenant_at_capacity' });
        let attempt = 2;
        let acceptedAfterMs: number | null = null;
        while (Date.now() - killedAt < ttlMs + scaled(3_000)) {
          const result = await outcome(
            here.orchestrator.start({ principal: E17, goal: 'read, then note', taskId: `x${attempt++}` }),
          );
          if ('accepted' in result) {
            acceptedAfterMs = Date.now() - killedAt;
            break;
          }
          expect(result.error).toMatchObject({ code: 'tenant_at_capacity' });
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        console.log(`the killed holder's slots freed ${acceptedAfterMs} ms after SIGKILL (lease TTL ${ttlMs} ms)`);
        expect(acceptedAfterMs).not.toBeNull();
        expect(acceptedAfterMs!).toBeLessThanOrEqual(ttlMs + scaled(3_000));
        // The killed holder's three slots go (each at its own expiry, renewed a few ms apart); the new task holds one.
        const deadline = Date.now() + scaled(1_000);
        while ((await here.store.tenantSlots.count('acme')) !== 1 && Date.now() < deadline)
          await new Promise((resolve) => setTimeout(resolve, 20));
        expect(await here.store.tenantSlots.count('acme')).toBe(1);
      } finally {
        here.read.release();
        await here.orchestrator.close();
        await here.store.close();
        await redis!.deleteKeys(prefix);
      }
    });
  });
});
