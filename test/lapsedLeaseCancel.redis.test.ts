/**
 * A KNOWN GAP, kept as an expected failure (`it.fails`) so it stays reproduced until it is fixed: a cancelled task
 * whose write is still in flight at a process whose lease lapsed.
 *
 * Process A sends a write (its request is under way: the tool's execute is held); the user cancels (deferred while
 * the write runs); A's lease lapses (its key is removed here, as an expiry would) and process B resumes the task. B
 * finds the write interrupted and looks it up by its idempotency key: not found, since A's request has not landed.
 * The chart's rule `wasWriteNotFound and isCancelRequested -> abandonWriteForCancel` ends the task `cancelled`, the
 * write recorded as not executed; then A's request lands. Without the cancel, the same lookup leads to
 * `review_required`, where a person decides (the second test): that is what the cancelled task should do too, or
 * its lookup should wait until the write's own attempt can no longer land (its start plus the tool's timeout).
 *
 * The first test asserts the right outcome and fails today; when the gap is closed, vitest reports it as passing
 * unexpectedly: turn `it.fails` into `it` then.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { redisKeys } from '../src/store/redis/redisKeys.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { defineTool } from '../src/tool.js';
import type { LookupResult, WriteContext } from '../src/toolTypes.js';
import { E17, until } from './support/harness.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();
afterAll(() => redis?.stop());

/** Runs the interleaving; resolves with B's final state and what the notes service holds once A's request landed. */
async function straggler(withCancel: boolean): Promise<{ state: string; landed: string[] }> {
  const prefix = redis!.freshPrefix();
  const admin = redis!.connect();
  const stores = [new RedisStore({ url: redis!.url, prefix }), new RedisStore({ url: redis!.url, prefix })];
  const notes = new Map<string, string>();
  const sent: string[] = [];
  let land!: () => void;
  const inFlight = new Promise<void>((resolve) => (land = resolve));
  const noteTool = (process: string) =>
    defineTool({
      name: 'record_note',
      description: 'Records a note (a write whose server keeps it by idempotency key)',
      effect: 'write',
      scopes: [],
      timeoutMs: 60_000,
      // Not sent again blindly: a "not found" write goes to a reviewer (or, cancelled, is abandoned).
      sameKeyRetrySafe: false,
      confirm: { never: 'a test note, nothing to confirm' },
      input: z.strictObject({ text: z.string() }),
      output: z.strictObject({ id: z.string() }),
      async execute(_args, { idempotencyKey }: WriteContext) {
        sent.push(process);
        // A's request is on the way and lands only when the test says so.
        if (process === 'A') await inFlight;
        notes.set(idempotencyKey, process);
        return { ok: true, value: { id: idempotencyKey } };
      },
      async lookup(key: string): Promise<LookupResult<{ id: string }>> {
        return notes.has(key) ? { found: true, value: { id: key } } : { found: false };
      },
    });
  const [a, b] = stores.map((store, i) =>
    createOrchestrator({
      tools: [noteTool(i === 0 ? 'A' : 'B')],
      model: scriptedModel([reply.call('record_note', { text: 'x' }), reply.answer('done')]),
      store,
      expirySweepMs: 0,
    }),
  );
  try {
    await a!.start({ principal: E17, goal: 'record a note', taskId: 't' });
    await until(() => sent.length === 1);
    if (withCancel) await a!.cancel('t', E17, 'stop');
    await admin.del(redisKeys(prefix).lease('t'));
    await b!.resume('t');
    const final = await b!.settled('t');
    land();
    await until(() => notes.size === 1);
    return { state: final.state, landed: [...notes.values()] };
  } finally {
    land();
    await a!.close();
    await b!.close();
    for (const store of stores) await store.close();
    await redis!.deleteKeys(prefix);
  }
}

describe.skipIf(!redis)('a write still in flight at a process whose lease lapsed', () => {
  it.fails(
    'KNOWN GAP: after a cancel, its "not found" lookup is taken as not executed, and then it lands',
    async () => {
      const { state, landed } = await straggler(true);
      expect(landed).toEqual(['A']);
      // Today: 'cancelled', with the write recorded as not executed although it landed.
      expect(state).toBe('review_required');
    },
  );

  it('without a cancel, the same "not found" goes to a reviewer', async () => {
    const { state, landed } = await straggler(false);
    expect(landed).toEqual(['A']);
    expect(state).toBe('review_required');
  });
});
