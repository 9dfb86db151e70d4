/**
 * The behaviour every TaskStore must have, as one suite each store runs (memory, file, redis...). It uses only
 * the TaskStore interface; lease tests run only for stores that have `leases`.
 *
 * Assumed from the port: saves without `fence` are accepted (it is optional), and a store stores envelopes of
 * versions it cannot read (a newer build may have written them) and refuses them on load.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentError, RevisionConflictError, TaskExistsError, UnsupportedVersionError } from '../../src/errors.js';
import type { TaskEnvelope } from '../../src/store/envelope.js';
import type { TaskStore } from '../../src/store/taskStore.js';
import { T0, createRequest, jsonCopy, marker, nextRequest } from './envelopes.js';
import { type StoreFactory, describeErasureContract } from './erasureContract.js';
import { describeLeaseContract } from './leaseContract.js';
import { describeMandateContract } from './mandateContract.js';

export type { MadeStore, RawAccess, RawEntry, StoreFactory } from './erasureContract.js';

/** What a store holds for a task, to check a refused save changed nothing. */
export async function storedState(store: TaskStore, taskId: string) {
  return {
    envelope: await store.load(taskId),
    audit: await store.readJournal(taskId, 'audit'),
    transcript: await store.readJournal(taskId, 'transcript'),
  };
}

/** Creates a task and returns its envelope. */
export async function createTask(store: TaskStore, taskId: string, options: Parameters<typeof createRequest>[1] = {}) {
  const request = createRequest(taskId, options);
  await store.save(request);
  return request.envelope;
}

/** Saves the next revision after `previous` and returns it. */
export async function advance(
  store: TaskStore,
  previous: TaskEnvelope,
  options: Parameters<typeof nextRequest>[1] = {},
) {
  const request = nextRequest(previous, options);
  await store.save(request);
  return request.envelope;
}

