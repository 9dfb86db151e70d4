/** The store contract suite against RedisStore: one shared connection, a fresh key prefix per test. */
import { afterAll, describe } from 'vitest';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { redisRaw } from './support/rawDumps.js';
import { useTestRedis } from './support/redis.js';
import { describeStoreContract } from './support/storeContract.js';

const redis = await useTestRedis();

describe.skipIf(!redis)('RedisStore', () => {
  const client = redis?.connect();
  afterAll(() => redis?.stop());
  describeStoreContract('redis', async (options) => {
    const prefix = redis!.freshPrefix();
    return {
      store: new RedisStore({ client: client!, prefix, ...options }),
      cleanup: async () => void (await redis!.deleteKeys(prefix)),
      raw: redisRaw(client!, prefix),
    };
  });
});
