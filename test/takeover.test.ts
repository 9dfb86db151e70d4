/**
 * Taking a task over, on a MemoryStore with leases (the same semantics as Redis): recovery keeps nothing that
 * settled between its list and its lease, and a process whose lease lapsed with nobody else taking it takes it back
 * and finishes the task itself, without anyone calling recover(). The Redis versions: takeover.redis.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { type Orchestrator, createOrchestrator } from '../src/orchestrator/orchestrator.js';
import type { ModelReply } from '../src/model/agentModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { reply } from '../src/testing/scriptedModel.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { E17, until } from './support/harness.js';
import {
  clockedStore,
  inFlight,
  leaseIsFree,
  noteWriter,
  readThenWrite,
  slowRead,
  stallableRenewals,
  withMembers,
} from './support/takeover.js';

/**
 * Long enough never to lapse by itself, however loaded the machine: a test makes a lease lapse by moving the store's
 * clock past it (`clockedStore`), not by waiting, so no verdict depends on how fast the renewals run.
 */
const TTL = 10_000;
/** A wait in which something that must not happen would have (a take-back runs within a renewal period, 20 ms). */
const QUIET_MS = 200;

/** A MemoryStore whose lease clock the test moves: `lapse()` takes it past every lease's TTL at once. */
function lapsingStore(): { store: MemoryStore; lapse(): void } {
  const { store, advance } = clockedStore();
  return { store, lapse: () => advance(TTL + 1) };
}

function processWith(
  store: TaskStore,
  tools: { read: ReturnType<typeof slowRead>; label: string; notes: ReturnType<typeof noteWriter> },
  lease: { ttlMs: number; renewEveryMs?: number },
  last?: (note: string) => ModelReply,
): Orchestrator {
  return createOrchestrator({
    tools: [tools.read.tool(tools.label), tools.notes.tool],
    model: readThenWrite(last),
    store,
    lease,
    expirySweepMs: 0,
    // These tests are about taking a lost lease back and about recover(); the orphan sweep has its own
    // (handover.redis.test.ts), and with these short TTLs it would take the tasks over first.
    orphanSweepMs: 0,
  });
}

/**
 * Process A drives task "t" into a read that waits; then its renewals stall past the TTL, so its lease lapses with
 * nobody else taking it. `resume()` lets the renewals through again (and A finds the lease lost).
 */
async function lapsedDriver() {
  const { store: raw, lapse } = lapsingStore();
  const stallable = stallableRenewals(raw);
  const read = slowRead();
  const notes = noteWriter();
  const a = processWith(stallable.store, { read, label: 'A', notes }, { ttlMs: TTL, renewEveryMs: 20 });
  await a.start({ principal: E17, goal: 'read, then note', taskId: 't' });
  await until(() => read.started.length === 1);
  const resume = stallable.stall();
  lapse();
  return { raw, stallable, read, notes, a, resume };
}

describe('recover()', () => {
  describe('when the task comes to rest between the list and the lease', () => {
    it.each([
      ['has finished', undefined, 'answered'],
      ['waits for the user', (note: string) => reply.ask(`${note}; anything else?`), 'waiting_for_user'],
    ] as const)('keeps nothing of a task that %s: no task in memory, no lease held', async (_case, last, state) => {
      const store = new MemoryStore();
      const read = slowRead();
      const notes = noteWriter();
      const a = processWith(store, { read, label: 'A', notes }, { ttlMs: 10_000 }, last);
      await a.start({ principal: E17, goal: 'read, then note', taskId: 't' });
      await until(() => read.started.length === 1);

      // B lists the task as running; before B takes its lease, A finishes it (or it comes to rest) and lets it go.
      const listed = withMembers(store, {
        async list(query) {
          const rows = await store.list(query);
          if (query?.states?.includes('running')) {
            read.release();
            expect((await a.settled('t')).state).toBe(state);
            await until(() => inFlight(a).leases === 0);
          }
          return rows;
        },
      });
      const b = processWith(listed, { read, label: 'B', notes }, { ttlMs: 10_000 }, last);
      const report = await b.recover();

      expect(report).toMatchObject({ resumed: [], busy: [], quarantined: [] });
      await until(() => inFlight(b).leases === 0);
      expect(inFlight(b)).toEqual({ live: 0, leases: 0 });
      expect(await leaseIsFree(store, 't')).toBe(true);
      expect((await b.status('t')).state).toBe(state);
      expect(read.started).toEqual(['A']);
      expect(notes.executed).toHaveLength(1);
      await a.close();
      await b.close();
    });
  });
});

