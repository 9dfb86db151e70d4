/**
 * RedisStore specifics beyond the shared contract (test/redisContract.redis.test.ts): fencing, concurrency across
 * connections, corruption of keys under the prefix, an unreachable Redis, and the cost of a save.
 */
import { unpackAudit } from '../src/store/redis/redisAuditUnpacking.js';
import { spawnSync } from 'node:child_process';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/testing/manualClock.js';
import {
  AgentError,
  CorruptTaskError,
  FencedOutError,
  RevisionConflictError,
  StoreDataLostError,
  StoreUnavailableError,
  UnsupportedVersionError,
} from '../src/errors.js';
import type { TaskEnvelope } from '../src/store/envelope.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { redisKeys } from '../src/store/redis/redisKeys.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import type { ListQuery, SaveRequest, TaskStore } from '../src/store/taskStore.js';
import { T0, createRequest, marker, nextRequest } from './support/envelopes.js';
import { freePort, startRedisServer, useTestRedis } from './support/redis.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();
const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;

async function create(store: TaskStore, taskId: string, options: Parameters<typeof createRequest>[1] = {}) {
  const request = createRequest(taskId, options);
  await store.save(request);
  return request.envelope;
}

async function advance(store: TaskStore, previous: TaskEnvelope, options: Parameters<typeof nextRequest>[1] = {}) {
  const request = nextRequest(previous, options);
  await store.save(request);
  return request.envelope;
}

async function elapsed(promise: Promise<unknown>): Promise<{ ms: number; error: unknown }> {
  const start = performance.now();
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  return { ms: performance.now() - start, error };
}

