/**
 * The recorded transitions through the Redis store (one string per stream message, `redisAuditPacking.ts`): a demo
 * scenario run on Redis reads back the same moves as on the memory store, and replays to its stored state.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { replayAudit } from '../src/audit/replayAudit.js';
import { MemoryStore } from '../src/index.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { scenarios } from '../examples/booking/scenarios.js';
import { useTestRedis } from './support/redis.js';

/** The long scenario's read rounds in these sweeps, which cost the square of a task's length (default 300). */
const SHORT_LONG = 40;

const redis = await useTestRedis();

describe.skipIf(!redis)('recorded transitions on Redis', () => {
  afterAll(() => redis?.stop());

  it.each(['refund', 'lostResponse'] as const)('the %s scenario reads back its moves and replays', async (name) => {
    const prefix = redis!.freshPrefix();
    const store = new RedisStore({ client: redis!.connect(), prefix });
    try {
      const onRedis = await scenarios[name]({ store, longRounds: SHORT_LONG });
      const inMemory = await scenarios[name]({ store: new MemoryStore(), longRounds: SHORT_LONG });
      const read = await store.readJournal(onRedis.status.taskId, 'audit', 0, Number.MAX_SAFE_INTEGER);
      expect(read.map((e) => (e as { moves?: string }).moves)).toEqual(inMemory.audit.map((e) => e.moves));
      expect(read.every((e) => typeof (e as { moves?: unknown }).moves === 'string')).toBe(true);
      const replayed = replayAudit(onRedis.audit);
      expect(replayed).toMatchObject({ state: onRedis.status.stateValue, recorded: true });
      expect(replayed.transitions.length).toBeGreaterThan(10);
    } finally {
      await redis!.deleteKeys(prefix);
    }
  });
});
