/** The acceptance run on Redis: the same invariants with every task persisted to a real Redis (fresh key prefix). */
import { afterAll, describe, expect, it } from 'vitest';
import { planForCalls, runAcceptance } from '../src/acceptance/index.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { demoAcceptanceDomain } from '../examples/booking/acceptanceDomain.js';
import { useTestRedis } from './support/redis.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();

describe.skipIf(!redis)('the acceptance run on Redis', () => {
  afterAll(() => redis?.stop());

  it('holds every invariant, with every task persisted', { timeout: scaled(120_000) }, async () => {
    const prefix = redis!.freshPrefix();
    const store = new RedisStore({ client: redis!.connect(), prefix });
    try {
      const report = await runAcceptance({
        domain: demoAcceptanceDomain(),
        plan: planForCalls(300, 11),
        store,
        storeName: 'redis',
      });
      expect(report.failures).toEqual([]);
      expect(report.store).toBe('redis');
      expect(report.metrics.businessRecords).toBe(report.metrics.distinctIdempotencyKeys);
      expect(report.rows.find((r) => r.fault === 'lost_write_response')).toMatchObject({
        duplicates: 0,
        wrongOutcomes: 0,
      });
      // Every task is in the store and settled (nothing left running).
      const listed = await store.list({ limit: 1_000 });
      expect(listed).toHaveLength(report.metrics.tasks);
      expect(listed.filter((t) => t.state === 'running')).toEqual([]);
    } finally {
      await redis!.deleteKeys(prefix);
    }
  });
});
