/**
 * The store's `deleteAll`: every key under the prefix goes, found by SCAN (MATCH on the `{prefix}` hash tag, glob
 * characters escaped) and removed by UNLINK in batches, so a large prefix does not block Redis. For demos and tests
 * that reuse a prefix, instead of a FLUSHALL of a shared server.
 */
import { globEscape } from './redisErasure.js';
import type { Redis } from 'ioredis';
import { type RedisCall, scanNodes } from './redisConnection.js';
import type { RedisKeys } from './redisKeys.js';

/** Deletes every key under `keys.root` (on every master of a cluster) and returns how many. */
export function deleteAll(client: Redis, keys: RedisKeys, call: RedisCall): Promise<number> {
  return call('delete of every key under the prefix', async () => {
    let deleted = 0;
    const match = `${globEscape(keys.root)}:*`;
    // The keys of one hash tag are on one node: each is found and unlinked where it lives.
    for (const node of scanNodes(client)) {
      let cursor = '0';
      do {
        const [next, found] = await node.scan(cursor, 'MATCH', match, 'COUNT', 500);
        cursor = next;
        if (found.length > 0) deleted += await node.unlink(...found);
      } while (cursor !== '0');
    }
    return deleted;
  });
}