describe('a process that lost its lease', () => {
  describe('when nobody else took it', () => {
    it('takes it back and finishes the task itself, without recover(); the write runs once', async () => {
      const { store: raw, lapse } = lapsingStore();
      const stallable = stallableRenewals(raw);
      const read = slowRead();
      const notes = noteWriter();
      const failures: string[] = [];
      const a = createOrchestrator({
        tools: [read.tool('A'), notes.tool],
        model: readThenWrite(),
        store: stallable.store,
        lease: { ttlMs: TTL, renewEveryMs: 20 },
        expirySweepMs: 0,
        logger: { warn() {}, error: (fields) => failures.push(String((fields as { code?: unknown }).code)) },
      });
      await a.start({ principal: E17, goal: 'read, then note', taskId: 't' });
      await until(() => read.started.length === 1);
      const before = (await raw.load('t'))!;

      // Renewals stall past the TTL: the lease lapses with nobody else taking it; when they come back, it is lost.
      const resume = stallable.stall();
      lapse();
      resume();
      await until(() => read.started.length === 2); // stopped, taken back, restored: the read runs again
      expect(failures).toEqual(['fenced_out']);
      expect(inFlight(a)).toEqual({ live: 1, leases: 1 });

      read.release();
      expect(await a.settled('t')).toMatchObject({ state: 'answered', outcome: { answer: 'read by A' } });
      expect(notes.executed).toHaveLength(1);
      await until(() => inFlight(a).leases === 0);
      expect(inFlight(a)).toEqual({ live: 0, leases: 0 });
      expect(await leaseIsFree(raw, 't')).toBe(true);
      // Resumed from the revision it had saved last, under a new fence.
      const audit = await a.audit('t');
      expect(audit.filter((e) => e.kind === 'tool_finished')).toHaveLength(2);
      expect((await raw.load('t'))!.revision).toBeGreaterThan(before.revision);
      await a.close();
    });

    it('resumes it also when another process held it meanwhile but saved nothing', async () => {
      const { raw, read, notes, a, resume } = await lapsedDriver();
      const b = processWith(raw, { read, label: 'B', notes }, { ttlMs: 10_000 });
      expect((await b.recover()).resumed).toEqual(['t']);
      await until(() => read.started.length === 2);
      await b.close(); // B stops before its read ends: nothing of B's was saved

      resume();
      await until(() => read.started.length === 3);
      read.release();
      expect(await a.settled('t')).toMatchObject({ state: 'answered', outcome: { answer: 'read by A' } });
      expect(notes.executed).toHaveLength(1);
      await a.close();
    });
  });

  describe('when another process took it', () => {
    it('leaves the task to that process and holds nothing of it', async () => {
      const { raw, read, notes, a, resume } = await lapsedDriver();
      const b = processWith(raw, { read, label: 'B', notes }, { ttlMs: 10_000 });
      expect((await b.recover()).resumed).toEqual(['t']);
      await until(() => read.started.length === 2);

      resume();
      await until(() => inFlight(a).leases === 0 && inFlight(a).live === 0);
      read.release();
      expect(await b.settled('t')).toMatchObject({ state: 'answered', outcome: { answer: 'read by B' } });
      expect(read.started).toEqual(['A', 'B']);
      expect(notes.executed).toHaveLength(1);
      expect(inFlight(a)).toEqual({ live: 0, leases: 0 });
      await a.close();
      await b.close();
    });
  });

  describe('when another process saved the task meanwhile and let it go', () => {
    it('does not resume it: the task waits for recover()', async () => {
      const { raw, stallable, read, notes, a, resume } = await lapsedDriver();

      // Someone else takes the lease, saves a revision, and lets the lease go.
      const other = (await raw.leases.acquire('t', 10_000))!;
      const stored = (await raw.load('t'))!;
      const revision = stored.revision + 1;
      await raw.save({
        envelope: { ...stored, revision, summary: { ...stored.summary, revision } },
        expectedRevision: stored.revision,
        append: { audit: [], transcript: [] },
        fence: other.fence,
      });
      await raw.leases.release(other);

      resume();
      await until(() => stallable.renewals > 0 && inFlight(a).live === 0 && inFlight(a).leases === 0);
      await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
      expect(inFlight(a)).toEqual({ live: 0, leases: 0 });
      expect(read.started).toEqual(['A']);
      expect((await raw.load('t'))!.revision).toBe(revision);
      expect(await leaseIsFree(raw, 't')).toBe(true);

      read.release();
      const c = processWith(raw, { read, label: 'C', notes }, { ttlMs: 10_000 });
      expect((await c.recover()).resumed).toEqual(['t']);
      expect(await c.settled('t')).toMatchObject({ state: 'answered', outcome: { answer: 'read by C' } });
      await a.close();
      await c.close();
    });
  });
});

