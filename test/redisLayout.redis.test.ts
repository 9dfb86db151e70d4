/**
 * The layout of a RedisStore's buckets on one server, and what a second review found about it (each reproduced
 * before its fix): a store opened with another number of buckets is refused for every call, erasure and deleteAll
 * included; a bucket of prefix P never shares a hash tag with the store of another prefix ("P:1"); a one-bucket
 * store records its layout too, and refuses bucket data whose record is gone; a store that accepts a data loss writes
 * the record again; the inboxes waiting longest come first across buckets; a dispatch whose Redis cannot be reached
 * still closes.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { bullmqDispatch } from '../src/dispatch/bullmqDispatch.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { redisBucketKeys } from '../src/store/redis/redisKeys.js';
import { bucketOf } from '../src/store/redis/redisLayout.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { freePort, useTestRedis } from './support/redis.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();
afterAll(() => redis?.stop());
const principal = { userId: 'u', tenantId: 't', scopes: [] };
const erasure = { reason: 'gdpr_erasure', at: Date.now(), by: 'dpo' };

async function seed(store: RedisStore, ids: string[]): Promise<void> {
  const orchestrator = createOrchestrator({
    tools: [],
    model: scriptedModel([reply.answer('ok')]),
    store,
    expirySweepMs: 0,
  });
  for (const taskId of ids) await orchestrator.run({ principal, goal: 'g', taskId });
  await orchestrator.close();
}

describe.skipIf(!redis)('RedisStore buckets on one server', () => {
  const prefixes: string[] = [];
  const fresh = () => {
    const prefix = redis!.freshPrefix();
    prefixes.push(prefix, `${prefix}:1`);
    return prefix;
  };
  afterAll(async () => {
    for (const prefix of prefixes) await redis!.deleteKeys(prefix);
  });

  it('refuses a store with another number of buckets for every call: erase, eraseUser, retention, deleteAll, leases', async () => {
    const prefix = fresh();
    const good = new RedisStore({ url: redis!.url, prefix, buckets: 4 });
    await seed(good, ['a', 'b', 'c']);
    const wrong = new RedisStore({ url: redis!.url, prefix });
    const refusals = [
      wrong.erase('a', erasure),
      wrong.eraseUser(principal, erasure),
      wrong.sweepRetention(),
      wrong.deleteAll(),
      wrong.tombstone('a'),
      wrong.readJournal('a', 'audit'),
      wrong.quarantined('a'),
      wrong.indexOwners(),
      wrong.leases.acquire('a', 1_000),
      wrong.inbox.after('a', 0),
    ];
    for (const attempt of refusals) (attempt as Promise<unknown>).catch(() => {});
    for (const attempt of refusals) await expect(attempt).rejects.toMatchObject({ code: 'store_layout_mismatch' });
    expect(await redis!.connect().get(`{${prefix}}:layout`)).toBe('4');
    expect((await good.list()).map((s) => s.taskId).sort()).toEqual(['a', 'b', 'c']);
    await good.close();
    await wrong.close();
  });

  it('keeps the buckets of prefix P apart from the store of prefix "P:1"', async () => {
    const prefix = fresh();
    const bucketed = new RedisStore({ url: redis!.url, prefix, buckets: 2 });
    const other = new RedisStore({ url: redis!.url, prefix: `${prefix}:1` });
    await seed(other, ['o-1', 'o-2']);
    await seed(bucketed, ['b-1']);
    expect((await bucketed.list()).map((s) => s.taskId)).toEqual(['b-1']);
    await bucketed.deleteAll();
    expect((await other.list()).map((s) => s.taskId).sort()).toEqual(['o-1', 'o-2']);
    await bucketed.close();
    await other.close();
  });

  it('records the layout from a one-bucket store too: a store with buckets on the same prefix is refused', async () => {
    const prefix = fresh();
    const one = new RedisStore({ url: redis!.url, prefix });
    await one.list();
    expect(await redis!.connect().get(`{${prefix}}:layout`)).toBe('1');
    const four = new RedisStore({ url: redis!.url, prefix, buckets: 4 });
    await expect(four.list()).rejects.toMatchObject({ code: 'store_layout_mismatch' });
    await one.close();
    await four.close();
  });

  it('refuses several buckets on bucket data whose layout record is gone, saying how to mend it', async () => {
    const prefix = fresh();
    const store = new RedisStore({ url: redis!.url, prefix, buckets: 4 });
    await seed(store, ['x']);
    await redis!.connect().del(`{${prefix}}:layout`);
    const again = new RedisStore({ url: redis!.url, prefix, buckets: 4 });
    await expect(again.load('x')).rejects.toMatchObject({
      code: 'store_layout_mismatch',
      message: expect.stringContaining('layout record'),
    });
    await store.close();
    await again.close();
  });

  it('lists the inboxes that waited longest first, across buckets', async () => {
    const prefix = fresh();
    const store = new RedisStore({ url: redis!.url, prefix, buckets: 4 });
    await store.list();
    const client = redis!.connect();
    const ids = Array.from({ length: 40 }, (_, i) => `p-${i}`);
    // Older the further a task's bucket is from 0: a merge that took bucket 0 first would give the youngest.
    for (const id of ids)
      await client.zadd(redisBucketKeys(prefix, bucketOf(id, 4), 4).inboxes, 1_000 - 100 * bucketOf(id, 4), id);
    const oldest = ids.filter((id) => bucketOf(id, 4) === 3);
    expect((await store.inbox.pending(Date.now(), oldest.length)).sort()).toEqual(oldest.sort());
    await store.close();
  });

  it(
    'closes a dispatch whose Redis cannot be reached, its wake-up subscriber never connected',
    async () => {
      const dispatch = bullmqDispatch({
        connection: { host: '127.0.0.1', port: await freePort(), maxRetriesPerRequest: 1, retryStrategy: () => null },
      });
      dispatch.onEvent(() => {});
      await new Promise((resolve) => setTimeout(resolve, 300));
      const closed = await Promise.race([
        dispatch.close().then(() => 'closed'),
        new Promise((resolve) => setTimeout(() => resolve(`still closing after ${scaled(5_000)} ms`), scaled(5_000))),
      ]);
      expect(closed).toBe('closed');
    },
    scaled(15_000),
  );
});

describe.skipIf(!redis)('RedisStore buckets after a loss of the layout record', () => {
  it('refuses a one-bucket store on bucket data whose record is gone, instead of recording 1', async () => {
    const prefix = redis!.freshPrefix();
    const four = new RedisStore({ url: redis!.url, prefix, buckets: 4 });
    await seed(four, ['a', 'b']);
    await redis!.connect().del(`{${prefix}}:layout`);
    const one = new RedisStore({ url: redis!.url, prefix });
    await expect(one.list()).rejects.toMatchObject({
      code: 'store_layout_mismatch',
      message: expect.stringContaining('layout record'),
    });
    expect(await redis!.connect().get(`{${prefix}}:layout`)).toBeNull();
    await four.close();
    await one.close();
    await redis!.deleteKeys(prefix);
  });

  it('writes the record again when a store accepts a data loss', async () => {
    const prefix = redis!.freshPrefix();
    const four = new RedisStore({ url: redis!.url, prefix, buckets: 4 });
    await seed(four, ['a']);
    await redis!.deleteKeys(prefix);
    await four.acceptDataLoss();
    expect(await redis!.connect().get(`{${prefix}}:layout`)).toBe('4');
    await seed(four, ['b']);
    const again = new RedisStore({ url: redis!.url, prefix, buckets: 4 });
    expect((await again.list()).map((s) => s.taskId)).toEqual(['b']);
    await four.close();
    await again.close();
    await redis!.deleteKeys(prefix);
  });
});
