/**
 * The erasure and retention part of the store contract. Every store runs it; the byte-level checks run where the
 * factory can dump what the store holds (`raw`): every key, file or map entry with everything in it, as text.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it, type TestContext } from 'vitest';
import { AgentError, TaskErasedError, TaskNotFoundError } from '../../src/errors.js';
import type { TaskEnvelope } from '../../src/store/envelope.js';
import type { RetentionOptions, Tombstone } from '../../src/store/erasure.js';
import { type ErasableTaskStore, type TaskStore, isErasable } from '../../src/store/taskStore.js';
import { T0, createRequest, marker, nextRequest, taskInput } from './envelopes.js';

/** One place a store keeps data, and everything it holds there, as text. */
export interface RawEntry {
  location: string;
  text: string;
}

/** What the byte-level checks need of a store. */
export interface RawAccess {
  /** Every key, file, directory or map entry of the store, with its content. */
  dump(): Promise<RawEntry[]>;
  /** Where the tombstone of `taskId` lives: the only locations that may still name the task after its erasure. */
  tombstoneLocations(taskId: string): string[];
}

export interface MadeStore {
  store: TaskStore;
  cleanup: () => Promise<void>;
  raw?: RawAccess;
}

/** Makes a fresh, empty store (with these options) and the function that removes what it created. */
export type StoreFactory = (options?: { retention?: RetentionOptions }) => Promise<MadeStore>;

const GDPR = { reason: 'gdpr_erasure', at: T0 + 99_000, by: 'dpo-7' };

/** Every entry that holds `needle`, in its location or its content. */
function holding(entries: RawEntry[], needle: string): string[] {
  return entries.filter((e) => e.location.includes(needle) || e.text.includes(needle)).map((e) => e.location);
}

