/**
 * Per-tenant rate limits counted on Redis: every process on the same Redis shares the counts (rate-limiter-flexible's
 * RateLimiterRedis), and a Redis that cannot answer refuses the call instead of letting it through.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RateLimits } from '../src/runtime/rateLimits.js';
import { reply } from '../src/testing/index.js';
import { REFUND_GOAL, SUPPORT, byKind, harness } from './support/harness.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();

describe.skipIf(!redis)('rate limits on Redis', () => {
  const client = redis?.connect();
  afterAll(() => redis?.stop());

  it('are shared by two orchestrators (two processes) on the same Redis', async () => {
    const prefix = redis!.freshPrefix();
    try {
      const limited = { redis: client, keyPrefix: `{${prefix}}:rate` };
      const refund = (cents: number) =>
        reply.call('refund_order', { order_id: 'O-1001', amount_cents: cents, reason: 'broken' });
      const a = harness({ script: [refund(1_000), reply.answer('x')], rateLimits: limited });
      const b = harness({ refunds: a.refunds, script: [refund(2_000), reply.answer('x')], rateLimits: limited });
      for (const h of [a, b])
        Object.assign(
          h.tools.find((t) => t.name === 'refund_order')!,
          { rateLimit: { points: 1, perSeconds: 60 } },
        );
      await a.orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, taskId: 'first' });
      const second = await b.orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, taskId: 'second' });
      expect(a.refunds.refunds.map((r) => r.amountCents)).toEqual([1_000]);
      expect(second.observations).toEqual([expect.objectContaining({ ok: false, code: 'rate_limited', gate: 'rate' })]);
      expect(byKind(await b.orchestrator.audit('second'), 'tool_started')).toEqual([]);
      // The count lives in Redis, under the host's prefix.
      expect(await client!.keys(`{${prefix}}:rate:*`)).toEqual([`{${prefix}}:rate:refund_order:acme`]);
    } finally {
      await redis!.deleteKeys(prefix);
    }
  });

  it('refuses when Redis cannot answer: an unchecked limit lets nothing through', async () => {
    const dead = new Redis({
      port: 1,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    try {
      const limits = new RateLimits({ redis: dead, keyPrefix: 'x' });
      const verdict = await limits.consume({ name: 'refund_order', rateLimit: { points: 5, perSeconds: 60 } }, 'acme');
      expect(verdict).toMatchObject({
        ok: false,
        code: 'rate_limited',
        summary: expect.stringContaining('could not be checked'),
      });
    } finally {
      dead.disconnect();
    }
  });
});