describe.skipIf(!redis)('RedisStore', () => {
  let client: Redis;
  let prefix: string;
  let store: RedisStore;
  let clock: ManualClock;

  beforeAll(() => {
    client = redis!.connect();
  });
  afterAll(() => redis?.stop());
  beforeEach(() => {
    prefix = redis!.freshPrefix();
    clock = new ManualClock(T0);
    store = new RedisStore({ client, prefix, clock });
  });
  afterEach(async () => {
    await store.close();
    await redis!.deleteKeys(prefix);
  });

  describe('keys', () => {
    it('keeps every key under the {prefix} hash tag and the task id last', async () => {
      const first = await create(store, 'a:audit');
      await create(store, 'a', { state: 'waiting_for_confirmation', wakeAt: T0 + 10 });
      await advance(store, first, { audit: [marker(1)] });
      await store.leases.acquire('a', 1000);
      await store.quarantine('a', 'test');
      const keys = await client.keys(`{${prefix}}*`);
      expect(keys.length).toBeGreaterThanOrEqual(12);
      for (const key of keys) expect(key.startsWith(`{${prefix}}:`)).toBe(true);
      // "a:audit" is a task id, not task a's audit list: both tasks stay intact.
      expect((await store.load('a:audit'))!.revision).toBe(2);
      expect((await store.load('a'))!.revision).toBe(1);
      const k = redisKeys(prefix);
      expect(await client.type(k.task('a'))).toBe('hash');
      expect(await client.type(k.audit('a'))).toBe('stream');
      expect(await client.type(k.transcript('a'))).toBe('list');
      // The audit trail is a plain stream, one message per save, readable with XRANGE from any Redis client:
      // id "<n>-0" numbers the message's first entry from 1; `entries` holds them as a JSON array (or, packed, with
      // what they share kept once and their key lists as a table's columns: see redisAuditPacking.ts).
      const stream = await client.xrange(k.audit('a'), '-', '+');
      const fields = stream.map(
        ([, f]) =>
          Object.fromEntries([
            [f[0], f[1]],
            [f[2], f[3]],
          ]) as { entries: string; count: string },
      );
      const entries = fields.flatMap((f) => unpackAudit(JSON.parse(f.entries))!);
      expect(entries).toStrictEqual(await store.readJournal('a', 'audit'));
      let next = 1;
      stream.forEach(([id], i) => {
        expect(id).toBe(`${next}-0`);
        next += Number(fields[i]!.count);
      });
      expect(await client.type(k.state('waiting_for_confirmation'))).toBe('zset');
    });

    it('refuses a prefix that would break the hash tag', () => {
      expect(() => new RedisStore({ client, prefix: 'a}b' })).toThrow(TypeError);
      expect(() => new RedisStore({ client, prefix: '' })).toThrow(TypeError);
    });
  });

  describe('compare-and-set across connections', () => {
    it('lets exactly one of eight stores on separate connections win from the same revision', async () => {
      const first = await create(store, 't-race');
      const racers = Array.from({ length: 8 }, () => new RedisStore({ client: redis!.connect(), prefix }));
      await Promise.all(racers.map((r) => r.quarantined('warm-up')));
      const requests = racers.map((_, n) => nextRequest(first, { updatedAt: T0 + n, audit: [marker(n), marker(n)] }));
      const results = await Promise.allSettled(racers.map((r, n) => r.save(requests[n]!)));
      const won = results.flatMap((r, n) => (r.status === 'fulfilled' ? [n] : []));
      expect(won).toHaveLength(1);
      for (const result of results) {
        if (result.status === 'rejected') expect(result.reason).toBeInstanceOf(RevisionConflictError);
      }
      expect(await store.load('t-race')).toStrictEqual(requests[won[0]!]!.envelope);
      const audit = await store.readJournal('t-race', 'audit');
      expect(audit.slice(first.journal.audit)).toStrictEqual([marker(won[0]!), marker(won[0]!)]);
    });

    it('writes nothing when the journal lengths disagree with the stored journals', async () => {
      const first = await create(store, 't-gap');
      const messages = await client.xlen(redisKeys(prefix).audit('t-gap'));
      // A message nobody committed (written around the store): the next save's journal append must fail.
      await client.xadd(
        redisKeys(prefix).audit('t-gap'),
        `${first.journal.audit + 1}-0`,
        'entries',
        JSON.stringify([marker(99)]),
        'count',
        1,
      );
      const request = nextRequest(first, { state: 'done', audit: [marker(1)] });
      await expect(store.save(request)).rejects.toBeInstanceOf(RevisionConflictError);
      expect(await store.load('t-gap')).toStrictEqual(first);
      expect(await client.xlen(redisKeys(prefix).audit('t-gap'))).toBe(messages + 1);
      expect(await store.list({ states: ['done'] })).toEqual([]);
      // ...and the uncommitted entry is never read back.
      expect(await store.readJournal('t-gap', 'audit', 0, 10_000)).toHaveLength(first.journal.audit);
    });

    it('appends thousands of entries in one save, in order', async () => {
      const first = await create(store, 't-bulk');
      const audit = Array.from({ length: 2500 }, (_, n) => marker(n));
      await advance(store, first, { audit });
      const read = await store.readJournal('t-bulk', 'audit', first.journal.audit);
      expect(read).toStrictEqual(audit);
      expect(await store.readJournal('t-bulk', 'audit', -2)).toStrictEqual([marker(2498), marker(2499)]);
      expect(await store.readJournal('t-bulk', 'audit', 10, 5)).toEqual([]);
    });
  });

  describe('fencing', () => {
    it('refuses a writer whose lease was released and taken by another, changing nothing', async () => {
      const first = await create(store, 't-fence');
      const a = (await store.leases.acquire('t-fence', 10_000))!;
      const second = await advance(store, first, {})
        .then(() => null)
        .catch((e: unknown) => e);
      expect(second).toBeInstanceOf(FencedOutError); // unfenced while A holds the lease
      const viaA = nextRequest(first, { audit: [marker(1)] });
      await store.save({ ...viaA, fence: a.fence });
      await store.leases.release(a);
      const b = (await store.leases.acquire('t-fence', 10_000))!;
      expect(BigInt(b.fence)).toBeGreaterThan(BigInt(a.fence));

      const stale = nextRequest(viaA.envelope, { state: 'done', audit: [marker(2)] });
      const error = await store.save({ ...stale, fence: a.fence }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(FencedOutError);
      expect((error as Error).message).toContain(`fence ${a.fence} is stale`);
      expect(await store.load('t-fence')).toStrictEqual(viaA.envelope);
      expect(await store.readJournal('t-fence', 'audit')).toHaveLength(viaA.envelope.journal.audit);
      expect(await store.list({ states: ['done'] })).toEqual([]);

      await store.save({ ...stale, fence: b.fence });
      expect((await store.load('t-fence'))!.summary.state).toBe('done');
    });

    it('refuses the old holder after its lease expired and another took it', async () => {
      const first = await create(store, 't-expired');
      const a = (await store.leases.acquire('t-expired', 50))!;
      await new Promise((resolve) => setTimeout(resolve, 120));
      const b = (await store.leases.acquire('t-expired', 10_000))!;
      expect(b).not.toBeNull();
      await expect(store.save({ ...nextRequest(first), fence: a.fence })).rejects.toBeInstanceOf(FencedOutError);
      expect(await store.leases.renew(a, 10_000)).toBe(false);
      await store.save({ ...nextRequest(first), fence: b.fence });
    });

    it('refuses a fence that was never handed out', async () => {
      const request = createRequest('t-forged');
      await expect(store.save({ ...request, fence: '7' })).rejects.toThrow(/fence 7 was never handed out/);
      await expect(store.save({ ...request, fence: 'not-a-number' })).rejects.toBeInstanceOf(FencedOutError);
      expect(await store.load('t-forged')).toBeNull();
    });
  });

  describe('leases', () => {
    it('acquires with a random token, a fence and an expiry from the store clock', async () => {
      const lease = await store.leases.acquire('l-1', 5000);
      expect(lease).toEqual({
        taskId: 'l-1',
        token: expect.stringMatching(/^[0-9a-f]{32}$/),
        fence: '1',
        expiresAt: T0 + 5000,
      });
      const pttl = await client.pttl(redisKeys(prefix).lease('l-1'));
      expect(pttl).toBeGreaterThan(4000);
      expect(pttl).toBeLessThanOrEqual(5000);
      expect(await store.leases.acquire('l-1', 5000)).toBeNull();
    });

    it('renews only with the holding token, extending the key and the reported expiry', async () => {
      const lease = (await store.leases.acquire('l-renew', 1000))!;
      await clock.advance(500);
      expect(await store.leases.renew({ ...lease, token: 'x'.repeat(32) }, 60_000)).toBe(false);
      expect(await client.pttl(redisKeys(prefix).lease('l-renew'))).toBeLessThanOrEqual(1000);
      expect(await store.leases.renew(lease, 60_000)).toBe(true);
      expect(lease.expiresAt).toBe(T0 + 500 + 60_000);
      expect(await client.pttl(redisKeys(prefix).lease('l-renew'))).toBeGreaterThan(59_000);
    });

    it('releases only with the holding token; fences keep growing after release', async () => {
      const first = (await store.leases.acquire('l-rel', 10_000))!;
      await store.leases.release({ ...first, token: 'impostor' });
      expect(await store.leases.acquire('l-rel', 10_000)).toBeNull();
      await store.leases.release(first);
      await store.leases.release(first); // idempotent
      const fences = [first.fence];
      for (let i = 0; i < 3; i++) {
        const lease = (await store.leases.acquire('l-rel', 10_000))!;
        fences.push(lease.fence);
        await store.leases.release(lease);
      }
      expect(fences).toEqual(['1', '2', '3', '4']);
    });

    it('refuses a ttl that Redis cannot take', async () => {
      await expect(store.leases.acquire('l-ttl', 0)).rejects.toMatchObject({ code: 'invalid_lease_ttl' });
      await expect(store.leases.acquire('l-ttl', Number.NaN)).rejects.toBeInstanceOf(AgentError);
    });
  });

  describe('list', () => {
    it('answers like MemoryStore for states, dueBefore, limits and ties', async () => {
      const memory = new MemoryStore();
      const ids = ['t-B', 't-a', 't-c', 'u-1', 'u-2', 'v'];
      const states = [
        'running',
        'waiting_for_confirmation',
        'waiting_for_user',
        'done',
        'waiting_for_confirmation',
        'failed',
      ] as const;
      for (const [n, id] of ids.entries()) {
        // Three tasks share updatedAt: ties go by ascending taskId, while ZREVRANGE gives them in descending order.
        const updatedAt = T0 + (n < 3 ? 100 : n * 100);
        const request = createRequest(id, { state: states[n], updatedAt, wakeAt: T0 + 1000 * (n + 1) });
        await store.save(request);
        await memory.save(request);
      }
      const queries: ListQuery[] = [
        {},
        { limit: 1 },
        { limit: 2 },
        { limit: 4 },
        { states: ['waiting_for_confirmation'] },
        { states: ['running', 'waiting_for_user', 'waiting_for_confirmation'], limit: 2 },
        { states: [] },
        { dueBefore: T0 + 2000 },
        { dueBefore: T0 + 5000 },
        { dueBefore: T0 + 5000, limit: 1 },
        { dueBefore: T0 + 5000, states: ['running'] },
        { limit: 0 },
      ];
      for (const query of queries)
        expect(await store.list(query), JSON.stringify(query)).toStrictEqual(await memory.list(query));
    });

    it('moves a task out of the old state index and the wake index when it changes state', async () => {
      const first = await create(store, 't-move', { state: 'waiting_for_confirmation', wakeAt: T0 + 10 });
      expect((await store.list({ dueBefore: T0 + 10 })).map((s) => s.taskId)).toEqual(['t-move']);
      await advance(store, first, { state: 'done' });
      expect(await store.list({ dueBefore: T0 + 10 })).toEqual([]);
      expect(await store.list({ states: ['waiting_for_confirmation'] })).toEqual([]);
      expect((await store.list({ states: ['done'] })).map((s) => s.revision)).toEqual([2]);
      const k = redisKeys(prefix);
      expect(await client.zcard(k.state('waiting_for_confirmation'))).toBe(0);
      expect(await client.zcard(k.wake)).toBe(0);
    });
  });

  describe('when data under the prefix is corrupted', () => {
    let good: TaskEnvelope;
    beforeEach(async () => {
      good = await create(store, 't-good');
      await create(store, 't-bad');
    });

    async function expectOthersUnaffected() {
      expect(await store.load('t-good')).toStrictEqual(good);
      expect((await store.list()).map((s) => s.taskId)).toContain('t-good');
      await advance(store, good, { audit: [marker(1)] });
    }

    it('refuses envelope text that is not JSON with CorruptTaskError', async () => {
      await client.hset(redisKeys(prefix).task('t-bad'), 'envelope', '{"schemaVersion":1,');
      const error = await store.load('t-bad').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CorruptTaskError);
      expect((error as Error).message).toContain('not JSON');
      await expectOthersUnaffected();
    });

    it.each(['null', '5', '"t-bad"', '[]', '{"taskId":"t-bad","updatedAt":"soon"}'])(
      'leaves a task whose stored summary is JSON of the wrong shape (%s) out of listings',
      async (text) => {
        await client.hset(redisKeys(prefix).task('t-bad'), 'summary', text);
        for (const query of [{}, { states: ['running' as const] }, { owner: { tenantId: 'acme', userId: 'E17' } }]) {
          const listed = await store.list(query);
          expect(listed.map((s) => s.taskId)).not.toContain('t-bad');
          expect(listed.every((s) => typeof s?.taskId === 'string')).toBe(true);
        }
        await expectOthersUnaffected();
      },
    );

    it('refuses a field of the wrong type, naming its path', async () => {
      const envelope = JSON.parse((await client.hget(redisKeys(prefix).task('t-bad'), 'envelope'))!);
      envelope.snapshot.context.turn = 'three';
      await client.hset(redisKeys(prefix).task('t-bad'), 'envelope', JSON.stringify(envelope));
      await expect(store.load('t-bad')).rejects.toThrow(/snapshot\.context\.turn/);
      await expect(store.load('t-bad')).rejects.toBeInstanceOf(CorruptTaskError);
      await expectOthersUnaffected();
    });

    it('refuses an envelope whose revision disagrees with the task hash', async () => {
      await client.hset(redisKeys(prefix).task('t-bad'), 'revision', '5');
      await expect(store.load('t-bad')).rejects.toThrow(/revision 1 but .* records 5/);
    });

    it('refuses a task hash that has a revision but no envelope', async () => {
      await client.hdel(redisKeys(prefix).task('t-bad'), 'envelope');
      await expect(store.load('t-bad')).rejects.toThrow(/has a revision but no envelope/);
      await expectOthersUnaffected();
    });

    it('refuses an unknown envelope version with UnsupportedVersionError', async () => {
      const envelope = JSON.parse((await client.hget(redisKeys(prefix).task('t-bad'), 'envelope'))!);
      await client.hset(redisKeys(prefix).task('t-bad'), 'envelope', JSON.stringify({ ...envelope, schemaVersion: 9 }));
      await expect(store.load('t-bad')).rejects.toBeInstanceOf(UnsupportedVersionError);
    });

    it('refuses a task key of another Redis type (WRONGTYPE), naming the key', async () => {
      const k = redisKeys(prefix);
      await client.set(k.task('t-string'), 'hello');
      const attempts = [
        store.load('t-string'),
        store.save(createRequest('t-string')),
        store.readJournal('t-string', 'audit'),
      ];
      // Each is awaited in turn below; a later one may be refused first.
      for (const attempt of attempts) attempt.catch(() => {});
      for (const attempt of attempts) {
        const error = await attempt.catch((e: unknown) => e);
        expect(error).toBeInstanceOf(CorruptTaskError);
        expect((error as Error).message).toContain(k.task('t-string'));
      }
      expect(await client.get(k.task('t-string'))).toBe('hello');
      await expectOthersUnaffected();
    });

    it('refuses journal and lease keys of another Redis type', async () => {
      const k = redisKeys(prefix);
      await client.del(k.audit('t-bad'));
      await client.set(k.audit('t-bad'), 'x');
      await client.hset(k.lease('t-bad'), 'a', 'b');
      await expect(store.readJournal('t-bad', 'audit')).rejects.toThrow(k.audit('t-bad'));
      await expect(store.save(nextRequest(good, {}))).resolves.toBeUndefined();
      const bad = (await store.load('t-bad'))!;
      await expect(store.save(nextRequest(bad))).rejects.toBeInstanceOf(CorruptTaskError);
      await expect(store.leases.acquire('t-bad', 1000)).rejects.toBeInstanceOf(CorruptTaskError);
      await expect(
        store.leases.renew({ taskId: 't-bad', token: 't', fence: '1', expiresAt: 0 }, 1000),
      ).rejects.toBeInstanceOf(CorruptTaskError);
      expect((await store.load('t-bad'))!.revision).toBe(1);
    });

    it('refuses, before writing anything, a save into journal keys of another Redis type', async () => {
      const k = redisKeys(prefix);
      const before = (await store.load('t-bad'))!;
      const untouched = async () => {
        expect((await store.load('t-bad'))!.revision).toBe(before.revision);
        expect(await client.hget(k.task('t-bad'), 'transcriptLength')).toBe(String(before.journal.transcript));
      };
      // The audit stream is a string: the append (the first write) is refused, naming the key.
      const audit = await client.dumpBuffer(k.audit('t-bad'));
      const messages = await client.xlen(k.audit('t-bad'));
      await client.del(k.audit('t-bad'));
      await client.set(k.audit('t-bad'), 'x');
      const withBoth = nextRequest(before, { audit: [marker(1)], transcript: [marker(2)] });
      await expect(store.save(withBoth)).rejects.toThrow(k.audit('t-bad'));
      await untouched();
      expect(await client.llen(k.transcript('t-bad'))).toBe(before.journal.transcript);
      await client.del(k.audit('t-bad'));
      await client.restore(k.audit('t-bad'), 0, audit!);
      // The transcript list is a set: a save that appends to it measures it first.
      await client.del(k.transcript('t-bad'));
      await client.sadd(k.transcript('t-bad'), 'x');
      await expect(store.save(withBoth)).rejects.toThrow(k.transcript('t-bad'));
      await untouched();
      expect(await client.xlen(k.audit('t-bad'))).toBe(messages);
    });

    it('refuses a journal entry that is not JSON', async () => {
      await client.lset(redisKeys(prefix).transcript('t-bad'), 0, 'not json');
      await expect(store.readJournal('t-bad', 'transcript')).rejects.toBeInstanceOf(CorruptTaskError);
      await expect(store.readJournal('t-bad', 'audit')).resolves.toHaveLength(good.journal.audit);
    });

    it('reports an index key of another type as the store being unusable, not as a task problem', async () => {
      const k = redisKeys(prefix);
      await client.del(k.updated);
      await client.set(k.updated, 'oops');
      await expect(store.list()).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.save(nextRequest(good))).rejects.toThrow(/index key .*index:updated/);
      expect(await store.load('t-good')).toStrictEqual(good);
    });
  });

  describe('when Redis cannot be reached', () => {
    it('fails every operation with StoreUnavailableError within 2 s', async () => {
      const port = await freePort();
      const down = new RedisStore({ url: `redis://127.0.0.1:${port}`, prefix });
      const request = createRequest('t-down');
      const lease = { taskId: 't-down', token: 'x', fence: '1', expiresAt: 0 };
      const attempts = [
        down.load('t-down'),
        down.save(request),
        down.list(),
        down.readJournal('t-down', 'audit'),
        down.quarantine('t-down', 'x'),
        down.quarantined('t-down'),
        down.leases.acquire('t-down', 1000),
        down.leases.renew(lease, 1000),
        down.leases.release(lease),
      ];
      for (const { ms, error } of await Promise.all(attempts.map(elapsed))) {
        expect(error).toBeInstanceOf(StoreUnavailableError);
        expect((error as Error).message).toContain(`127.0.0.1:${port}`);
        expect(ms).toBeLessThan(scaled(2_000));
      }
      // Later calls fail as fast: the client keeps reconnecting in the background, bounded per command.
      const again = await elapsed(down.load('t-down'));
      expect(again.error).toBeInstanceOf(StoreUnavailableError);
      expect(again.ms).toBeLessThan(scaled(2_000));
      await down.close();
    });

    it.skipIf(!hasRedisServer)('fails fast while its Redis is stopped and recovers when it is back', async () => {
      let server = await startRedisServer();
      const port = Number(new URL(server.url).port);
      const own = new RedisStore({ url: server.url, prefix });
      try {
        const first = await create(own, 't-stop');
        await server.stop();
        const { ms, error } = await elapsed(own.save(nextRequest(first)));
        expect(error).toBeInstanceOf(StoreUnavailableError);
        expect((error as Error).message).toContain('could not be reached');
        expect(ms).toBeLessThan(scaled(2_000));
        server = await startRedisServer(port);
        // The client reconnects in the background (delay capped at 400 ms); the new server is empty, which the
        // store reports as data loss (test/redisDataLoss.redis.test.ts) until it is told to carry on.
        const deadline = Date.now() + scaled(5000);
        let loaded: unknown = undefined;
        while (loaded === undefined && Date.now() < deadline) {
          loaded = await own.load('t-stop').catch((e: unknown) => (e instanceof StoreUnavailableError ? undefined : e));
        }
        expect(loaded).toBeInstanceOf(StoreDataLostError);
        await own.acceptDataLoss();
        expect(await own.load('t-stop')).toBeNull();
        await create(own, 't-stop');
      } finally {
        await own.close();
        await server.stop();
      }
    });

    it('fails as unavailable after close(), and leaves an injected client open', async () => {
      await store.close();
      await expect(store.load('x')).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(await client.ping()).toBe('PONG');
    });
  });

  describe('cost of a save', () => {
    /** Bytes this client writes to Redis for one save (the script is cached by then: EVALSHA, not EVAL). */
    async function bytesOfSave(measured: RedisStore, socket: { bytesWritten: number }, request: SaveRequest) {
      const before = socket.bytesWritten;
      await measured.save(request);
      return socket.bytesWritten - before;
    }

    async function grow(measured: RedisStore, taskId: string, entries: number): Promise<TaskEnvelope> {
      let envelope = await create(measured, taskId);
      const audit = Array.from({ length: entries - envelope.journal.audit }, (_, n) =>
        marker(n, { pad: 'x'.repeat(200) }),
      );
      envelope = await advance(measured, envelope, { audit });
      return envelope;
    }

    it('does not grow with the journal: bytes at journal length 10 vs 1000 within 1.2x', async () => {
      const ownClient = redis!.connect();
      await ownClient.ping();
      const measured = new RedisStore({ client: ownClient, prefix });
      const socket = ownClient.stream as unknown as { bytesWritten: number };
      let short = await grow(measured, 't-short', 10);
      let long = await grow(measured, 't-long', 1000);
      expect(long.journal.audit).toBe(1000);
      // Same-size updates: one new audit entry each, same state; the ids have the same length.
      const step = (envelope: TaskEnvelope) => nextRequest(envelope, { audit: [marker(1)] });
      const shortRequest = step(short);
      const shortBytes = await bytesOfSave(measured, socket, shortRequest);
      short = shortRequest.envelope;
      const longRequest = step(long);
      const longBytes = await bytesOfSave(measured, socket, longRequest);
      long = longRequest.envelope;

      const timings: number[] = [];
      for (let i = 0; i < 200; i++) {
        const request = step(long);
        const start = performance.now();
        await measured.save(request);
        timings.push(performance.now() - start);
        long = request.envelope;
      }
      timings.sort((a, b) => a - b);
      const memory = await ownClient.memory('USAGE', redisKeys(prefix).task('t-long'));
      console.info(
        `RedisStore save: ${shortBytes} B at journal ${short.journal.audit - 1}, ${longBytes} B at journal ` +
          `${longRequest.envelope.journal.audit - 1}; round trip median ${timings[100]!.toFixed(3)} ms, ` +
          `p95 ${timings[190]!.toFixed(3)} ms over 200 saves (journal ${long.journal.audit}); task hash ${memory} B`,
      );
      expect(longBytes / shortBytes).toBeLessThan(1.2);
      expect(shortBytes / longBytes).toBeLessThan(1.2);
      await measured.close();
    });
  });
});
