import { afterAll, beforeAll, describe, it } from 'vitest';
import { expectExampleOutput, runExample } from './support/readme.js';
import { type TestRedis, useTestRedis } from './support/redis.js';

let redis: TestRedis | null = null;
beforeAll(async () => {
  redis = await useTestRedis();
});
afterAll(() => redis?.stop());

describe('documented examples on Redis (docs/stores.md, docs/workers.md)', () => {
  it('runs its redis example against the sources, under a fresh prefix', async (context) => {
    if (!redis) return context.skip();
    const prefix = redis.freshPrefix();
    try {
      expectExampleOutput.redis(await runExample('redis', { REDIS_URL: redis.url, AGENT_PREFIX: prefix }));
    } finally {
      await redis.deleteKeys(prefix);
    }
  });

  it('runs its workers example against the sources: an API instance and a worker on one queue', async (context) => {
    if (!redis) return context.skip();
    const prefix = redis.freshPrefix();
    try {
      expectExampleOutput.workers(await runExample('workers', { REDIS_URL: redis.url, AGENT_PREFIX: prefix }));
    } finally {
      await redis.deleteKeys(prefix);
      await deleteQueue(redis, `${prefix}-tasks`);
    }
  });
});

/** BullMQ's keys of one queue (`bull:<name>:*`), which live outside the store's prefix. */
async function deleteQueue(redis: TestRedis, name: string): Promise<void> {
  const client = redis.connect();
  const keys = await client.keys(`bull:${name}:*`);
  if (keys.length > 0) await client.unlink(...keys);
}
