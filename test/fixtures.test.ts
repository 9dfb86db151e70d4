import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatTrace } from '../src/audit/formatTrace.js';
import { ManualClock } from '../src/testing/manualClock.js';
import { BookingService, DEMO_NOW } from '../examples/booking/bookingService.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { bookingScript, refundScript } from '../examples/booking/scenarios.js';
import { CorruptTaskError, TaskQuarantinedError } from '../src/errors.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { SUPPORT, harness } from './support/harness.js';
import { rawRows } from './support/rawRows.js';

const ROOT = join(import.meta.dirname, 'fixtures', 'envelopes');

interface Fixture {
  envelope: { taskId: string; revision: number; summary: unknown };
  audit: unknown[];
  transcript: unknown[];
}

/** A MemoryStore holding one fixture exactly as stored (bypassing save, as if written by an earlier build). */
function storeWith(name: string, version = 'agent-1'): { store: MemoryStore; taskId: string; fixture: Fixture } {
  const fixture = JSON.parse(readFileSync(join(ROOT, version, `${name}.json`), 'utf8')) as Fixture;
  return storeHolding(fixture);
}

/** A MemoryStore holding `envelope` (with empty journals) under its task id. */
function storeWithEnvelope(envelope: Raw): { store: MemoryStore; taskId: string } {
  const taskId = String(envelope.taskId ?? (envelope.snapshot.context.taskId as string));
  const fixture = { envelope: { ...envelope, taskId, revision: Number(envelope.revision ?? 1), summary: envelope.summary }, audit: [], transcript: [] };
  const { store } = storeHolding(fixture as unknown as Fixture, envelope);
  return { store, taskId };
}

function storeHolding(fixture: Fixture, raw: unknown = fixture.envelope): { store: MemoryStore; taskId: string; fixture: Fixture } {
  const store = new MemoryStore();
  rawRows(store).set(fixture.envelope.taskId, {
    envelope: JSON.stringify(raw),
    revision: fixture.envelope.revision,
    summary: fixture.envelope.summary,
    audit: fixture.audit.map((e) => JSON.stringify(e)),
    transcript: fixture.transcript.map((e) => JSON.stringify(e)),
  });
  return { store, taskId: fixture.envelope.taskId, fixture };
}

type Raw = Record<string, unknown> & { snapshot: { value: unknown; context: Record<string, unknown> & { batch: { calls: Record<string, unknown>[] } | null } } };

function rawFixture(name: string, version: string): Raw {
  return JSON.parse(readFileSync(join(ROOT, version, `${name}.json`), 'utf8')).envelope as Raw;
}

describe('migration of older envelopes', () => {
  it('brings an agent/1 envelope to agent/3 on read: writtenKeys added, the batch names no current call, nothing else', async () => {
    const { store, taskId, fixture } = storeWith('done-booking');
    const loaded = await store.load(taskId);
    expect(loaded?.machineVersion).toBe('agent/3');
    expect(loaded?.snapshot.context.writtenKeys).toEqual([]);
    const { writtenKeys: _added, batch, ...rest } = loaded!.snapshot.context;
    const { batch: oldBatch, ...oldRest } = (fixture.envelope as unknown as Raw).snapshot.context;
    expect(rest).toEqual(oldRest);
    expect(batch).toEqual({ ...oldBatch, current: null });
  });

  it.each([
    ['waiting-for-confirmation', 'awaitingConfirmation'],
    ['mid-write', 'writing'],
  ])('names the call an agent/2 task %s works on, in the phase of its state', async (name, phase) => {
    const { store, taskId, fixture } = storeWith(name, 'agent-2');
    const loaded = (await store.load(taskId))!;
    const old = (fixture.envelope as unknown as Raw).snapshot.context.batch!.calls;
    const calls = loaded.snapshot.context.batch!.calls;
    expect(loaded.snapshot.context.batch!.current).toBe(old[0]!.callId);
    expect(calls.map((c) => c.phase)).toEqual([phase]);
    expect(calls.map(({ phase: _p, ...c }) => c)).toEqual(old.map(({ phase: _p, ...c }) => c));
  });

  it('refuses an agent/2 task that rested in vetting with a specific reason, and quarantines it', async () => {
    const envelope = rawFixture('waiting-for-confirmation', 'agent-2');
    Object.assign(envelope.snapshot, { value: 'vetting' });
    const { store, taskId } = storeWithEnvelope(envelope);
    const h = harness({ store });
    await expect(h.orchestrator.resume(taskId)).rejects.toThrow(/rested in state "vetting".*cannot be migrated/);
    expect(await store.quarantined(taskId)).toMatch(/cannot be migrated/);
  });
});

