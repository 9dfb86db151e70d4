/**
 * Everything a store holds, as text, for the erasure contract's byte-level checks: every map entry of a
 * MemoryStore (reaching into its private maps, as `rawRows` does), every file and directory of a FileStore, every
 * key under a RedisStore's prefix with its whole value.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Redis } from 'ioredis';
import { taskDirectoryName } from '../../src/store/file/fileStore.js';
import type { FileStore } from '../../src/store/file/fileStore.js';
import type { MemoryStore } from '../../src/store/memoryStore.js';
import { redisBucketKeys } from '../../src/store/redis/redisKeys.js';
import { bucketOf } from '../../src/store/redis/redisLayout.js';
import type { RawAccess, RawEntry } from './erasureContract.js';

export function memoryRaw(store: MemoryStore): RawAccess {
  return {
    async dump() {
      const entries: RawEntry[] = [];
      for (const [field, value] of Object.entries(store)) {
        if (!(value instanceof Map)) continue;
        for (const [key, item] of value)
          entries.push({ location: `${field}:${String(key)}`, text: JSON.stringify(item) });
      }
      return entries;
    },
    tombstoneLocations: (taskId) => [`tombstones:${taskId}`],
  };
}

export function fileRaw(store: FileStore): RawAccess {
  return {
    async dump() {
      let found;
      try {
        found = await readdir(store.directory, { recursive: true, withFileTypes: true });
      } catch {
        return [];
      }
      const entries: RawEntry[] = [];
      for (const entry of found) {
        const path = join(entry.parentPath, entry.name);
        const location = relative(store.directory, path);
        entries.push({ location, text: entry.isFile() ? await readFile(path, 'utf8') : '' });
      }
      return entries;
    },
    tombstoneLocations: (taskId) => [taskDirectoryName(taskId), join(taskDirectoryName(taskId), 'envelope.json')],
  };
}

/**
 * Every key of a RedisStore's prefix, its buckets' included (`{prefix}:…` and `{prefix{<n>}:…`), found on `nodes`
 * (the server, or every master of a cluster).
 */
export function redisRaw(nodes: Redis | Redis[], prefix: string, buckets = 1): RawAccess {
  const servers = Array.isArray(nodes) ? nodes : [nodes];
  const keysOf = (taskId: string) => redisBucketKeys(prefix, buckets === 1 ? 0 : bucketOf(taskId, buckets), buckets);
  return {
    async dump() {
      const entries: RawEntry[] = [];
      for (const client of servers) {
        let cursor = '0';
        do {
          const [next, found] = await client.scan(cursor, 'MATCH', `{${prefix}[}{]*`, 'COUNT', 500);
          cursor = next;
          for (const key of found) entries.push({ location: key, text: JSON.stringify(await valueOf(client, key)) });
        } while (cursor !== '0');
      }
      // SCAN's order is the server's hash table's, which a write elsewhere may reshuffle: dumps compare by key.
      return entries.sort((a, b) => (a.location < b.location ? -1 : a.location > b.location ? 1 : 0));
    },
    tombstoneLocations: (taskId) => [keysOf(taskId).tombstone(taskId), keysOf(taskId).erased],
  };
}

async function valueOf(client: Redis, key: string): Promise<unknown> {
  switch (await client.type(key)) {
    case 'string':
      return client.get(key);
    case 'hash':
      return client.hgetall(key);
    case 'list':
      return client.lrange(key, '0', '-1');
    case 'set':
      return client.smembers(key);
    case 'zset':
      return client.zrange(key, '0', '-1', 'WITHSCORES');
    case 'stream':
      return client.xrange(key, '-', '+');
    default:
      return null;
  }
}
