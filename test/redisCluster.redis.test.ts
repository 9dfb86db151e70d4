/**
 * RedisStore on a 3-master Redis Cluster that this test creates (`redis-server --cluster-enabled yes` on three free
 * ports, joined by `redis-cli --cluster create`; stopped by pid). The store contract suite passes on it with 16
 * buckets; tasks' keys and script calls land on every master (64 buckets), none holding more than half the keys; scans and
 * `deleteAll` cover every master; the layout is recorded and a store with another number of buckets is refused;
 * and dispatch on BullMQ runs tasks through a worker on the cluster.
 */
import { spawnSync } from 'node:child_process';
import { Cluster } from 'ioredis';
import { StoreUnavailableError } from '../src/errors.js';
import { freePort } from './support/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bullmqDispatch } from '../src/dispatch/bullmqDispatch.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { redisRaw } from './support/rawDumps.js';
import { type TestCluster, startRedisCluster } from './support/redisCluster.js';
import { describeStoreContract } from './support/storeContract.js';
import { scaled } from './support/timeScale.js';

const hasRedisServer =
  spawnSync('redis-server', ['--version']).status === 0 && spawnSync('redis-cli', ['--version']).status === 0;
const cluster: TestCluster | null = hasRedisServer || process.env.CI === 'true' ? await startRedisCluster(3) : null;
let prefixes = 0;
const freshPrefix = () => `cluster-${process.pid}-${++prefixes}`;