describe('an envelope missing a field the machine needs', () => {
  const current = rawFixture('waiting-for-confirmation', 'agent-3');
  const contextFields = Object.keys(current.snapshot.context);
  const envelopeFields = Object.keys(current).filter((key) => key !== 'schemaVersion' && key !== 'machineVersion');

  it.each(contextFields)('is refused at load and quarantined without context.%s', async (field) => {
    const envelope = structuredClone(current);
    delete envelope.snapshot.context[field];
    await expectCorrupt(envelope, new RegExp(`snapshot\\.context\\.${field}`));
  });

  it.each(envelopeFields)('is refused at load and quarantined without %s', async (field) => {
    const envelope = structuredClone(current);
    delete envelope[field];
    await expectCorrupt(envelope, field === 'taskId' ? /invalid envelope at taskId|belongs to task/ : new RegExp(`invalid envelope at ${field}`));
  });

  it('is refused for an agent/2 task without writtenKeys (the migration adds it only to agent/1)', async () => {
    const envelope = rawFixture('waiting-for-confirmation', 'agent-2');
    delete envelope.snapshot.context.writtenKeys;
    await expectCorrupt(envelope, /snapshot\.context\.writtenKeys/);
  });

  async function expectCorrupt(envelope: Raw, reason: RegExp) {
    const { store, taskId } = storeWithEnvelope(envelope);
    await expect(store.load(taskId)).rejects.toBeInstanceOf(CorruptTaskError);
    await expect(store.load(taskId)).rejects.toThrow(reason);
    const h = harness({ store });
    await expect(h.orchestrator.confirm(taskId, SUPPORT, { id: 'x', argsHash: 'y' })).rejects.toBeInstanceOf(TaskQuarantinedError);
    expect(await store.quarantined(taskId)).toMatch(reason);
  }
});

describe.each(['agent-1', 'agent-2', 'agent-3'])('envelopes of %s', (version) => {
  it('restores a finished task: status, outcome and audit as they were', async () => {
    const { store, taskId } = storeWith('done-booking', version);
    const h = harness({ store });
    const status = await h.orchestrator.resume(taskId);
    expect(status).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } } });
    expect(status.evidence.at(-1)?.fields).toEqual({ status: 'confirmed', booking_id: 'B204' });
    expect(formatTrace(await h.orchestrator.audit(taskId))).toContain('done goal_met');
  });

  it('restores a task waiting for confirmation and runs the call once it is confirmed', async () => {
    const { store, taskId } = storeWith('waiting-for-confirmation', version);
    const refunds = new RefundDesk();
    const h = harness({ store, refunds, script: refundScript(), clock: new ManualClock(DEMO_NOW) });
    const waiting = await h.orchestrator.status(taskId);
    expect(waiting.pendingConfirmation?.summary).toBe('Refund 999.00 on order O-1001 (manager approved per note)');
    const result = await h.orchestrator.confirm(taskId, SUPPORT, waiting.pendingConfirmation!);
    expect(result.accepted).toBe(true);
    const done = await h.orchestrator.settled(taskId);
    expect(done.state).toBe('done');
    expect(refunds.refunds.map((r) => r.amountCents)).toEqual([99_900]);
  });

  it('restores a task stopped in the middle of a write: reconciled by its idempotency key, written once', async () => {
    const { store, taskId, fixture } = storeWith('mid-write', version);
    const bookings = new BookingService();
    const h = harness({ store, bookings, script: bookingScript(), clock: new ManualClock(DEMO_NOW) });
    await h.orchestrator.resume(taskId);
    const status = await h.orchestrator.settled(taskId);
    expect(status.state).toBe('done');
    const key = (fixture.envelope as unknown as { snapshot: { context: { batch: { calls: { idempotencyKey: string }[] } } } }).snapshot
      .context.batch.calls[0]!.idempotencyKey;
    // This process's booking service never saw the first attempt: not found, then the same key once.
    expect(bookings.reserveRequests.map((r) => r.idempotencyKey)).toEqual([key]);
    expect(bookings.bookings).toHaveLength(1);
  });

});

describe('envelopes of agent-3 only', () => {
  it('restores a task stopped while a tool validated its call: the validation runs again and the task goes on', async () => {
    const { store, taskId } = storeWith('mid-validation', 'agent-3');
    const bookings = new BookingService();
    const h = harness({ store, bookings, script: bookingScript(), clock: new ManualClock(DEMO_NOW) });
    await h.orchestrator.resume(taskId);
    const status = await h.orchestrator.settled(taskId);
    expect(status).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } } });
    expect(bookings.bookings).toHaveLength(1);
    const audit = await h.orchestrator.audit(taskId);
    // The restored validation runs again (entry actions are not replayed): one note of the check, one decision.
    expect(audit.filter((e) => e.kind === 'check_started' && e.tool === 'find_available_rooms')).toHaveLength(1);
    expect(audit.filter((e) => e.kind === 'gate' && e.gate === 'business' && e.tool === 'find_available_rooms')).toHaveLength(1);
  });
});

describe('broken envelopes', () => {
  it.each([
    ['bad-schema-version', /envelope schema version 2 is not supported; this build reads 1/],
    ['bad-machine-version', /machine version "agent\/0" is not supported; this build restores agent\/1/],
    ['bad-state', /state "executing\.awaitingApproval" does not exist/],
    ['bad-type', /invalid envelope at snapshot\.context\.turn/],
    ['bad-invoke', /refers to actor "executeWriteV0", which this build does not provide/],
  ])('refuses %s with a specific reason and quarantines it', async (name, reason) => {
    const { store, taskId } = storeWith(name);
    const h = harness({ store });
    const attempt = h.orchestrator.resume(taskId);
    await expect(attempt).rejects.toBeInstanceOf(TaskQuarantinedError);
    await expect(attempt).rejects.toThrow(reason);
    expect(await store.quarantined(taskId)).toMatch(reason);
    // Recovery never resumes it; one listed as running is reported as quarantined, with its reason.
    const report = await h.orchestrator.recover();
    expect(report.resumed).toEqual([]);
    const listedRunning = (await store.list({ states: ['running'] })).some((s) => s.taskId === taskId);
    expect(report.quarantined).toEqual(listedRunning ? [{ taskId, reason: expect.stringMatching(reason) }] : []);
  });
});
