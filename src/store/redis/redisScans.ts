/**
 * Scans over a store's keys: every master of a cluster (once its slots are known), each once, with one pattern per
 * layout, so that the cost is one pass over each master's key space however many buckets there are. Used by
 * `deleteAll` (every key under the prefix goes, by UNLINK in batches, so a large prefix does not block Redis; for
 * demos and tests that reuse a prefix, instead of a FLUSHALL of a shared server) and `indexOwners`.
 */
import type { Redis } from 'ioredis';
import type { RedisCall } from './redisConnection.js';
import { scanNodes } from './redisConnection.js';

/** Calls `each` with every batch of keys matching `pattern`, with the node that holds them, until it answers true. */
export async function scanKeys(
  client: Redis,
  pattern: string,
  call: RedisCall,
  each: (node: Redis, keys: string[]) => Promise<boolean | void>,
): Promise<void> {
  for (const node of await call("discovery of the cluster's masters", () => scanNodes(client))) {
    let cursor = '0';
    do {
      const [next, found] = await call('scan of the keys under the prefix', () =>
        node.scan(cursor, 'MATCH', pattern, 'COUNT', 500),
      );
      cursor = next;
      if (found.length > 0 && (await each(node, found)) === true) return;
    } while (cursor !== '0');
  }
}

/** Deletes every key matching `pattern` (on every master) and returns how many. */
export async function deleteMatching(client: Redis, pattern: string, call: RedisCall): Promise<number> {
  let deleted = 0;
  await scanKeys(client, pattern, call, async (node, keys) => {
    // Unlinked where they were found, one hash tag (one slot) per command: a cluster refuses keys of two slots.
    for (const group of byHashTag(keys))
      deleted += await call('delete of the keys under the prefix', () => node.unlink(...group));
  });
  return deleted;
}

/** Keys grouped by their hash tag (the text between the first "{" and the next "}", or the whole key). */
function byHashTag(keys: string[]): string[][] {
  const groups = new Map<string, string[]>();
  for (const key of keys) {
    const open = key.indexOf('{');
    const close = open >= 0 ? key.indexOf('}', open + 1) : -1;
    const tag = close > open + 1 ? key.slice(open + 1, close) : key;
    const group = groups.get(tag);
    if (group) group.push(key);
    else groups.set(tag, [key]);
  }
  return [...groups.values()];
}