describe('races found by review', () => {
  it('close() while a take-back waits on the store: nothing runs on after close, nothing is held', async () => {
    const { store: raw, lapse } = lapsingStore();
    const stallable = stallableRenewals(raw);
    let gate: Promise<void> | null = null;
    let open!: () => void;
    let waiting = false;
    // The take-back's load waits on this gate (the store's quarantine check comes first in a load for a restore).
    const store = withMembers(stallable.store, {
      async quarantined(taskId) {
        if (gate) {
          waiting = true;
          await gate;
        }
        return raw.quarantined(taskId);
      },
    });
    const read = slowRead();
    const notes = noteWriter();
    const a = processWith(store, { read, label: 'A', notes }, { ttlMs: TTL, renewEveryMs: 20 });
    await a.start({ principal: E17, goal: 'read, then note', taskId: 't' });
    await until(() => read.started.length === 1);
    gate = new Promise((resolve) => (open = resolve));
    const resume = stallable.stall();
    lapse();
    resume();
    await until(() => waiting); // the loss is seen; the take-back waits on the gate
    const closed = a.close();
    open();
    await closed;
    expect(inFlight(a)).toEqual({ live: 0, leases: 0 });
    read.release();
    await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
    expect(read.started).toEqual(['A']);
    expect(notes.executed).toHaveLength(0);
    expect((await raw.load('t'))!.summary.state).toBe('running'); // left as saved, for recover() elsewhere
  });

  it('a lease found lost while a start waited on the store is not driven: the start fails and holds nothing', async () => {
    const { store: raw, lapse } = lapsingStore();
    const stallable = stallableRenewals(raw);
    const read = slowRead();
    const notes = noteWriter();
    // The start's existence check waits on the store while renewals stall past the TTL: the lease is lost meanwhile.
    let gate: Promise<void> | null = null;
    let open!: () => void;
    let waiting = false;
    const slowLoads = withMembers(stallable.store, {
      async load(taskId) {
        const envelope = await raw.load(taskId);
        if (gate) {
          waiting = true;
          await gate;
        }
        return envelope;
      },
    });
    const a2 = processWith(slowLoads, { read, label: 'A', notes }, { ttlMs: TTL, renewEveryMs: 20 });
    gate = new Promise((resolve) => (open = resolve));
    const started = a2.start({ principal: E17, goal: 'read, then note', taskId: 't' }).catch((error: unknown) => error);
    await until(() => waiting); // the lease is taken; the existence check waits
    const resume = stallable.stall();
    lapse();
    resume();
    await until(() => stallable.refused > 0); // the renewal finds the lease lost
    open();
    const outcome = await started;
    expect(outcome).toBeInstanceOf(Error);
    expect(inFlight(a2)).toEqual({ live: 0, leases: 0 });
    expect(read.started).toEqual([]);
    await a2.close();
  });
});
