/** The store contract suite against RedisStore: one shared connection, a fresh key prefix per test. */
import { afterAll, describe, it } from 'vitest';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { useTestRedis } from './support/redis.js';
import { describeStoreContract } from './support/storeContract.js';

const redis = await useTestRedis();

if (redis) {
  const client = redis.connect();
  afterAll(() => redis.stop());
  describeStoreContract('redis', async () => {
    const prefix = redis.freshPrefix();
    return {
      store: new RedisStore({ client, prefix }),
      cleanup: async () => void (await redis.deleteKeys(prefix)),
    };
  });
} else {
  describe.skip('TaskStore contract: redis (no Redis available, see the warning above)', () => {
    it('runs the contract suite', () => {});
  });
}
