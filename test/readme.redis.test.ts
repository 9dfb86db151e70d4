import { afterAll, beforeAll, describe, it } from 'vitest';
import { expectExampleOutput, runExample } from './support/readme.js';
import { type TestRedis, useTestRedis } from './support/redis.js';

let redis: TestRedis | null = null;
beforeAll(async () => {
  redis = await useTestRedis();
});
afterAll(() => redis?.stop());

describe('README on Redis', () => {
  it('runs its redis example against the sources, under a fresh prefix', async (context) => {
    if (!redis) return context.skip();
    const prefix = redis.freshPrefix();
    try {
      expectExampleOutput.redis(await runExample('redis', { REDIS_URL: redis.url, AGENT_PREFIX: prefix }));
    } finally {
      await redis.deleteKeys(prefix);
    }
  });

});
