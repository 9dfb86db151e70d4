/**
 * Data loss on Redis: the epoch marker (`{prefix}:epoch`, src/store/redis/redisEpoch.ts). A Redis restarted without
 * persistence (our own redis-server, stopped by pid and started again on the same port), a data set replaced under
 * the prefix, and an orchestrator whose live task meets a vanished data set: every case is reported as data loss
 * (StoreDataLostError), never as a fence or a missing task, and nothing is recreated until the loss is accepted.
 */
import { spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  FencedOutError,
  RevisionConflictError,
  StoreDataLostError,
  StoreUnavailableError,
  TaskNotFoundError,
} from '../src/errors.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import type { Logger } from '../src/orchestrator/hooks.js';
import { redisKeys } from '../src/store/redis/redisKeys.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import type { Lease } from '../src/store/taskStore.js';
import { reply } from '../src/testing/scriptedModel.js';
import { defineTool } from '../src/tool.js';
import { bullmqDispatch } from '../src/dispatch/bullmqDispatch.js';
import { createRequest, marker, nextRequest } from './support/envelopes.js';
import { SUPPORT, harness, until } from './support/harness.js';
import { type RedisServer, startRedisServer, useTestRedis } from './support/redis.js';

const redis = await useTestRedis();
const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;
const EPOCH = /^[0-9a-f]{16}@\d{4}-\d\d-\d\dT[\d:.]+Z$/;

/** The rejection of `promise` (fails the test if it resolves). */
async function refusal(promise: Promise<unknown>): Promise<Error> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!('error' in outcome)) throw new Error(`expected a refusal, got ${JSON.stringify(outcome.value)}`);
  return outcome.error as Error;
}

function expectDataLost(error: Error, expected: string, found: string | null): void {
  expect(error).toBeInstanceOf(StoreDataLostError);
  expect(error).not.toBeInstanceOf(StoreUnavailableError);
  expect(error).toMatchObject({ code: 'store_data_lost', expected, found });
  expect(error.message).toContain(
    found === null
      ? `vanished (epoch ${expected} expected, none found)`
      : `was replaced (epoch ${expected} expected, ${found} found)`,
  );
}

describe.skipIf(!hasRedisServer && process.env.CI !== 'true')('when Redis restarts without persistence', () => {
  let server: RedisServer | null = null;
  let admin: Redis;
  const stores: RedisStore[] = [];

  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
    await server?.stop();
    server = null;
  });

  it('reports the loss on every call of a store that knew the data, recreates nothing, and carries on once accepted', async () => {
    expect(hasRedisServer, 'CI=true needs redis-server on PATH').toBe(true);
    server = await startRedisServer();
    const port = Number(new URL(server.url).port);
    const prefix = 'lost';
    const k = redisKeys(prefix);
    const store = new RedisStore({ url: server.url, prefix });
    stores.push(store);

    const first = createRequest('t-1');
    await store.save(first);
    const lease = (await store.leases.acquire('t-1', 60_000))!;
    const second = nextRequest(first.envelope, { audit: [marker(1)] });
    await store.save({ ...second, fence: lease.fence });
    admin = connect(server.url);
    const epoch = (await admin.get(k.epoch))!;
    expect(epoch).toMatch(EPOCH);
    admin.disconnect();

    // Stopped by pid, started again on the same port with nothing on disk: the data set is gone.
    await server.stop();
    server = await startRedisServer(port);
    admin = connect(server.url);
    await until(
      async () => !((await store.load('t-1').catch((e: unknown) => e)) instanceof StoreUnavailableError),
      5_000,
    );

    const third = nextRequest(second.envelope, { state: 'done', audit: [marker(2)] });
    const fenced = await refusal(store.save({ ...third, fence: lease.fence }));
    expect(fenced).not.toBeInstanceOf(FencedOutError);
    expect(fenced).not.toBeInstanceOf(RevisionConflictError);
    expectDataLost(fenced, epoch, null);
    expect(fenced.message).toContain(
      `Redis at 127.0.0.1:${port} refused the save of task t-1: the data set under {lost} vanished`,
    );
    expect(fenced.message).toContain('Redis restarted without persistence or was flushed');
    expect(fenced.message).toContain('acceptDataLoss()');
    expectDataLost(await refusal(store.save(third)), epoch, null);
    expectDataLost(await refusal(store.load('t-1')), epoch, null);
    expectDataLost(await refusal(store.list()), epoch, null);
    expectDataLost(await refusal(store.leases.renew(lease, 60_000)), epoch, null);
    expectDataLost(await refusal(store.leases.acquire('t-1', 60_000)), epoch, null);
    // Neither the vanished task nor a new one is created in the empty data set, and no marker either.
    expectDataLost(await refusal(store.save(createRequest('t-1'))), epoch, null);
    expectDataLost(await refusal(store.save(createRequest('t-new'))), epoch, null);
    expect(await admin.keys('*')).toEqual([]);

    // A new process never learned the old epoch: it works on what it finds and starts a new data set.
    const fresh = new RedisStore({ url: server.url, prefix });
    stores.push(fresh);
    expect(await fresh.load('t-1')).toBeNull();
    const other = createRequest('t-other');
    await fresh.save(other);
    const renewed = (await admin.get(k.epoch))!;
    expect(renewed).toMatch(EPOCH);
    expect(renewed).not.toBe(epoch);
    // ...which the old store now sees as a replaced data set.
    expectDataLost(await refusal(store.save(createRequest('t-new'))), epoch, renewed);

    // Accepted: the old store adopts the data set as it is, and nothing lost comes back.
    expect(await store.acceptDataLoss()).toBe(renewed);
    expect(await store.load('t-1')).toBeNull();
    await expect(store.save(third)).rejects.toMatchObject({ code: 'revision_conflict', actual: null });
    await store.save(createRequest('t-new'));
    expect((await store.list()).map((s) => s.taskId).sort()).toEqual(['t-new', 't-other']);
    await store.save(nextRequest(other.envelope));
    expect((await fresh.load('t-other'))!.revision).toBe(2);
    expect(await admin.get(k.epoch)).toBe(renewed);
    admin.disconnect();
  });

  /** A plain client of the test's own server, to look at its keys. */
  function connect(url: string): Redis {
    const client = new Redis(url, { maxRetriesPerRequest: 1, connectTimeout: 1000 });
    client.on('error', () => {});
    return client;
  }
});