/** Registers the contract suite for one store; `makeStore` gives a fresh, empty store per test. */
export function describeStoreContract(name: string, makeStore: StoreFactory): void {
  describe(`TaskStore contract: ${name}`, () => {
    let store: TaskStore;
    let cleanup: () => Promise<void>;

    beforeEach(async () => {
      ({ store, cleanup } = await makeStore());
    });
    afterEach(async () => {
      await store.close();
      await cleanup();
    });

    describe('save and load', () => {
      it('round-trips a created envelope and its journals exactly', async () => {
        const request = createRequest('t-round');
        await store.save(request);
        expect(await store.load('t-round')).toStrictEqual(request.envelope);
        expect(await store.readJournal('t-round', 'audit')).toStrictEqual(request.append.audit);
        expect(await store.readJournal('t-round', 'transcript')).toStrictEqual(request.append.transcript);
        expect(request.append.audit.length).toBeGreaterThan(0);
      });

      it('returns null and empty journals for a task that does not exist', async () => {
        await createTask(store, 't-other');
        expect(await store.load('t-missing')).toBeNull();
        expect(await store.readJournal('t-missing', 'audit')).toEqual([]);
        expect(await store.quarantined('t-missing')).toBeNull();
      });

      it('returns the latest revision after several saves', async () => {
        const first = await createTask(store, 't-latest');
        const second = await advance(store, first, { state: 'waiting_for_user' });
        const third = await advance(store, second, { state: 'running' });
        expect(await store.load('t-latest')).toStrictEqual(third);
      });

      it('keeps what it stored apart from the objects it was given and gives out', async () => {
        const request = createRequest('t-copy');
        const original = jsonCopy(request.envelope);
        await store.save(request);
        request.envelope.summary.state = 'failed';
        request.envelope.snapshot.context.goal = 'mutated after save';
        (request.append.audit[0] as Record<string, unknown>).kind = 'mutated';
        const loaded = (await store.load('t-copy'))!;
        loaded.snapshot.context.goal = 'mutated after load';
        const [listed] = await store.list();
        listed!.state = 'cancelled';
        expect(await store.load('t-copy')).toStrictEqual(original);
        expect((await store.list())[0]).toStrictEqual(original.summary);
        expect((await store.readJournal('t-copy', 'audit'))[0]).not.toHaveProperty('kind', 'mutated');
      });

      it.each([
        ['a slash', 'tenant/a/task'],
        ['dot segments', '../../etc/passwd'],
        ['a lone dot-dot', '..'],
        ['unicode', 'tâche-日本-🚀'],
        ['spaces and symbols', ' a:b*c?d|e "quoted" '],
      ])('stores a task id with %s under exactly that id', async (_label, taskId) => {
        const envelope = await createTask(store, taskId);
        await createTask(store, `${taskId}-sibling`);
        expect(await store.load(taskId)).toStrictEqual(envelope);
        expect((await store.list()).map((s) => s.taskId).sort()).toEqual([taskId, `${taskId}-sibling`].sort());
      });

      it('keeps ids that differ only in case apart', async () => {
        const upper = await createTask(store, 'Task-A', { input: { goal: 'upper' } });
        const lower = await createTask(store, 'task-a', { input: { goal: 'lower' } });
        expect(await store.load('Task-A')).toStrictEqual(upper);
        expect(await store.load('task-a')).toStrictEqual(lower);
      });

      it('gives back values as JSON carries them: unicode, nesting, undefined dropped', async () => {
        const goal = 'Réserver 会議室 🚀 "quoted" \\ back\nslash \u2028 line sep \ud83d\ude00';
        const nested = { a: [1, 2.5, -0.125, { b: { c: [null, true, 'x'] } }], deep: { d: { e: { f: 'é' } } } };
        const entry = { ...marker(1), nested, goal, dropped: undefined, list: [undefined, 1] };
        const request = createRequest('t-json', { input: { goal } });
        request.append.audit.push(entry);
        request.envelope.journal.audit += 1;
        await store.save(request);
        expect((await store.load('t-json'))!.snapshot.context.goal).toBe(goal);
        const audit = await store.readJournal('t-json', 'audit');
        expect(audit.at(-1)).toStrictEqual({ ...marker(1), nested, goal, list: [null, 1] });
      });
    });

    describe('compare-and-set', () => {
      it('refuses to create a task that exists with TaskExistsError and keeps the first', async () => {
        await createTask(store, 't-exists');
        const before = await storedState(store, 't-exists');
        await expect(store.save(createRequest('t-exists', { state: 'done' }))).rejects.toBeInstanceOf(TaskExistsError);
        expect(await storedState(store, 't-exists')).toStrictEqual(before);
      });

      it('refuses a save from a stale revision with RevisionConflictError and changes nothing', async () => {
        const first = await createTask(store, 't-stale');
        await advance(store, first, { audit: [marker(1)], transcript: [marker(2)] });
        const before = await storedState(store, 't-stale');
        const stale = nextRequest(first, { state: 'done', audit: [marker(3)], transcript: [marker(4)] });
        const error = await store.save(stale).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(RevisionConflictError);
        expect(error).toMatchObject({ expected: 1, actual: 2 });
        expect(await storedState(store, 't-stale')).toStrictEqual(before);
      });

      it('refuses a save from a revision the task has not reached', async () => {
        const first = await createTask(store, 't-ahead');
        const ahead = nextRequest({ ...first, revision: 4, summary: { ...first.summary, revision: 4 } });
        await expect(store.save(ahead)).rejects.toBeInstanceOf(RevisionConflictError);
        expect(await store.load('t-ahead')).toStrictEqual(first);
      });

      it('refuses an update of a task that does not exist', async () => {
        const first = createRequest('t-ghost').envelope;
        const error = await store.save(nextRequest(first)).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(RevisionConflictError);
        expect(error).toMatchObject({ actual: null });
        expect(await store.load('t-ghost')).toBeNull();
      });

      it('lets exactly one of several concurrent saves from the same revision win', async () => {
        const first = await createTask(store, 't-race');
        const requests = [1, 2, 3, 4, 5].map((n) => nextRequest(first, { updatedAt: T0 + n, audit: [marker(n)] }));
        const results = await Promise.allSettled(requests.map((r) => store.save(r)));
        const winners = results.flatMap((r, i) => (r.status === 'fulfilled' ? [requests[i]!] : []));
        expect(winners).toHaveLength(1);
        for (const result of results) {
          if (result.status === 'rejected') expect(result.reason).toBeInstanceOf(RevisionConflictError);
        }
        expect(await store.load('t-race')).toStrictEqual(winners[0]!.envelope);
        expect((await store.readJournal('t-race', 'audit')).slice(first.journal.audit)).toStrictEqual(
          winners[0]!.append.audit,
        );
      });

      it('lets exactly one of two concurrent creates win', async () => {
        const results = await Promise.allSettled([
          store.save(createRequest('t-twin')),
          store.save(createRequest('t-twin')),
        ]);
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        expect(results.find((r) => r.status === 'rejected')).toMatchObject({ reason: expect.any(TaskExistsError) });
      });

      it('refuses with AgentError invalid_save a revision that is not expectedRevision + 1', async () => {
        const request = createRequest('t-invalid');
        const error = await store.save({ ...request, expectedRevision: 1 }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(AgentError);
        expect(error).toMatchObject({ code: 'invalid_save' });
        expect(await store.load('t-invalid')).toBeNull();
      });

      it('refuses with invalid_save a summary that does not match the envelope', async () => {
        const request = createRequest('t-summary');
        request.envelope.summary.revision = 7;
        await expect(store.save(request)).rejects.toMatchObject({ code: 'invalid_save' });
        expect(await store.load('t-summary')).toBeNull();
      });

      it('refuses journal lengths that do not count exactly the appended entries', async () => {
        const first = await createTask(store, 't-count');
        const before = await storedState(store, 't-count');
        const request = nextRequest(first, { audit: [marker(1), marker(2)] });
        request.envelope.journal.audit -= 1;
        await expect(store.save(request)).rejects.toBeInstanceOf(RevisionConflictError);
        expect(await storedState(store, 't-count')).toStrictEqual(before);
      });
    });

    describe('journals', () => {
      it('appends entries in order across saves and reads ranges [from, to)', async () => {
        let envelope = await createTask(store, 't-journal');
        const base = envelope.journal.audit;
        envelope = await advance(store, envelope, { audit: [marker(0), marker(1)] });
        envelope = await advance(store, envelope, { audit: [], transcript: [marker(100)] });
        await advance(store, envelope, { audit: [marker(2), marker(3), marker(4)] });
        const all = await store.readJournal('t-journal', 'audit');
        expect(all).toHaveLength(base + 5);
        expect(all.slice(base)).toStrictEqual([0, 1, 2, 3, 4].map((n) => marker(n)));
        expect(await store.readJournal('t-journal', 'audit', base + 1, base + 3)).toStrictEqual([marker(1), marker(2)]);
        expect(await store.readJournal('t-journal', 'audit', base + 3)).toStrictEqual([marker(3), marker(4)]);
        expect(await store.readJournal('t-journal', 'audit', base + 4, base + 99)).toStrictEqual([marker(4)]);
        expect(await store.readJournal('t-journal', 'audit', base + 5)).toEqual([]);
        expect((await store.readJournal('t-journal', 'transcript')).at(-1)).toStrictEqual(marker(100));
      });

      it('never returns more entries than the envelope commits', async () => {
        const first = await createTask(store, 't-committed');
        const refused = nextRequest(
          { ...first, revision: 5, summary: { ...first.summary, revision: 5 } },
          {
            audit: [marker(1)],
            transcript: [marker(2)],
          },
        );
        await expect(store.save(refused)).rejects.toBeInstanceOf(RevisionConflictError);
        const envelope = (await store.load('t-committed'))!;
        for (const stream of ['audit', 'transcript'] as const) {
          expect(await store.readJournal('t-committed', stream, 0, 1_000)).toHaveLength(envelope.journal[stream]);
        }
      });
    });

    describe('list', () => {
      async function seed() {
        await createTask(store, 't-run-old', { updatedAt: T0 + 1000 });
        await createTask(store, 't-wait-soon', {
          state: 'waiting_for_confirmation',
          updatedAt: T0 + 3000,
          wakeAt: T0 + 10_000,
        });
        await createTask(store, 't-wait-late', {
          state: 'waiting_for_confirmation',
          updatedAt: T0 + 2000,
          wakeAt: T0 + 50_000,
        });
        await createTask(store, 't-done', { state: 'done', updatedAt: T0 + 4000 });
        const next = await createTask(store, 't-run-new', { updatedAt: T0 + 500 });
        await advance(store, next, { updatedAt: T0 + 5000 });
      }

      it('lists every task, most recently updated first, with its latest summary', async () => {
        await seed();
        const listed = await store.list();
        expect(listed.map((s) => s.taskId)).toEqual(['t-run-new', 't-done', 't-wait-soon', 't-wait-late', 't-run-old']);
        expect(listed[0]).toStrictEqual((await store.load('t-run-new'))!.summary);
        expect(listed[0]!.revision).toBe(2);
      });

      it('filters by state', async () => {
        await seed();
        expect((await store.list({ states: ['running'] })).map((s) => s.taskId)).toEqual(['t-run-new', 't-run-old']);
        expect((await store.list({ states: ['done', 'waiting_for_confirmation'] })).map((s) => s.taskId)).toEqual([
          't-done',
          't-wait-soon',
          't-wait-late',
        ]);
        expect(await store.list({ states: ['cancelled'] })).toEqual([]);
      });

      it('filters by dueBefore, inclusive, only tasks that have a wake time', async () => {
        await seed();
        expect((await store.list({ dueBefore: T0 + 9_999 })).map((s) => s.taskId)).toEqual([]);
        expect((await store.list({ dueBefore: T0 + 10_000 })).map((s) => s.taskId)).toEqual(['t-wait-soon']);
        expect((await store.list({ dueBefore: T0 + 60_000 })).map((s) => s.taskId)).toEqual([
          't-wait-soon',
          't-wait-late',
        ]);
      });

      it('applies the limit after filtering and sorting', async () => {
        await seed();
        expect((await store.list({ limit: 2 })).map((s) => s.taskId)).toEqual(['t-run-new', 't-done']);
        expect(
          (await store.list({ states: ['running', 'waiting_for_confirmation'], limit: 2 })).map((s) => s.taskId),
        ).toEqual(['t-run-new', 't-wait-soon']);
      });

      it('orders tasks updated at the same time by id, comparing code units (not locale)', async () => {
        for (const id of ['t-b', 't-c', 'T-z', 't-a', 'é']) await createTask(store, id, { updatedAt: T0 });
        expect((await store.list()).map((s) => s.taskId)).toEqual(['T-z', 't-a', 't-b', 't-c', 'é']);
      });

      it('moves a task between filters when a save changes its state', async () => {
        const first = await createTask(store, 't-moves');
        await advance(store, first, { state: 'waiting_for_confirmation', wakeAt: T0 + 100 });
        expect(await store.list({ states: ['running'] })).toEqual([]);
        expect((await store.list({ dueBefore: T0 + 100 })).map((s) => s.taskId)).toEqual(['t-moves']);
      });

      it('is empty for an empty store', async () => {
        expect(await store.list()).toEqual([]);
      });
    });

    describe('quarantine', () => {
      it('records the reason and gives it back, without touching the task', async () => {
        const envelope = await createTask(store, 't-q');
        expect(await store.quarantined('t-q')).toBeNull();
        await store.quarantine('t-q', 'state "gone" does not exist — ünïcode');
        expect(await store.quarantined('t-q')).toBe('state "gone" does not exist — ünïcode');
        expect(await store.quarantined('t-other')).toBeNull();
        expect(await store.load('t-q')).toStrictEqual(envelope);
      });
    });

    describe('versions', () => {
      it('stores an envelope of an unknown schema version and refuses it on load with UnsupportedVersionError', async () => {
        const request = createRequest('t-future');
        (request.envelope as { schemaVersion: number }).schemaVersion = 2;
        await store.save(request);
        const error = await store.load('t-future').catch((e: unknown) => e);
        expect(error).toBeInstanceOf(UnsupportedVersionError);
        expect((error as Error).message).toContain('schema version 2 is not supported');
      });

      it('refuses an unknown machine version with UnsupportedVersionError', async () => {
        const request = createRequest('t-machine');
        request.envelope.machineVersion = 'agent/99';
        await store.save(request);
        await expect(store.load('t-machine')).rejects.toBeInstanceOf(UnsupportedVersionError);
      });
    });

    describeLeaseContract(() => store);
  });
  describe(`TaskStore contract: ${name}`, () => describeErasureContract(makeStore));
  describe(`TaskStore contract: ${name}`, () => describeMandateContract(makeStore));
}
