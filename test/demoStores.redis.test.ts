/** The demo's promise on Redis: it only ever deletes keys under a prefix it made itself. */
import { afterAll, describe, expect, it } from 'vitest';
import { DemoDataError, openScenarioStore } from '../examples/booking/demoStores.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();

describe.skipIf(!redis)('the demo Redis stores', () => {
  const client = redis?.connect();
  afterAll(() => redis?.stop());

  it('refuses a prefix holding keys it did not make, and empties one it made', async () => {
    const prefix = redis!.freshPrefix();
    // Restored after: the files of the Redis tier share a worker (vitest.config.ts), so nothing is left set.
    const redisUrl = process.env.REDIS_URL;
    process.env.REDIS_URL = redis!.url;
    try {
      await client!.set(`{${prefix}:normal}:someone-else`, 'mine');
      await expect(openScenarioStore('redis', { dataDir: '', prefix, scenario: 'normal' })).rejects.toThrow(
        DemoDataError,
      );
      expect(await client!.get(`{${prefix}:normal}:someone-else`)).toBe('mine');
      const store = await openScenarioStore('redis', { dataDir: '', prefix, scenario: 'refund' });
      await client!.set(`{${prefix}:refund}:left-by-the-run`, 'x');
      await store.close();
      await (await openScenarioStore('redis', { dataDir: '', prefix, scenario: 'refund' })).close();
      expect(await client!.exists(`{${prefix}:refund}:left-by-the-run`)).toBe(0);
      expect(await client!.exists(`{${prefix}:refund}:demo-marker`)).toBe(1);
    } finally {
      if (redisUrl === undefined) delete process.env.REDIS_URL;
      else process.env.REDIS_URL = redisUrl;
      await redis!.deleteKeys(`${prefix}:normal`);
      await redis!.deleteKeys(`${prefix}:refund`);
    }
  });
});
