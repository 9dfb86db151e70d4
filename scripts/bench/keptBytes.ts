/**
 * Bytes kept per read round on Redis, alone: the bench's "bytes kept per round" cells (one task, K rounds) without
 * the throughput passes, for checking what a change to the journal costs. `npx tsx scripts/bench/keptBytes.ts
 * [K ...]` (default 10 200 1000) prints one line per K; REDIS_URL as for the bench.
 */
import { randomBytes } from 'node:crypto';
import { DEFAULT_REDIS_URL, createRedisClient } from '../../src/store/redis/redisConnection.js';
import type { RedisLink } from './cell.js';
import { SentCommands } from './measure.js';
import { runProjectOnRedis } from './project.js';

const ks = process.argv.slice(2).map(Number);
const url = process.env.REDIS_URL ?? DEFAULT_REDIS_URL;
const admin = createRedisClient(url);
const client = createRedisClient(url);
const link: RedisLink = { client, admin, sent: new SentCommands(client), ownConnections: 2 };
const runId = `kept-${randomBytes(4).toString('hex')}`;
try {
  for (const [i, k] of (ks.length > 0 ? ks : [10, 200, 1_000]).entries()) {
    const result = await runProjectOnRedis({ k, tasks: 1, repeat: 1 }, link, `${runId}-${i}`);
    const kept = Math.round(result.storedBytesPerRound ?? Number.NaN);
    const memory = Math.round(result.redis?.memoryBytesPerRound ?? Number.NaN);
    console.log(`K=${k}: ${kept} B kept per round (Redis MEMORY USAGE ${memory} B)`);
  }
} finally {
  client.disconnect();
  admin.disconnect();
}
