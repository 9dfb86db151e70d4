/**
 * The store's `deleteAll`: every key under the prefix goes, found by SCAN (MATCH on the `{prefix}` hash tag, glob
 * characters escaped) and removed by UNLINK in batches, so a large prefix does not block Redis. For demos and tests
 * that reuse a prefix, instead of a FLUSHALL of a shared server.
 */
import { globEscape } from './redisErasure.js';
import type { Redis } from 'ioredis';
import type { RedisCall } from './redisConnection.js';
import type { RedisKeys } from './redisKeys.js';

/** Deletes every key under `keys.root` and returns how many. */
export function deleteAll(client: Redis, keys: RedisKeys, call: RedisCall): Promise<number> {
  return call('delete of every key under the prefix', async () => {
    let cursor = '0';
    let deleted = 0;
    const match = `${globEscape(keys.root)}:*`;
    do {
      const [next, found] = await client.scan(cursor, 'MATCH', match, 'COUNT', 500);
      cursor = next;
      if (found.length > 0) deleted += await client.unlink(...found);
    } while (cursor !== '0');
    return deleted;
  });
}
