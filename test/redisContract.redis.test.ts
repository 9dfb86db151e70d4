/** The store contract suite against RedisStore: one shared connection, a fresh key prefix per test. */
import { afterAll, describe } from 'vitest';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { redisRaw } from './support/rawDumps.js';
import { useTestRedis } from './support/redis.js';
import { describeStoreContract } from './support/storeContract.js';

const redis = await useTestRedis();
afterAll(() => redis?.stop());

describe.skipIf(!redis)('RedisStore', () => {
  const client = redis?.connect();
  describeStoreContract('redis', async (options) => {
    const prefix = redis!.freshPrefix();
    return {
      store: new RedisStore({ client: client!, prefix, ...options }),
      cleanup: async () => void (await redis!.deleteKeys(prefix)),
      raw: redisRaw(client!, prefix),
    };
  });
});

describe.skipIf(!redis)('RedisStore with 4 buckets on one server', () => {
  const client = redis?.connect();
  describeStoreContract('redis, 4 buckets', async (options) => {
    const prefix = redis!.freshPrefix();
    return {
      store: new RedisStore({ client: client!, prefix, buckets: 4, ...options }),
      cleanup: async () => void (await redis!.deleteKeys(prefix)),
      raw: redisRaw(client!, prefix, 4),
    };
  });
});
