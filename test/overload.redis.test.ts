/**
 * A store command that timed out because this process's event loop was blocked is reported as overload
 * (`process_overloaded`), never as Redis being down; a Redis that really does not answer still is
 * (`store_unavailable`). Both are StoreUnavailableErrors, so what retries a store blip retries either.
 */
import { spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { ProcessOverloadedError, StoreUnavailableError } from '../src/errors.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { startRedisServer, useTestRedis } from './support/redis.js';

const redis = await useTestRedis();
afterAll(() => redis?.stop());
const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;

/** Blocks the event loop, as a burst of synchronous work does. */
function blockLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe.skipIf(!redis)('a command timeout while the loop is blocked', () => {
  it('is overload, with how long the loop was blocked, not an outage', async () => {
    const prefix = redis!.freshPrefix();
    const store = new RedisStore({ url: redis!.url, prefix, commandTimeoutMs: 200 });
    try {
      await store.list();
      const pending = store.list().then(
        () => null,
        (error: unknown) => error,
      );
      // The command is on the wire (auto-pipelining sends it on the next tick); then the loop is blocked past its
      // timeout: the reply sits unread while the timeout's timer comes due, and fires first.
      await new Promise((resolve) => setImmediate(resolve));
      blockLoop(700);
      const error = await pending;
      expect(error).toBeInstanceOf(ProcessOverloadedError);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(error).toMatchObject({ code: 'process_overloaded' });
      expect((error as ProcessOverloadedError).blockedMs).toBeGreaterThanOrEqual(500);
      expect((error as Error).message).toMatch(/^This process is overloaded: its event loop was blocked for \d+ ms/);
      // Once the loop runs again, the store answers.
      expect(await store.list()).toEqual([]);
    } finally {
      await store.close();
    }
  });
});

describe.skipIf(!hasRedisServer && process.env.CI !== 'true')('a Redis that does not answer', () => {
  it('is still reported as the store being unavailable', async () => {
    const server = await startRedisServer();
    const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    const store = new RedisStore({ url: server.url, prefix: 'overload', commandTimeoutMs: 200 });
    try {
      await store.list();
      // Every client but the admin's waits: the command times out with this process's loop free.
      await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
      const error = await store.list().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(error).not.toBeInstanceOf(ProcessOverloadedError);
      expect(error).toMatchObject({ code: 'store_unavailable' });
    } finally {
      await store.close();
      admin.disconnect();
      await server.stop();
    }
  });
});
