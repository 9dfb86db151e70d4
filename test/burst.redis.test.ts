/**
 * Backpressure under a burst: 3,000 `start()` calls issued in one synchronous burst on one orchestrator with a Redis
 * store. `capacity.maxStartingTasks` (default 200) refuses what is past it at once with the capacity error, so the
 * event loop never starves into store command timeouts: every call is accepted or refused as overloaded, none fails
 * as the store being unavailable while Redis answers, and every accepted task is in the store afterwards.
 *
 * The loop's lag over the burst is measured with `perf_hooks.monitorEventLoopDelay` and printed. With
 * `BURST_COMPARE=1` the same burst also runs with the bound off, for the figures to compare (nothing is asserted of
 * it: unbounded, it starves the loop by design).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, describe, expect, it } from 'vitest';
import type { Principal } from '../machines/context.js';
import { CapacityError, StoreUnavailableError } from '../src/errors.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { harness } from './support/harness.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();
afterAll(() => redis?.stop());

const BURST = 3_000;
const principal: Principal = { userId: 'u1', tenantId: 'burst', scopes: [] };

/** A model that never answers (until its task stops here): every accepted task stays `running`. */
const silentModel: AgentModel = {
  name: 'silent',
  decide: (request) =>
    new Promise((_, reject) => request.signal?.addEventListener('abort', () => reject(request.signal!.reason))),
};

interface BurstResult {
  accepted: string[];
  refused: CapacityError[];
  other: unknown[];
  lagMaxMs: number;
  lagP99Ms: number;
  seconds: number;
  missing: string[];
}

async function burst(maxStartingTasks?: number): Promise<BurstResult> {
  const prefix = redis!.freshPrefix();
  const store = new RedisStore({ url: redis!.url, prefix });
  const { orchestrator } = harness({
    store,
    model: silentModel,
    expirySweepMs: 0,
    ...(maxStartingTasks === undefined ? {} : { capacity: { maxStartingTasks } }),
  });
  try {
    await store.list(); // connected and the layout checked: the burst measures starts, not the first connect
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const began = performance.now();
    const calls = Array.from({ length: BURST }, (_, i) =>
      orchestrator.start({ principal, goal: 'wait', taskId: `b${i}` }).then(
        (status) => ({ ok: status.taskId }),
        (error: unknown) => ({ error }),
      ),
    );
    const results = await Promise.all(calls);
    const seconds = (performance.now() - began) / 1000;
    lag.disable();
    const accepted = results.flatMap((r) => ('ok' in r ? [r.ok] : []));
    const errors = results.flatMap((r) => ('error' in r ? [r.error] : []));
    const refused = errors.filter((e): e is CapacityError => e instanceof CapacityError);
    const other = errors.filter((e) => !(e instanceof CapacityError));
    const loaded = await Promise.all(accepted.map((taskId) => store.load(taskId)));
    const missing = accepted.filter((_, i) => loaded[i] === null);
    return {
      accepted,
      refused,
      other,
      lagMaxMs: Math.round(lag.max / 1e6),
      lagP99Ms: Math.round(lag.percentile(99) / 1e6),
      seconds,
      missing,
    };
  } finally {
    await orchestrator.close();
    await store.close();
    await redis!.deleteKeys(prefix);
  }
}

function report(label: string, r: BurstResult): void {
  console.log(
    `burst of ${BURST} starts, ${label}: ${r.accepted.length} accepted, ${r.refused.length} refused (capacity), ` +
      `${r.other.length} other errors; loop lag max ${r.lagMaxMs} ms, p99 ${r.lagP99Ms} ms; ${r.seconds.toFixed(2)} s`,
  );
}

describe.skipIf(!redis)('a burst of starts on one process', () => {
  it('accepts or refuses each as overloaded, fails none as a store outage, and loses nothing', async () => {
    const r = await burst();
    report('maxStartingTasks 200 (default)', r);
    expect(r.other.filter((e) => e instanceof StoreUnavailableError)).toEqual([]);
    expect(r.other).toEqual([]);
    expect(r.accepted.length + r.refused.length).toBe(BURST);
    // The burst is synchronous: exactly the first 200 are under way when the rest arrive.
    expect(r.accepted).toHaveLength(200);
    for (const error of r.refused)
      expect(error).toMatchObject({ code: 'overloaded', scope: 'process', limitName: 'maxStartingTasks' });
    expect(r.missing).toEqual([]);
    // Never blocked as long as the store's 3 s command timeout: no call is told Redis is down.
    expect(r.lagMaxMs).toBeLessThan(3_000);
  });

  it.runIf(process.env.BURST_COMPARE === '1')('with the bound off, for comparison (figures only)', async () => {
    const r = await burst(Number.POSITIVE_INFINITY);
    report('maxStartingTasks Infinity', r);
    const codes = new Map<string, number>();
    for (const e of r.other) {
      const code = (e as { code?: string }).code ?? String(e);
      codes.set(code, (codes.get(code) ?? 0) + 1);
    }
    console.log(`other errors by code: ${JSON.stringify(Object.fromEntries(codes))}; missing: ${r.missing.length}`);
  });
});
