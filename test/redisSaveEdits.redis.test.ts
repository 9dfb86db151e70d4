/**
 * A RedisStore's save sends the envelope as edits of the one it saved last (redisEnvelopeText.ts, lua/save.lua):
 * what a reader gets back must be exactly what was saved, whoever saved before (another store, the previous
 * version's script, a text changed behind the store's back), and the state indexes must follow the task.
 */
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../src/testing/manualClock.js';
import type { TaskEnvelope } from '../src/store/envelope.js';
import { packAudit } from '../src/store/redis/redisAuditPacking.js';
import { redisKeys } from '../src/store/redis/redisKeys.js';
import { storeScriptCommand } from '../src/store/redis/redisScripts.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { TASK_STATES } from '../src/store/summary.js';
import type { SaveRequest } from '../src/store/taskStore.js';
import { T0, createRequest, jsonCopy, marker, nextRequest } from './support/envelopes.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();
/** The save script of the previous version (0.4: the whole envelope, every state index): the fixture's writer. */
const SAVE_BEFORE = readFileSync(new URL('./fixtures/redis/save-0.4.lua', import.meta.url), 'utf8');

/** A save as the previous version made it. */
async function saveAsBefore(client: Redis, prefix: string, request: SaveRequest): Promise<unknown> {
  const k = redisKeys(prefix);
  const { envelope, expectedRevision, append } = request;
  const { taskId, summary } = envelope;
  const keys = [
    k.task(taskId),
    k.audit(taskId),
    k.transcript(taskId),
    k.fence(taskId),
    k.lease(taskId),
    k.updated,
    k.wake,
    k.tombstone(taskId),
    k.user(summary),
    k.epoch,
    ...TASK_STATES.map((state) => k.state(state)),
  ];
  const args = [
    taskId,
    expectedRevision,
    envelope.revision,
    '',
    JSON.stringify(envelope),
    JSON.stringify(summary),
    summary.state,
    summary.updatedAt,
    summary.wakeAt ?? '',
    envelope.journal.audit - append.audit.length,
    envelope.journal.transcript - append.transcript.length,
    append.audit.length,
    append.transcript.length,
    packAudit(append.audit),
    '',
    '',
    TASK_STATES.join(','),
    ...append.transcript.map((entry) => JSON.stringify(entry)),
    k.live(taskId),
  ];
  return client.eval(SAVE_BEFORE, keys.length, ...keys, ...args);
}

