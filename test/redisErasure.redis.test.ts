/**
 * RedisStore erasure beyond the shared contract: the owner index the save script keeps and the migration for data
 * saved before it, an erasure refused as a whole by a damaged index, keys of other types under a task's names,
 * and stores on separate connections.
 */
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { StoreUnavailableError, TaskErasedError } from '../src/errors.js';
import { redisKeys } from '../src/store/redis/redisKeys.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { T0, createRequest, marker, nextRequest, taskInput } from './support/envelopes.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();
const GDPR = { reason: 'gdpr_erasure', at: T0 + 1, by: 'dpo-7' };
const ALICE = { tenantId: 'acme', userId: 'alice' };

function ofAlice(taskId: string) {
  return createRequest(taskId, { input: { principal: { ...taskInput(taskId).principal, ...ALICE } } });
}

describe.skipIf(!redis)('RedisStore erasure', () => {
  let client: Redis;
  let prefix: string;
  let store: RedisStore;
  let k: ReturnType<typeof redisKeys>;

  beforeAll(() => {
    client = redis!.connect();
  });
  afterAll(() => redis?.stop());
  beforeEach(() => {
    prefix = redis!.freshPrefix();
    store = new RedisStore({ client, prefix });
    k = redisKeys(prefix);
  });
  afterEach(async () => {
    await store.close();
    await redis!.deleteKeys(prefix);
  });

  describe('the owner index', () => {
    it('is kept by every save and named by a hash, not by the user id', async () => {
      await store.save(ofAlice('a-1'));
      expect(await client.zrange(k.user(ALICE), '0', '-1')).toEqual(['a-1']);
      expect(await client.hget(k.task('a-1'), 'owner')).toBe(k.user(ALICE));
      expect(k.user(ALICE)).not.toContain('alice');
      // Unambiguous: a colon cannot move a user id into the tenant id.
      expect(k.user({ tenantId: 'a:b', userId: 'c' })).not.toBe(k.user({ tenantId: 'a', userId: 'b:c' }));
      // The last owner's key is remembered, never handed to another owner.
      const bob = { tenantId: ALICE.tenantId, userId: 'bob' };
      const keysOf = [ALICE, bob, ALICE, ALICE, bob].map((owner) => k.user(owner));
      expect(new Set(keysOf).size).toBe(2);
      expect(keysOf).toEqual([keysOf[0], keysOf[1], keysOf[0], keysOf[0], keysOf[1]]);
      expect(redisKeys(prefix).user(bob)).toBe(keysOf[1]);
      await store.erase('a-1', GDPR);
      expect(await client.exists(k.user(ALICE))).toBe(0);
    });

    it('gets a task saved by an older version back on that task’s next save', async () => {
      const request = ofAlice('a-old');
      await store.save(request);
      // What an older version left: no owner recorded, no index entry.
      await client.hdel(k.task('a-old'), 'owner');
      await client.del(k.user(ALICE));
      await store.save(nextRequest(request.envelope, { audit: [marker(1)] }));
      expect(await client.zrange(k.user(ALICE), '0', '-1')).toEqual(['a-old']);
    });

    it('is built for data saved before it existed by indexOwners, idempotently', async () => {
      for (const id of ['a-1', 'a-2']) await store.save(ofAlice(id));
      await store.save(createRequest('e17-1'));
      await store.save(ofAlice('a-bad'));
      for (const id of ['a-1', 'a-2', 'e17-1', 'a-bad']) await client.hdel(k.task(id), 'owner');
      await client.del(k.user(ALICE), k.user({ tenantId: 'acme', userId: 'E17' }));
      await client.hset(k.task('a-bad'), 'summary', '{not json');
      expect((await store.eraseUser(ALICE, GDPR)).erased).toEqual([]);

      expect(await store.indexOwners()).toStrictEqual({ scanned: 4, indexed: 3, unreadable: ['a-bad'] });
      expect(await store.indexOwners()).toStrictEqual({ scanned: 4, indexed: 0, unreadable: ['a-bad'] });
      const erased = await store.eraseUser(ALICE, GDPR);
      expect(erased.erased.map((t) => t.taskId).sort()).toEqual(['a-1', 'a-2']);
      expect(await store.load('e17-1')).not.toBeNull();
    });
  });

  it('refuses an erasure as a whole when an index key holds another type, changing nothing', async () => {
    const request = createRequest('t-index');
    await store.save(request);
    await client.set(k.erased, 'oops');
    const error = await store.erase('t-index', GDPR).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toContain(k.erased);
    expect(await store.load('t-index')).toStrictEqual(request.envelope);
    expect(await store.readJournal('t-index', 'audit')).toHaveLength(request.envelope.journal.audit);
    expect(await client.exists(k.tombstone('t-index'))).toBe(0);
  });

  it('erases keys of other types under the task’s own names', async () => {
    await store.save(createRequest('t-typed'));
    await client.del(k.audit('t-typed'));
    await client.set(k.audit('t-typed'), 'not a stream');
    await client.hset(k.lease('t-typed'), 'a', 'b');
    await store.erase('t-typed', GDPR);
    expect(
      await client.exists(
        k.task('t-typed'),
        k.audit('t-typed'),
        k.transcript('t-typed'),
        k.lease('t-typed'),
        k.fence('t-typed'),
      ),
    ).toBe(0);
  });

  it('stores the tombstone as plain JSON any client can read', async () => {
    await store.save(createRequest('t-json'));
    const tombstone = await store.erase('t-json', GDPR);
    expect(JSON.parse((await client.get(k.tombstone('t-json')))!)).toStrictEqual(tombstone);
    expect(await client.zscore(k.erased, 't-json')).toBe(String(GDPR.at));
  });

  it('refuses a save from a store on another connection after the erasure', async () => {
    const other = new RedisStore({ client: redis!.connect(), prefix });
    const lease = (await other.leases.acquire('t-remote', 60_000))!;
    const request = createRequest('t-remote');
    await other.save({ ...request, fence: lease.fence });
    await store.erase('t-remote', GDPR);
    await expect(other.save({ ...nextRequest(request.envelope), fence: lease.fence })).rejects.toBeInstanceOf(
      TaskErasedError,
    );
    expect(await other.leases.renew(lease, 60_000)).toBe(false);
    const keys = await client.keys(`{${prefix}}:*t-remote*`);
    expect(keys).toEqual([k.tombstone('t-remote')]);
    await other.close();
  });
});
