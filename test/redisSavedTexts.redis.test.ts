/**
 * The texts a RedisStore keeps of its last saves, for the next saves' edits (redisEnvelopeText.ts): bounded for the
 * whole store, in number (1,024 tasks whatever the number of buckets) and in bytes (large envelopes do not pile up
 * in the process's memory), and what it keeps still makes exact saves.
 */
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/testing/manualClock.js';
import { redisKeys } from '../src/store/redis/redisKeys.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { T0, createRequest, nextRequest } from './support/envelopes.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();

/** What the store's buckets keep, over the distinct caches (one a bucket, or one shared). */
function held(store: RedisStore): { texts: number; bytes: number } {
  type Saved = { text: { bytes: number } };
  const parts = (store as unknown as { parts: { texts: { saved: Map<string, Saved> } }[] }).parts;
  const caches = new Set(parts.map((part) => part.texts));
  let texts = 0;
  let bytes = 0;
  for (const cache of caches) {
    texts += cache.saved.size;
    for (const saved of cache.saved.values()) bytes += saved.text.bytes;
  }
  return { texts, bytes };
}

/** The task ids whose keys the store keeps for their next saves (redisSaveArgs.ts). */
function keptKeys(store: RedisStore): string[] {
  const parts = (store as unknown as { parts: { args: { tasks: Map<string, unknown> } }[] }).parts;
  return [...new Set(parts.map((part) => part.args))].flatMap((cache) => [...cache.tasks.keys()]);
}

/** The task ids whose last saved text the store keeps. */
function keptTexts(store: RedisStore): string[] {
  const parts = (store as unknown as { parts: { texts: { saved: Map<string, unknown> } }[] }).parts;
  return [...new Set(parts.map((part) => part.texts))].flatMap((cache) => [...cache.saved.keys()]);
}

const GDPR = { reason: 'gdpr_erasure', at: T0 + 1_000 };

describe.skipIf(!redis)('RedisStore saved texts', () => {
  let client: Redis;
  let prefix: string;
  let store: RedisStore;

  beforeAll(() => {
    client = redis!.connect();
  });
  afterAll(() => redis?.stop());
  beforeEach(() => {
    prefix = redis!.freshPrefix();
  });
  afterEach(async () => {
    await store.close();
    await redis!.deleteKeys(prefix);
  });

  it('keeps at most 1,024 texts for the whole store, however many buckets it has', async () => {
    store = new RedisStore({ client, prefix, buckets: 64, clock: new ManualClock(T0), envelopeEdits: true });
    await Promise.all(Array.from({ length: 1100 }, (_, i) => store.save(createRequest(`t${i}`))));
    expect(held(store).texts).toBeLessThanOrEqual(1024);
  });

  it("keeps nothing of an erased task: not its last envelope's text, not its keys", async () => {
    store = new RedisStore({ client, prefix, buckets: 4, clock: new ManualClock(T0), envelopeEdits: true });
    for (const id of ['t1', 't2', 't3']) await store.save(createRequest(id));
    expect(keptTexts(store).sort()).toEqual(['t1', 't2', 't3']);
    expect(keptKeys(store).sort()).toEqual(['t1', 't2', 't3']);
    await store.erase('t1', GDPR);
    expect(keptTexts(store).sort()).toEqual(['t2', 't3']);
    expect(keptKeys(store).sort()).toEqual(['t2', 't3']);
    // Erasing a user's tasks (all three are E17's) lets go of the rest.
    const report = await store.eraseUser({ tenantId: 'acme', userId: 'E17' }, GDPR);
    expect(report.erased.map((tombstone) => tombstone.taskId).sort()).toEqual(['t2', 't3']);
    expect(keptTexts(store)).toEqual([]);
    expect(keptKeys(store)).toEqual([]);
  });

  it("keeps nothing of any task after a user's erasure failed midway (which were erased is not known)", async () => {
    store = new RedisStore({ client, prefix, buckets: 2, clock: new ManualClock(T0), envelopeEdits: true });
    for (const id of ['t1', 't2', 't3', 't4']) await store.save(createRequest(id));
    expect(keptTexts(store)).toHaveLength(4);
    // One bucket's erasure fails after it may have erased some of the user's tasks there.
    type Part = { erasure: { eraseUser: (...args: unknown[]) => Promise<unknown> } };
    const part = (store as unknown as { parts: Part[] }).parts[0]!;
    const eraseUser = part.erasure.eraseUser.bind(part.erasure);
    part.erasure.eraseUser = async (...args) => {
      await eraseUser(...args);
      throw new Error('connection lost');
    };
    await expect(store.eraseUser({ tenantId: 'acme', userId: 'E17' }, GDPR)).rejects.toThrow('connection lost');
    expect(keptTexts(store)).toEqual([]);
    expect(keptKeys(store)).toEqual([]);
  });

  it('keeps at most 16 MiB of texts, and large envelopes still save exactly', async () => {
    store = new RedisStore({ client, prefix, clock: new ManualClock(T0), envelopeEdits: true });
    const big = 'é'.repeat(300_000) + 'x'.repeat(400_000);
    const requests = Array.from({ length: 20 }, (_, i) => {
      const request = createRequest(`t${i}`);
      (request.envelope.snapshot.context as { goal: string }).goal = `${i} ${big}`;
      return request;
    });
    for (const request of requests) await store.save(request);
    expect(held(store).bytes).toBeLessThanOrEqual(16 * 2 ** 20);
    // The most recent ones are kept and go on as edits; every save is exact.
    for (const request of requests.slice(-3)) {
      const next = nextRequest(request.envelope);
      (next.envelope.snapshot.context as { goal: string }).goal = `${big} changed`;
      await store.save(next);
      // (Past what a goal may hold, so compared as stored rather than loaded.)
      const stored = await client.hget(redisKeys(prefix).task(next.envelope.taskId), 'envelope');
      expect(stored === JSON.stringify(next.envelope)).toBe(true);
    }
  });
});
