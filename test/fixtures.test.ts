import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatTrace } from '../src/audit/formatTrace.js';
import { ManualClock } from '../src/clock.js';
import { BookingService, DEMO_NOW } from '../src/demo/bookingService.js';
import { RefundDesk } from '../src/demo/refundService.js';
import { bookingScript, refundScript } from '../src/demo/scenarios.js';
import { TaskQuarantinedError } from '../src/errors.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { SUPPORT, harness } from './support/harness.js';

const ROOT = join(import.meta.dirname, 'fixtures', 'envelopes');

interface Fixture {
  envelope: { taskId: string; revision: number; summary: unknown };
  audit: unknown[];
  transcript: unknown[];
}

/** A MemoryStore holding one fixture exactly as stored (bypassing save, as if written by an earlier build). */
function storeWith(name: string, version = 'agent-1'): { store: MemoryStore; taskId: string; fixture: Fixture } {
  const fixture = JSON.parse(readFileSync(join(ROOT, version, `${name}.json`), 'utf8')) as Fixture;
  const store = new MemoryStore();
  const rows = (store as unknown as { rows: Map<string, unknown> }).rows;
  rows.set(fixture.envelope.taskId, {
    envelope: JSON.stringify(fixture.envelope),
    revision: fixture.envelope.revision,
    summary: fixture.envelope.summary,
    audit: fixture.audit.map((e) => JSON.stringify(e)),
    transcript: fixture.transcript.map((e) => JSON.stringify(e)),
  });
  return { store, taskId: fixture.envelope.taskId, fixture };
}

describe('migration of agent/1 envelopes', () => {
  it('is migrated to agent/2 on read: writtenKeys added, nothing else changed', async () => {
    const { store, taskId, fixture } = storeWith('done-booking');
    const loaded = await store.load(taskId);
    expect(loaded?.machineVersion).toBe('agent/2');
    expect(loaded?.snapshot.context.writtenKeys).toEqual([]);
    const { writtenKeys: _added, ...rest } = loaded!.snapshot.context;
    expect(rest).toEqual((fixture.envelope as unknown as { snapshot: { context: unknown } }).snapshot.context);
  });

});

describe.each(['agent-1', 'agent-2'])('envelopes of %s', (version) => {
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
    const result = await h.orchestrator.confirm(taskId, waiting.pendingConfirmation!, SUPPORT);
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
    // Recovery never resumes it; a running one is reported as quarantined, with its reason.
    const report = await h.orchestrator.recover();
    expect(report.resumed).toEqual([]);
    for (const entry of report.quarantined) expect(entry.reason).toMatch(reason);
  });
});