export function describeErasureContract(makeStore: StoreFactory): void {
  describe('erasure', () => {
    const opened: MadeStore[] = [];
    afterEach(async () => {
      for (const made of opened.splice(0)) {
        await made.store.close();
        await made.cleanup();
      }
    });

    async function open(options?: {
      retention?: RetentionOptions;
    }): Promise<{ store: ErasableTaskStore; raw?: RawAccess }> {
      const made = await makeStore(options);
      opened.push(made);
      expect(isErasable(made.store)).toBe(true);
      return { store: made.store as ErasableTaskStore, ...(made.raw ? { raw: made.raw } : {}) };
    }

    function rawOrSkip(raw: RawAccess | undefined, context: TestContext): RawAccess {
      if (!raw) context.skip('this store factory cannot dump what the store holds');
      return raw;
    }

    async function create(
      store: TaskStore,
      taskId: string,
      options: Parameters<typeof createRequest>[1] = {},
      fence?: string,
    ) {
      const request = createRequest(taskId, options);
      await store.save({ ...request, ...(fence ? { fence } : {}) });
      return request.envelope;
    }

    async function advance(
      store: TaskStore,
      previous: TaskEnvelope,
      options: Parameters<typeof nextRequest>[1] = {},
      fence?: string,
    ) {
      const request = nextRequest(previous, options);
      await store.save({ ...request, ...(fence ? { fence } : {}) });
      return request.envelope;
    }

    /** Create options for a task of this user. */
    function owned(userId: string, tenantId = 'acme') {
      return { input: { principal: { ...taskInput('x').principal, userId, tenantId } } };
    }

    it('removes every byte of the task, journals, indexes, quarantine and lease included, leaving only its tombstone', async (context) => {
      const { store, raw: maybeRaw } = await open();
      const raw = rawOrSkip(maybeRaw, context);
      const secret = `SECRET-${randomBytes(6).toString('hex')}`;
      const user = `user-${randomBytes(6).toString('hex')}`;
      const lease = await store.leases?.acquire('erase-me', 60_000);
      const first = await create(
        store,
        'erase-me',
        { input: { goal: `Book a room for ${secret}`, ...owned(user).input } },
        lease?.fence,
      );
      await advance(
        store,
        first,
        {
          state: 'waiting_for_confirmation',
          wakeAt: T0 + 50_000,
          audit: [marker(1, { note: secret })],
          transcript: [{ role: 'user', content: secret }],
        },
        lease?.fence,
      );
      await store.quarantine('erase-me', `unrestorable: ${secret}`);
      const kept = await create(store, 'keep-me', { state: 'done' });

      const before = await raw.dump();
      // The dump sees the data (the task and its quarantine marker at least), else the checks below would prove nothing.
      expect(holding(before, secret).length).toBeGreaterThanOrEqual(2);
      expect(holding(before, user).length).toBeGreaterThanOrEqual(1);

      await store.erase('erase-me', GDPR);
      const after = await raw.dump();
      expect(holding(after, secret)).toEqual([]);
      expect(holding(after, user)).toEqual([]);
      const allowed = raw.tombstoneLocations('erase-me');
      for (const location of holding(after, 'erase-me'))
        expect(allowed, `${location} still names the erased task`).toContain(location);
      expect(await store.load('keep-me')).toStrictEqual(kept);
      expect((await store.list()).map((s) => s.taskId)).toEqual(['keep-me']);
      expect(await store.list({ dueBefore: T0 + 60_000 })).toEqual([]);
    });

    it('leaves a minimal tombstone: what, when, why, who asked, how much; nothing about the person', async () => {
      const { store } = await open();
      const first = await create(store, 't-tomb', {
        input: { goal: 'Refund order 991 for Ada Lovelace', ...owned('ada@example.com').input },
      });
      const last = await advance(store, first, {
        state: 'done',
        audit: [marker(1), marker(2)],
        transcript: [marker(3)],
      });
      const tombstone = await store.erase('t-tomb', GDPR);
      expect(tombstone).toStrictEqual({
        schemaVersion: 1,
        taskId: 't-tomb',
        erasedAt: GDPR.at,
        reason: 'gdpr_erasure',
        by: 'dpo-7',
        removed: { snapshot: true, audit: last.journal.audit, transcript: last.journal.transcript, quarantine: false },
      } satisfies Tombstone);
      expect(await store.tombstone('t-tomb')).toStrictEqual(tombstone);
      const text = JSON.stringify(tombstone);
      for (const personal of ['Ada', 'ada@example.com', 'acme', 'Refund']) expect(text).not.toContain(personal);
      expect(await store.tombstone('t-never')).toBeNull();
      const unnamed = await store.erase((await create(store, 't-anon')).taskId, { reason: 'duplicate', at: T0 });
      expect(unnamed.by).toBeNull();
    });

    it('answers every later read and write of the id as erased (TaskErasedError, a TaskNotFoundError)', async () => {
      const { store } = await open();
      const first = await create(store, 't-gone');
      await store.erase('t-gone', GDPR);
      const error = await store.load('t-gone').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TaskErasedError);
      expect(error).toBeInstanceOf(TaskNotFoundError);
      expect(error).toMatchObject({ code: 'task_erased', taskId: 't-gone', erasedAt: GDPR.at, reason: 'gdpr_erasure' });
      expect((error as Error).message).toContain(new Date(GDPR.at).toISOString());
      expect(await store.readJournal('t-gone', 'audit')).toEqual([]);
      expect(await store.readJournal('t-gone', 'transcript')).toEqual([]);
      expect(await store.quarantined('t-gone')).toBeNull();
      expect(await store.list()).toEqual([]);
      await expect(store.save(nextRequest(first))).rejects.toBeInstanceOf(TaskErasedError);
      await expect(store.quarantine('t-gone', 'x')).rejects.toBeInstanceOf(TaskErasedError);
    });

    it('refuses to create a task under an erased id and writes nothing', async () => {
      const { store, raw } = await open();
      await create(store, 't-reuse');
      const tombstone = await store.erase('t-reuse', GDPR);
      const before = await raw?.dump();
      const error = await store
        .save(createRequest('t-reuse', { input: { goal: 'a new task under an old id' } }))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TaskErasedError);
      await expect(store.load('t-reuse')).rejects.toBeInstanceOf(TaskErasedError);
      expect(await store.tombstone('t-reuse')).toStrictEqual(tombstone);
      if (raw) expect(await raw.dump()).toStrictEqual(before);
    });

    it("refuses a stale writer's saves after the erasure, fenced or not, and its lease", async () => {
      const { store } = await open();
      const lease = await store.leases?.acquire('t-stale', 60_000);
      const first = await create(store, 't-stale', {}, lease?.fence);
      const second = await advance(store, first, { audit: [marker(1)] }, lease?.fence);
      await store.erase('t-stale', GDPR);
      // The writer still holds what it had: its next save, with its fence, without, or from the start.
      await expect(
        store.save({ ...nextRequest(second), ...(lease ? { fence: lease.fence } : {}) }),
      ).rejects.toBeInstanceOf(TaskErasedError);
      await expect(store.save(nextRequest(second))).rejects.toBeInstanceOf(TaskErasedError);
      await expect(
        store.save({ ...createRequest('t-stale'), ...(lease ? { fence: lease.fence } : {}) }),
      ).rejects.toBeInstanceOf(TaskErasedError);
      if (store.leases) {
        await expect(store.leases.acquire('t-stale', 60_000)).rejects.toBeInstanceOf(TaskErasedError);
        expect(await store.leases.renew(lease!, 60_000)).toBe(false);
      }
      await expect(store.load('t-stale')).rejects.toBeInstanceOf(TaskErasedError);
    });

    it('ends erased when saves race with the erasure, with nothing recreated', async () => {
      const { store, raw } = await open();
      const secret = `RACE-${randomBytes(4).toString('hex')}`;
      let envelope = await create(store, 't-race', { input: { goal: secret } });
      const saving = (async () => {
        for (let n = 0; n < 20; n++) envelope = await advance(store, envelope, { audit: [marker(n, { secret })] });
      })();
      const [saves, erased] = await Promise.allSettled([saving, store.erase('t-race', GDPR)]);
      expect(erased.status).toBe('fulfilled');
      if (saves.status === 'rejected') expect(saves.reason).toBeInstanceOf(TaskErasedError);
      await expect(store.load('t-race')).rejects.toBeInstanceOf(TaskErasedError);
      await expect(store.save(nextRequest(envelope))).rejects.toBeInstanceOf(TaskErasedError);
      if (raw) expect(holding(await raw.dump(), secret)).toEqual([]);
    });

    it('is idempotent: erasing again returns the first tombstone', async () => {
      const { store } = await open();
      await create(store, 't-twice');
      const first = await store.erase('t-twice', GDPR);
      expect(await store.erase('t-twice', { reason: 'again', at: T0 + 5_000_000 })).toStrictEqual(first);
    });

    it('refuses to erase an id with nothing stored (TaskNotFoundError) and leaves no tombstone', async () => {
      const { store } = await open();
      const error = await store.erase('t-nothing', GDPR).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TaskNotFoundError);
      expect(error).not.toBeInstanceOf(TaskErasedError);
      expect(await store.tombstone('t-nothing')).toBeNull();
      await create(store, 't-nothing');
    });

    it('erases data it cannot read, and a task that is only a quarantine marker', async () => {
      const { store } = await open();
      const future = createRequest('t-future');
      (future.envelope as { schemaVersion: number }).schemaVersion = 2;
      await store.save(future);
      expect((await store.erase('t-future', GDPR)).removed).toMatchObject({
        snapshot: true,
        audit: future.envelope.journal.audit,
      });
      await store.quarantine('t-marker', 'restored into a state that does not exist');
      expect((await store.erase('t-marker', GDPR)).removed).toStrictEqual({
        snapshot: false,
        audit: 0,
        transcript: 0,
        quarantine: true,
      });
      expect(await store.quarantined('t-marker')).toBeNull();
    });

    it('refuses an erasure request without a reason or with a bad time, erasing nothing', async () => {
      const { store } = await open();
      const envelope = await create(store, 't-bad-request');
      await expect(store.erase('t-bad-request', { reason: ' ', at: T0 })).rejects.toMatchObject({
        code: 'invalid_request',
      });
      await expect(store.erase('t-bad-request', { reason: 'x', at: -1 })).rejects.toMatchObject({
        code: 'invalid_request',
      });
      await expect(store.erase('t-bad-request', { reason: 'x', at: T0, by: '' })).rejects.toMatchObject({
        code: 'invalid_request',
      });
      expect(await store.load('t-bad-request')).toStrictEqual(envelope);
    });

    describe('by user', () => {
      it('erases every task of that user of that tenant and nobody else', async () => {
        const { store } = await open();
        await create(store, 'alice-1', owned('alice'));
        const alice2 = await create(store, 'alice-2', owned('alice'));
        await advance(store, alice2, { state: 'done' });
        const elsewhere = await create(store, 'alice-globex', owned('alice', 'globex'));
        const bob = await create(store, 'bob-1', owned('bob'));
        const result = await store.eraseUser({ tenantId: 'acme', userId: 'alice' }, GDPR);
        expect(result.erased.map((t) => t.taskId).sort()).toEqual(['alice-1', 'alice-2']);
        expect(result.unreadable).toEqual([]);
        for (const tombstone of result.erased)
          expect(tombstone).toMatchObject({ reason: 'gdpr_erasure', by: 'dpo-7', erasedAt: GDPR.at });
        await expect(store.load('alice-1')).rejects.toBeInstanceOf(TaskErasedError);
        expect(await store.load('alice-globex')).toStrictEqual(elsewhere);
        expect(await store.load('bob-1')).toStrictEqual(bob);
        expect(await store.list({ owner: { tenantId: 'acme', userId: 'alice' } })).toEqual([]);
        expect((await store.eraseUser({ tenantId: 'acme', userId: 'alice' }, GDPR)).erased).toEqual([]);
      });

      it('lists one user’s tasks, with the other filters', async () => {
        const { store } = await open();
        await create(store, 'c-1', { ...owned('carol'), updatedAt: T0 + 1 });
        await create(store, 'c-2', { ...owned('carol'), state: 'done', updatedAt: T0 + 3 });
        await create(store, 'c-3', { ...owned('carol'), updatedAt: T0 + 2 });
        await create(store, 'd-1', { ...owned('dave'), updatedAt: T0 + 4 });
        const carol = { tenantId: 'acme', userId: 'carol' };
        expect((await store.list({ owner: carol })).map((s) => s.taskId)).toEqual(['c-2', 'c-3', 'c-1']);
        expect((await store.list({ owner: carol, limit: 1 })).map((s) => s.taskId)).toEqual(['c-2']);
        expect((await store.list({ owner: carol, states: ['running'], limit: 1 })).map((s) => s.taskId)).toEqual([
          'c-3',
        ]);
        expect(await store.list({ owner: { tenantId: 'globex', userId: 'carol' } })).toEqual([]);
      });

      it('refuses a save that would give a task another owner (invalid_save)', async () => {
        const { store } = await open();
        const first = await create(store, 't-owner', owned('erin'));
        const request = nextRequest(first);
        request.envelope.snapshot.context.principal.userId = 'mallory';
        request.envelope.summary.userId = 'mallory';
        const error = await store.save(request).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(AgentError);
        expect(error).toMatchObject({ code: 'invalid_save' });
        expect(await store.load('t-owner')).toStrictEqual(first);
      });
    });

    describe('retention', () => {
      it('erases only finished tasks last updated a period ago or earlier, with reason "retention"', async () => {
        const { store } = await open({ retention: { finishedTaskMs: 1000 } });
        await create(store, 'r-done', { state: 'done', updatedAt: T0 });
        await create(store, 'r-exhausted', { state: 'budget_exhausted', updatedAt: T0 + 200 });
        await create(store, 'r-cancelled-late', { state: 'cancelled', updatedAt: T0 + 201 });
        await create(store, 'r-failed-new', { state: 'failed', updatedAt: T0 + 5000 });
        await create(store, 'r-running', { updatedAt: T0 });
        await create(store, 'r-waiting', { state: 'waiting_for_confirmation', updatedAt: T0, wakeAt: T0 + 10 });
        await create(store, 'r-review', { state: 'review_required', updatedAt: T0 });
        const now = T0 + 1200;
        const report = await store.sweepRetention(now);
        expect(report.erased.map((t) => t.taskId).sort()).toEqual(['r-done', 'r-exhausted']);
        for (const tombstone of report.erased)
          expect(tombstone).toMatchObject({ reason: 'retention', erasedAt: now, by: null });
        expect(report).toMatchObject({ tombstonesRemoved: 0, more: false });
        expect((await store.list()).map((s) => s.taskId).sort()).toEqual([
          'r-cancelled-late',
          'r-failed-new',
          'r-review',
          'r-running',
          'r-waiting',
        ]);
        expect((await store.sweepRetention(now)).erased).toEqual([]);
      });

      it('does nothing without retention options', async () => {
        const { store } = await open();
        await create(store, 'r-keep', { state: 'done', updatedAt: T0 });
        expect(await store.sweepRetention(T0 + 10 * 365 * 86_400_000)).toStrictEqual({
          erased: [],
          tombstonesRemoved: 0,
          more: false,
        });
        expect(await store.load('r-keep')).not.toBeNull();
      });

      it('stops at its limit, oldest first, and says there is more', async () => {
        const { store } = await open({ retention: { finishedTaskMs: 0 } });
        for (const n of [3, 1, 2]) await create(store, `r-${n}`, { state: 'done', updatedAt: T0 + n });
        const first = await store.sweepRetention(T0 + 10, { limit: 2 });
        expect(first.erased.map((t) => t.taskId)).toEqual(['r-1', 'r-2']);
        expect(first.more).toBe(true);
        const second = await store.sweepRetention(T0 + 10, { limit: 2 });
        expect(second.erased.map((t) => t.taskId)).toEqual(['r-3']);
        expect(second.more).toBe(false);
      });

      it('removes tombstones past their own period, after which the id can be created again', async () => {
        const { store, raw } = await open({ retention: { tombstoneMs: 1000 } });
        await create(store, 'r-tomb');
        await store.erase('r-tomb', { reason: 'gdpr_erasure', at: T0 });
        await create(store, 'r-other');
        await store.erase('r-other', { reason: 'gdpr_erasure', at: T0 + 500 });
        expect(await store.sweepRetention(T0 + 999)).toMatchObject({ erased: [], tombstonesRemoved: 0 });
        expect(await store.sweepRetention(T0 + 1000)).toMatchObject({ erased: [], tombstonesRemoved: 1, more: false });
        expect(await store.tombstone('r-tomb')).toBeNull();
        expect(await store.tombstone('r-other')).not.toBeNull();
        expect(await store.load('r-tomb')).toBeNull();
        if (raw) expect(holding(await raw.dump(), 'r-tomb')).toEqual([]);
        const again = await create(store, 'r-tomb');
        expect(await store.load('r-tomb')).toStrictEqual(again);
      });

      it('refuses retention periods that are not whole milliseconds', async () => {
        await expect(makeStore({ retention: { finishedTaskMs: -1 } })).rejects.toThrow(TypeError);
        await expect(makeStore({ retention: { tombstoneMs: 1.5 } })).rejects.toThrow(/tombstoneMs/);
      });
    });
  });
}