describe.skipIf(!redis)('RedisStore epoch marker', () => {
  let client: Redis;
  let prefix: string;
  let k: ReturnType<typeof redisKeys>;
  let store: RedisStore;
  const stores: RedisStore[] = [];

  /** Another store on the prefix, as another process would open it. */
  function another(): RedisStore {
    const made = new RedisStore({ client, prefix });
    stores.push(made);
    return made;
  }

  beforeAll(() => {
    client = redis!.connect();
  });
  afterAll(() => redis?.stop());
  beforeEach(() => {
    prefix = redis!.freshPrefix();
    k = redisKeys(prefix);
    store = another();
  });
  afterEach(async () => {
    for (const made of stores.splice(0)) await made.close();
    await redis!.deleteKeys(prefix);
  });

  describe('creation', () => {
    it('is created once, by the first save or lease that succeeds, and shared by every store on the prefix', async () => {
      expect(await store.load('t-none')).toBeNull();
      expect(await store.list()).toEqual([]);
      await expect(store.save(nextRequest(createRequest('t-ghost').envelope))).rejects.toBeInstanceOf(
        RevisionConflictError,
      );
      expect(await client.exists(k.epoch)).toBe(0);

      await store.leases.acquire('t-1', 10_000);
      const epoch = (await client.get(k.epoch))!;
      expect(epoch).toMatch(EPOCH);
      const other = another();
      await other.save(createRequest('t-2'));
      await store.save(createRequest('t-3'));
      expect(await client.get(k.epoch)).toBe(epoch);
      // Both learned it: a vanished marker is data loss for either.
      await client.del(k.epoch);
      expectDataLost(await refusal(other.save(createRequest('t-4'))), epoch, null);
      expectDataLost(await refusal(store.save(createRequest('t-4'))), epoch, null);
    });

    it('is learned by a store whose first call is a load, and adopted for data saved before markers existed', async () => {
      const first = createRequest('t-old');
      await store.save(first);
      // What a version without markers left behind: the data, no marker.
      await client.del(k.epoch);
      const upgraded = another();
      expect(await upgraded.load('t-old')).toStrictEqual(first.envelope);
      await upgraded.save(nextRequest(first.envelope));
      const epoch = (await client.get(k.epoch))!;
      expect(epoch).toMatch(EPOCH);

      const reader = another();
      expect((await reader.load('t-old'))!.revision).toBe(2);
      await client.set(k.epoch, 'ffffffffffffffff@2020-01-01T00:00:00.000Z');
      expectDataLost(await refusal(reader.load('t-old')), epoch, 'ffffffffffffffff@2020-01-01T00:00:00.000Z');
    });

    it('reports a marker of another Redis type as the store being unusable, naming the key', async () => {
      await store.save(createRequest('t-1'));
      await client.del(k.epoch);
      await client.hset(k.epoch, 'a', 'b');
      const attempts: Promise<unknown>[] = [
        another().save(createRequest('t-2')),
        another().leases.acquire('t-1', 1000),
        another().load('t-1'),
      ];
      for (const attempt of attempts) attempt.catch(() => {});
      for (const attempt of attempts) {
        const error = await refusal(attempt);
        expect(error).toBeInstanceOf(StoreUnavailableError);
        expect(error.message).toContain(k.epoch);
      }
    });

    it('is forgotten by deleteAll on the store that deleted everything', async () => {
      await store.save(createRequest('t-1'));
      const other = another();
      await other.load('t-1');
      await store.deleteAll();
      await store.save(createRequest('t-1'));
      expect((await store.load('t-1'))!.revision).toBe(1);
      // For every other store on the prefix, the data set it knew was replaced.
      await expect(other.load('t-1')).rejects.toBeInstanceOf(StoreDataLostError);
    });
  });

  describe('when the data set was replaced', () => {
    const FOREIGN = '0123456789abcdef@2024-05-01T12:00:00.000Z';
    let lease: Lease;
    let epoch: string;

    beforeEach(async () => {
      await store.save(createRequest('t-1'));
      lease = (await store.leases.acquire('t-1', 10_000))!;
      epoch = (await client.get(k.epoch))!;
      await client.set(k.epoch, FOREIGN);
    });

    it('refuses saves, creates included, leases, loads and listings with "replaced", changing nothing', async () => {
      const before = await client.hgetall(k.task('t-1'));
      const update = nextRequest((await another().load('t-1'))!, { state: 'done', audit: [marker(1)] });
      const attempts = [
        store.save({ ...update, fence: lease.fence }),
        store.save(update),
        store.save(createRequest('t-2')),
        store.leases.renew(lease, 10_000),
        store.leases.acquire('t-3', 10_000),
        store.load('t-1'),
        store.list(),
      ];
      // Each is awaited in turn below; a later one may be refused first.
      for (const attempt of attempts) (attempt as Promise<unknown>).catch(() => {});
      for (const attempt of attempts) {
        const error = await refusal(attempt);
        expectDataLost(error, epoch, FOREIGN);
        expect(error.message).toContain(`the data set under {${prefix}} was replaced`);
      }
      expect(await client.hgetall(k.task('t-1'))).toStrictEqual(before);
      expect(await client.exists(k.task('t-2'), k.lease('t-3'))).toBe(0);
      expect(await client.get(k.epoch)).toBe(FOREIGN);
    });

    it('shows a marker someone else wrote quoted and cut', async () => {
      await client.set(k.epoch, `not ours ${'x'.repeat(100)}`);
      const error = await refusal(store.load('t-1'));
      expect(error.message).toContain(`(epoch ${epoch} expected, "not ours ${'x'.repeat(55)}…" found)`);
    });

    it('lets a store that never learned the old epoch work, and the old one once it accepts the loss', async () => {
      const fresh = another();
      const envelope = (await fresh.load('t-1'))!;
      const lease2 = (await fresh.leases.acquire('t-2', 10_000))!;
      await fresh.save({ ...createRequest('t-2'), fence: lease2.fence });
      expect(await store.acceptDataLoss()).toBe(FOREIGN);
      expect(await store.leases.renew(lease, 10_000)).toBe(true);
      await store.save({ ...nextRequest(envelope), fence: lease.fence });
      expect((await fresh.load('t-1'))!.revision).toBe(2);
      expect(await client.get(k.epoch)).toBe(FOREIGN);
    });

    it('creates a new marker when the loss is accepted with none left', async () => {
      await client.del(k.epoch);
      expectDataLost(await refusal(store.load('t-1')), epoch, null);
      const created = await store.acceptDataLoss();
      expect(created).toMatch(EPOCH);
      expect(created).not.toBe(epoch);
      expect(await client.get(k.epoch)).toBe(created);
      expect(await store.acceptDataLoss()).toBe(created);
      expect((await store.load('t-1'))!.revision).toBe(1);
    });
  });

  describe('a dispatched start once the data set vanished', () => {
    it('is refused with StoreDataLostError, and neither the reservation nor a start job is recorded', async () => {
      const url = new URL(redis!.url);
      const dispatch = bullmqDispatch({
        connection: { host: url.hostname, port: Number(url.port || 6379) },
        queueName: `q-${prefix}`,
      });
      const { orchestrator } = harness({ store, dispatch, expirySweepMs: 0 });
      try {
        // The API process's store has saved before: it knows the data set.
        await store.save(createRequest('t-seed'));
        await orchestrator.start({ principal: SUPPORT, goal: 'first', taskId: 'queued-1' });
        expect((await orchestrator.status('queued-1')).stateValue).toBe('queued');
        const epoch = (await client.get(k.epoch))!;
        expect(epoch).toMatch(EPOCH);
        await redis!.deleteKeys(prefix);

        expectDataLost(
          await refusal(orchestrator.start({ principal: SUPPORT, goal: 'second', taskId: 'queued-2' })),
          epoch,
          null,
        );
        expect(await client.keys(`{${prefix}}*`)).toEqual([]);
        expect(await dispatch.pendingStart('queued-2')).toBeNull();
      } finally {
        await orchestrator.close();
        await dispatch.close();
      }
    });

    it('learns the epoch from its reservation, and creates the marker in a new data set', async () => {
      const url = new URL(redis!.url);
      const dispatch = bullmqDispatch({
        connection: { host: url.hostname, port: Number(url.port || 6379) },
        queueName: `q-${prefix}`,
      });
      const { orchestrator } = harness({ store, dispatch, expirySweepMs: 0 });
      try {
        await orchestrator.start({ principal: SUPPORT, goal: 'first', taskId: 'queued-1' });
        const epoch = (await client.get(k.epoch))!;
        expect(epoch).toMatch(EPOCH);
        await client.set(k.epoch, 'ffffffffffffffff@2020-01-01T00:00:00.000Z');
        expectDataLost(
          await refusal(orchestrator.start({ principal: SUPPORT, goal: 'second', taskId: 'queued-2' })),
          epoch,
          'ffffffffffffffff@2020-01-01T00:00:00.000Z',
        );
        expect(await client.exists(k.inboxSeq('queued-2'))).toBe(0);
      } finally {
        await orchestrator.close();
        await dispatch.close();
      }
    });
  });

  describe('an orchestrator whose data set vanishes while a task runs', () => {
    it('stops the task on its next save without retrying, recreates nothing, and reports the loss until it is accepted', async () => {
      let reached!: () => void;
      const inRead = new Promise<void>((resolve) => (reached = resolve));
      let proceed!: () => void;
      const gate = new Promise<void>((resolve) => (proceed = resolve));
      const gatedRead = defineTool({
        name: 'gated_read',
        description: 'a read that waits for the test',
        effect: 'read',
        scopes: [],
        timeoutMs: 10_000,
        input: z.strictObject({}),
        output: z.strictObject({ ok: z.boolean() }),
        execute: async () => {
          reached();
          await gate;
          return { ok: true, value: { ok: true } };
        },
      });
      let turns = 0;
      const model: AgentModel = {
        name: 'data-loss-script',
        async decide({ turn }) {
          turns += 1;
          return turn === 1 ? reply.call('gated_read', {}, 'call_1') : reply.answer('read');
        },
      };
      const failures: { code: unknown }[] = [];
      const logger: Logger = { warn() {}, error: (fields) => failures.push(fields as { code: unknown }) };
      let saves = 0;
      const counted = new Proxy(store, {
        get(target, name, receiver) {
          if (name === 'save')
            return (request: Parameters<RedisStore['save']>[0]) => ((saves += 1), target.save(request));
          const value = Reflect.get(target, name, receiver) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const orchestrator = createOrchestrator({
        tools: [gatedRead],
        model,
        store: counted,
        limits: { modelTurns: 5, toolCalls: 5 },
        expirySweepMs: 0,
        saveRetries: 3,
        lease: { ttlMs: 10_000 },
        logger,
      });
      try {
        await orchestrator.start({ principal: SUPPORT, goal: 'read once', taskId: 'live-1' });
        await inRead;
        const epoch = (await client.get(k.epoch))!;
        const settled = orchestrator.settled('live-1').then(
          () => null,
          (error: unknown) => error as Error,
        );
        const savesBefore = saves;
        // Everything under the prefix goes, as with FLUSHALL or a restart without persistence.
        await redis!.deleteKeys(prefix);
        proceed();

        const error = await settled;
        expectDataLost(error!, epoch, null);
        expect(saves - savesBefore).toBe(1); // not retried
        await until(() => failures.length > 0);
        expect(failures).toMatchObject([{ code: 'store_data_lost' }]);
        expect(turns).toBe(1);
        expect(await client.keys(`{${prefix}}*`)).toEqual([]);

        expectDataLost(await refusal(orchestrator.status('live-1')), epoch, null);
        expectDataLost(await refusal(orchestrator.recover()), epoch, null);
        expectDataLost(
          await refusal(orchestrator.start({ principal: SUPPORT, goal: 'read once', taskId: 'live-2' })),
          epoch,
          null,
        );
        expect(await client.keys(`{${prefix}}*`)).toEqual([]);

        await store.acceptDataLoss();
        await expect(orchestrator.status('live-1')).rejects.toBeInstanceOf(TaskNotFoundError);
        expect(await orchestrator.recover()).toMatchObject({ resumed: [], busy: [], quarantined: [] });
      } finally {
        await orchestrator.close();
      }
    });
  });
});