describe.skipIf(!redis)('RedisStore saves as edits', () => {
  let client: Redis;
  let prefix: string;
  let store: RedisStore;
  let other: RedisStore;

  beforeAll(() => {
    client = redis!.connect();
  });
  afterAll(() => redis?.stop());
  beforeEach(() => {
    prefix = redis!.freshPrefix();
    store = new RedisStore({ client, prefix, clock: new ManualClock(T0), envelopeEdits: true });
    other = new RedisStore({ client, prefix, clock: new ManualClock(T0), envelopeEdits: true });
  });
  afterEach(async () => {
    await store.close();
    await other.close();
    await redis!.deleteKeys(prefix);
  });

  /** What a reader gets back is what was saved: the envelope, its summary in `list`, and the state indexes. */
  async function expectStored(envelope: TaskEnvelope) {
    const k = redisKeys(prefix);
    expect(await store.load(envelope.taskId)).toEqual(jsonCopy(envelope));
    expect(await other.load(envelope.taskId)).toEqual(jsonCopy(envelope));
    expect(await client.hget(k.task(envelope.taskId), 'envelope')).toBe(JSON.stringify(envelope));
    expect(await client.hget(k.task(envelope.taskId), 'summary')).toBe(JSON.stringify(envelope.summary));
    for (const state of TASK_STATES) {
      const score = await client.zscore(k.state(state), envelope.taskId);
      expect([state, score !== null]).toEqual([state, state === envelope.summary.state]);
    }
  }

  /** The next save, with a goal of multi-byte characters that changes (so that byte offsets matter). */
  function next(previous: TaskEnvelope, n: number, state?: NonNullable<Parameters<typeof nextRequest>[1]>['state']) {
    const request = nextRequest(previous, { state, audit: [marker(n)], transcript: [{ n, text: 'line\nbreak' }] });
    (request.envelope.snapshot.context as { goal: string }).goal = `réservez 🎉 ${'é'.repeat(n)}`;
    return request;
  }

  /** The envelope argument of each save script call (whole or edits), from here on. */
  function envelopeArgs(): string[] {
    type Saving = Record<string, (...args: unknown[]) => unknown>;
    const sent: string[] = [];
    // The command the store registered the save script under (its name ends with the script's digest).
    const command = storeScriptCommand('taskStoreSaveEdits');
    const original = (client as unknown as Saving)[command]!;
    vi.spyOn(client as unknown as Saving, command).mockImplementation((...args: unknown[]) => {
      // After the 12 keys: task id, numbers, fence, then the envelope.
      sent.push(String(args[15]));
      return original.apply(client, args);
    });
    return sent;
  }

  it('keeps every save exactly, in a run of saves that move the task between states', async () => {
    const sent = envelopeArgs();
    let request = createRequest('t1', { state: 'running' });
    await store.save(request);
    await expectStored(request.envelope);
    expect(sent).toEqual([JSON.stringify(request.envelope)]);
    const states = ['running', 'waiting_for_user', 'waiting_for_user', 'running', 'answered', 'running'] as const;
    for (let n = 1; n <= states.length; n++) {
      request = next(request.envelope, n, states[n - 1]);
      await store.save(request);
      await expectStored(request.envelope);
      // Sent as edits, far shorter than the envelope, when the task stays in its state (these test envelopes change
      // much of the snapshot with the state).
      expect(sent).toHaveLength(n + 1);
      if (n === 1 || n === 3) expect(sent[n]!.length).toBeLessThan(JSON.stringify(request.envelope).length / 4);
    }
    vi.restoreAllMocks();
    const transcript = await store.readJournal('t1', 'transcript');
    expect(transcript.slice(-6)).toEqual([1, 2, 3, 4, 5, 6].map((n) => ({ n, text: 'line\nbreak' })));
    expect((await store.readJournal('t1', 'audit')).slice(-6)).toEqual([1, 2, 3, 4, 5, 6].map((n) => marker(n)));
  });

  it('goes on from a task the previous version saved, and that version can go on from it', async () => {
    let request = createRequest('t1', { state: 'running' });
    expect((await saveAsBefore(client, prefix, request)) as unknown[]).toContain('1');
    request = next(request.envelope, 1, 'waiting_for_user');
    await saveAsBefore(client, prefix, request);
    await expectStored(request.envelope);
    // This version, from what the previous one saved: a state change (the index of the state it leaves found).
    request = next(request.envelope, 2, 'running');
    await store.save(request);
    await expectStored(request.envelope);
    request = next(request.envelope, 3);
    await store.save(request);
    await expectStored(request.envelope);
    // The previous version again, then this one (whose last save is no longer the stored one).
    request = next(request.envelope, 4, 'answered');
    expect((await saveAsBefore(client, prefix, request)) as unknown[]).toContain('5');
    await expectStored(request.envelope);
    request = next(request.envelope, 5, 'running');
    await store.save(request);
    await expectStored(request.envelope);
    expect((await store.readJournal('t1', 'audit')).slice(-5)).toEqual([1, 2, 3, 4, 5].map((n) => marker(n)));
  });

  it('sends the whole envelope when the stored one is not its last save, and finds the state it leaves', async () => {
    let request = createRequest('t1', { state: 'running' });
    await store.save(request);
    request = next(request.envelope, 1);
    await store.save(request);
    // Another store saves (another state); then this one, whose guess of the state is stale.
    request = next(request.envelope, 2, 'waiting_for_user');
    await other.save(request);
    request = next(request.envelope, 3, 'running');
    await store.save(request);
    await expectStored(request.envelope);
    // The stored text changed behind the store's back (same etag): edits of it are refused, the whole is sent.
    const k = redisKeys(prefix);
    const stored = (await client.hget(k.task('t1'), 'envelope'))!;
    await client.hset(k.task('t1'), 'envelope', stored.replace('"revision":4', '"revision": 4'));
    const sent = envelopeArgs();
    request = next(request.envelope, 4);
    await store.save(request);
    await expectStored(request.envelope);
    // Edits first, refused; then the whole.
    expect(sent).toHaveLength(2);
    expect(sent[1]).toBe(JSON.stringify(request.envelope));
    await client.hset(k.task('t1'), 'etag', 'someone-else:5');
    request = next(request.envelope, 5);
    await store.save(request);
    await expectStored(request.envelope);
    expect(sent).toHaveLength(4);
    expect(sent[3]).toBe(JSON.stringify(request.envelope));
    vi.restoreAllMocks();
  });

  it('refuses a save whose expected revision is stale, edits or not, and leaves the task as it was', async () => {
    let request = createRequest('t1', { state: 'running' });
    await store.save(request);
    request = next(request.envelope, 1);
    await store.save(request);
    const stale = next(request.envelope, 2);
    await other.save(next(request.envelope, 2, 'waiting_for_user'));
    const kept = await store.load('t1');
    await expect(store.save(stale)).rejects.toMatchObject({ code: 'revision_conflict' });
    expect(await store.load('t1')).toEqual(kept);
  });
});