describe.skipIf(!cluster)('RedisStore on a 3-master Redis Cluster', () => {
  let client: Cluster;
  beforeAll(() => {
    client = cluster!.connect();
  });
  afterAll(() => cluster?.stop());

  describeStoreContract('redis cluster, 16 buckets', async (options) => {
    const prefix = freshPrefix();
    const store = new RedisStore({ client, prefix, buckets: 16, ...options });
    return {
      store,
      cleanup: async () => void (await new RedisStore({ client, prefix, buckets: 16 }).deleteAll()),
      raw: redisRaw(cluster!.masters(), prefix, 16),
    };
  });

  it('spreads tasks over every master: keys and script calls on each, none with more than half the keys', async () => {
    // A fixed prefix on a fresh cluster: the same slots every run. 64 buckets: about 21 per master.
    const prefix = 'spread';
    const masters = cluster!.masters();
    const scriptsBefore = await Promise.all(masters.map(scriptCalls));
    const store = new RedisStore({ client, prefix, buckets: 64 });
    const orchestrator = createOrchestrator({
      tools: [],
      model: scriptedModel([reply.answer('ok')]),
      store,
      expirySweepMs: 0,
      // 300 starts at once, on purpose: the burst cap (200 by default) is not what this test is about.
      capacity: { maxStartingTasks: 400 },
    });
    const principal = { userId: 'u', tenantId: 't', scopes: [] };
    await Promise.all(
      Array.from({ length: 300 }, (_, i) => orchestrator.run({ principal, goal: `goal ${i}`, taskId: `c-${i}` })),
    );
    const keys = await Promise.all(masters.map((node) => countKeys(node, prefix)));
    const scripts = (await Promise.all(masters.map(scriptCalls))).map((n, i) => n - scriptsBefore[i]!);
    const total = keys.reduce((a, b) => a + b, 0);
    console.log(`keys per master ${keys.join('/')}, script calls per master ${scripts.join('/')}`);
    for (const n of keys) expect(n).toBeGreaterThan(0);
    for (const n of keys) expect(n / total).toBeLessThanOrEqual(0.5);
    for (const n of scripts) expect(n).toBeGreaterThan(0);
    expect((await orchestrator.list({ states: ['answered'] })).length).toBe(300);
    expect((await store.list({ limit: 5 })).map((s) => s.taskId)).toHaveLength(5);
    await orchestrator.close();
    expect(await store.deleteAll()).toBeGreaterThan(300);
    expect((await Promise.all(masters.map((node) => countKeys(node, prefix)))).every((n) => n === 0)).toBe(true);
    await store.close();
  });

  it('records its number of buckets; a store opened with another is refused, naming both', async () => {
    const prefix = freshPrefix();
    const store = new RedisStore({ client, prefix, buckets: 16 });
    const orchestrator = createOrchestrator({
      tools: [],
      model: scriptedModel([reply.answer('ok')]),
      store,
      expirySweepMs: 0,
    });
    await orchestrator.run({ principal: { userId: 'u', tenantId: 't', scopes: [] }, goal: 'x', taskId: 'layout-1' });
    await orchestrator.close();
    for (const buckets of [1, 8]) {
      const other = new RedisStore({ client, prefix, buckets });
      await expect(other.load('layout-1')).rejects.toMatchObject({
        code: 'store_layout_mismatch',
        message: expect.stringContaining(`over 16 bucket(s), and this store was opened with buckets: ${buckets}`),
      });
    }
    expect(await store.load('layout-1')).toMatchObject({ taskId: 'layout-1' });
    await store.deleteAll();
  });

  it(
    'drives tasks dispatched by BullMQ on the cluster (queue prefix with a hash tag)',
    async () => {
      const prefix = freshPrefix();
      const store = new RedisStore({ client, prefix, buckets: 16 });
      const connection = cluster!.connect({ forBullmq: true });
      const dispatch = bullmqDispatch({ connection, prefix: '{bull}', queueName: `q-${prefix}` });
      const orchestrator = createOrchestrator({
        tools: [],
        model: scriptedModel([reply.ask('which?'), reply.answer('done')]),
        store,
        dispatch,
        expirySweepMs: 0,
      });
      orchestrator.createWorker({ concurrency: 5 });
      const principal = { userId: 'u', tenantId: 't', scopes: [] };
      await Promise.all(
        Array.from({ length: 20 }, (_, i) => orchestrator.start({ principal, goal: `g${i}`, taskId: `q-${i}` })),
      );
      for (let i = 0; i < 20; i++)
        expect((await orchestrator.settled(`q-${i}`, { timeoutMs: scaled(20_000) })).state).toBe('waiting_for_user');
      for (let i = 0; i < 20; i++)
        expect((await orchestrator.answer(`q-${i}`, principal, 'this one')).accepted).toBe(true);
      for (let i = 0; i < 20; i++)
        expect((await orchestrator.settled(`q-${i}`, { timeoutMs: scaled(20_000) })).state).toBe('answered');
      await orchestrator.close();
      await dispatch.close();
      await store.deleteAll();
    },
    scaled(60_000),
  );
});

describe('RedisStore on a Redis Cluster that cannot be reached', () => {
  it("names the cluster's nodes, not 127.0.0.1:6379, in its errors", async () => {
    const port = await freePort();
    const client = new Cluster([{ host: '127.0.0.1', port }], {
      enableOfflineQueue: false,
      clusterRetryStrategy: () => null,
      redisOptions: { connectTimeout: 200 },
    });
    client.on('error', () => {});
    const store = new RedisStore({ client, prefix: 'nowhere', buckets: 4 });
    try {
      const error = await store.load('t-1').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as Error).message).toContain(`the Redis Cluster of 127.0.0.1:${port}`);
      expect((error as Error).message).not.toContain('6379');
    } finally {
      client.disconnect();
    }
  });
});

async function countKeys(node: import('ioredis').Redis, prefix: string): Promise<number> {
  let cursor = '0';
  let count = 0;
  do {
    const [next, found] = await node.scan(cursor, 'MATCH', `{${prefix}[}{]*`, 'COUNT', 500);
    cursor = next;
    count += found.length;
  } while (cursor !== '0');
  return count;
}

/** Script calls a node ran so far (EVALSHA and EVAL). */
async function scriptCalls(node: import('ioredis').Redis): Promise<number> {
  const stats = String(await node.info('commandstats'));
  let calls = 0;
  for (const match of stats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) calls += Number(match[1]);
  return calls;
}
