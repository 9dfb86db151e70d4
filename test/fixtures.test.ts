import { NO_COMPACTION } from '../machines/compactions.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatTrace } from '../src/audit/formatTrace.js';
import { replayAudit } from '../src/audit/replayAudit.js';
import { chartMoves } from '../src/audit/chartMoves.js';
import { agentMachine } from '../machines/agentMachine.js';
import type { AuditEntry } from '../machines/journal.js';
import { ManualClock } from '../src/testing/manualClock.js';
import { BookingService, DEMO_NOW } from '../examples/booking/bookingService.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { bookingScript, refundScript } from '../examples/booking/scenarios.js';
import { CorruptTaskError, TaskQuarantinedError } from '../src/errors.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { DEFAULT_POLICY } from '../src/defaults.js';
import { E17, SUPPORT, harness } from './support/harness.js';
import { rawRows } from './support/rawRows.js';
import { CateringDesk } from '../examples/booking/cateringService.js';
import { sagaTools } from '../examples/booking/sagaScenario.js';
import { MEETING } from '../examples/booking/requests.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { scriptedModel } from '../src/testing/scriptedModel.js';
import { bookingMandate, refundMandate } from '../tools/mandates.js';
import { getOrder } from '../tools/getOrder.js';
import { refundOrder } from '../tools/refundOrder.js';
import { plannedRefundScript } from '../examples/booking/planScenario.js';
import { E17_SUPPORT } from '../examples/booking/requests.js';
import { delegateRefund, delegatedScript } from '../examples/booking/subtaskScenario.js';
import { until } from './support/harness.js';

/** The booking the demo's saga makes: R7 for the meeting. */
const MEETING_BOOKING = {
  room_id: 'R7',
  start_at: MEETING.start_at,
  end_at: MEETING.end_at,
  attendees: MEETING.attendees,
  expected_version: 17,
};

const ROOT = join(import.meta.dirname, 'fixtures', 'envelopes');
/** The requirement an agent/3 `needsConfirmation: true` stood for: the task's user confirms. */
/** A requester's confirmation as agent/4 made it, with what agent/6 adds: asked by the tool's rule, of a writable tool. */
const REQUESTER = {
  approverScope: null,
  approvals: 1,
  onReject: 'replan',
  onExpiry: 'ask_again',
  reasons: ['tool_rule'],
  risk: 'writable',
};
const REVIEWER = { userId: 'R2', tenantId: 'acme', scopes: ['tasks:review'] };

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
  const fixture = {
    envelope: { ...envelope, taskId, revision: Number(envelope.revision ?? 1), summary: envelope.summary },
    audit: [],
    transcript: [],
  };
  const { store } = storeHolding(fixture as unknown as Fixture, envelope);
  return { store, taskId };
}

function storeHolding(
  fixture: Fixture,
  raw: unknown = fixture.envelope,
): { store: MemoryStore; taskId: string; fixture: Fixture } {
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

type Raw = Record<string, unknown> & {
  snapshot: {
    value: unknown;
    context: Record<string, unknown> & { batch: { calls: Record<string, unknown>[] } | null };
  };
};

function rawFixture(name: string, version: string): Raw {
  return JSON.parse(readFileSync(join(ROOT, version, `${name}.json`), 'utf8')).envelope as Raw;
}

describe('migration of older envelopes', () => {
  it('brings an agent/1 envelope to agent/8 on read: the fields each version added, nothing else', async () => {
    const { store, taskId, fixture } = storeWith('done-booking');
    const loaded = await store.load(taskId);
    expect(loaded?.machineVersion).toBe('agent/8');
    const context = loaded!.snapshot.context;
    // agent/2 added writtenKeys; agent/4 a mandate, the waits' fields, denials, money and the new policy fields.
    expect(context).toMatchObject({
      writtenKeys: [],
      mandate: null,
      questionExpiresAt: null,
      review: null,
      outage: null,
      denied: [],
    });
    expect(context.budget.limits.money).toBe(Number.MAX_SAFE_INTEGER);
    expect(context.budget.used.money).toBe(0);
    // agent/5: the model of its decisions, unrecorded before.
    expect(context.provenance).toEqual({ model: { id: 'unrecorded', version: null }, prompt: null });
    // agent/6: nothing unverified or exposed yet, the identifiers of the goal and the principal, the safe policy.
    expect(context).toMatchObject({ unverified: [], exposure: { untrustedInput: null, sensitiveData: null } });
    expect(context.observedIds).toEqual(['E17', 'acme']);
    // agent/7: no write remembered for compensation (none was recorded), nothing being undone.
    expect(context).toMatchObject({ compensable: [], unwinding: null, away: null, succeeded: [], offered: null });
    // Sub-tasks (schema defaults, no version bump): every tool, no parent, no children.
    expect(context).toMatchObject({ tools: null, parent: null, subtasks: [] });
    // Compaction as a chart state (schema default): no threshold, no summary; it compacts only after a refusal.
    expect(context.compaction).toEqual(NO_COMPACTION);
    const {
      writtenKeys: _w,
      mandate: _m,
      questionExpiresAt: _q,
      review: _r,
      outage: _o,
      denied: _d,
      provenance: _p,
      batch,
      budget,
      policy,
      ...migrated
    } = context;
    const {
      unverified: _u,
      exposure: _e,
      observedIds: _i,
      compensable: _c,
      unwinding: _x,
      away: _a,
      succeeded: _s,
      offered: _f,
      plan: _plan,
      workflow: _workflow,
      tools: _tools,
      parent: _parent,
      subtasks: _subtasks,
      forkedFrom: _forkedFrom,
      compaction: _compaction,
      ...rest
    } = migrated;
    const {
      batch: oldBatch,
      budget: oldBudget,
      policy: oldPolicy,
      ...oldRest
    } = (fixture.envelope as unknown as Raw).snapshot.context as Record<string, any>;
    expect(rest).toEqual(oldRest);
    // A task stored before forks reads as no copy.
    expect(_forkedFrom).toBeNull();
    expect(policy).toEqual({ ...DEFAULT_POLICY, ...oldPolicy });
    expect(budget).toEqual({
      ...oldBudget,
      limits: { ...oldBudget.limits, money: Number.MAX_SAFE_INTEGER },
      used: { ...oldBudget.used, money: 0 },
      largestTurn: { tokens: 0, costMicros: 0 },
    });
    // agent/3 named the current call; agent/4 turned needsConfirmation into the requirement it stood for.
    const calls = (oldBatch.calls as Record<string, unknown>[]).map(({ needsConfirmation, ...call }) => ({
      ...call,
      confirmation: needsConfirmation ? REQUESTER : null,
      runAs: null,
      resendAfter: null,
    }));
    expect(batch).toEqual({ ...oldBatch, calls, current: null });
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
    expect(
      calls.map(({ phase: _p, confirmation, runAs: _r, resendAfter: _s, ...c }) => ({
        ...c,
        needsConfirmation: confirmation !== null,
      })),
    ).toEqual(old.map(({ phase: _p, ...c }) => c));
    if (name === 'waiting-for-confirmation') {
      expect(calls[0]!.confirmation).toEqual(REQUESTER);
      expect(loaded.snapshot.context.pendingConfirmation).toMatchObject({
        approverScope: null,
        approvalsRequired: 1,
        approvals: [],
      });
    }
  });

  it('reopens an agent/3 task that ended in reviewRequired: it waits for a reviewer, who resolves it', async () => {
    const fixture = JSON.parse(readFileSync(join(ROOT, 'agent-3', 'mid-write.json'), 'utf8')) as Fixture;
    const envelope = fixture.envelope as unknown as Raw;
    const context = envelope.snapshot.context as Record<string, any>;
    const call = context.batch.calls[0];
    const summary = `the outcome of reserve_room could not be established; look it up with idempotency key ${call.idempotencyKey}`;
    // As agent/3 stored a task its lookups could not settle: final, the write finished as unknown.
    Object.assign(envelope.snapshot, { value: 'reviewRequired', status: 'done', children: {} });
    Object.assign(call, {
      phase: 'finished',
      observation: {
        callId: call.callId,
        tool: call.tool,
        ok: false,
        code: 'outcome_unknown',
        summary,
        retryable: false,
      },
    });
    context.batch.closed = true;
    context.batch.current = null;
    context.outcome = {
      status: 'review_required',
      reason: {
        code: 'write_outcome_unknown',
        message: summary,
        detail: { tool: call.tool, idempotencyKey: call.idempotencyKey, callId: call.callId },
      },
      answer: null,
      evidence: [],
    };
    const { store, taskId } = storeHolding(fixture);
    const bookings = new BookingService();
    const h = harness({ store, bookings, script: bookingScript(), clock: new ManualClock(DEMO_NOW) });
    const status = await h.orchestrator.resume(taskId);
    expect(status).toMatchObject({
      state: 'review_required',
      outcome: null,
      review: { callId: call.callId, reason: 'write_outcome_unknown', summary },
    });
    // A reviewer looked it up: the booking exists. It becomes the write's result, and the task finishes.
    const booking = {
      status: 'confirmed',
      booking_id: 'B204',
      room_id: 'R7',
      start_at: call.args.start_at,
      end_at: call.args.end_at,
    };
    const resolved = await h.orchestrator.resolveReview(taskId, REVIEWER, { resolution: 'happened', result: booking });
    expect(resolved.accepted).toBe(true);
    const done = await h.orchestrator.settled(taskId);
    expect(done).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } } });
    expect(done.evidence.at(-1)?.fields).toEqual({ status: 'confirmed', booking_id: 'B204' });
    expect(bookings.reserveRequests).toEqual([]);
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

describe('migration of agent/5 tasks in flight to agent/6', () => {
  it('says why a pending confirmation was asked (the tool rule) and the risk of its tool, and runs it once confirmed', async () => {
    const { store, taskId } = storeWith('waiting-for-confirmation', 'agent-5');
    const refunds = new RefundDesk();
    const h = harness({ store, refunds, script: refundScript(), clock: new ManualClock(DEMO_NOW) });
    const waiting = await h.orchestrator.status(taskId);
    expect(waiting.pendingConfirmation).toMatchObject({ reasons: ['tool_rule'], risk: 'writable' });
    const loaded = (await store.load(taskId))!;
    expect(loaded.machineVersion).toBe('agent/8');
    expect(loaded.snapshot.context.policy).toMatchObject({
      unconfirmedMoneyUpTo: 0,
      ruleOfTwo: 'confirm',
      maxUnknownReads: 2,
      loosened: [],
    });
    expect(loaded.snapshot.context.batch!.calls[0]!.confirmation).toMatchObject({
      reasons: ['tool_rule'],
      risk: 'writable',
    });
    await h.orchestrator.confirm(taskId, SUPPORT, waiting.pendingConfirmation!);
    expect((await h.orchestrator.settled(taskId)).state).toBe('done');
    expect(refunds.refunds.map((r) => r.amountCents)).toEqual([19_900]);
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
    await expectCorrupt(
      envelope,
      field === 'taskId' ? /invalid envelope at taskId|belongs to task/ : new RegExp(`invalid envelope at ${field}`),
    );
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
    await expect(h.orchestrator.confirm(taskId, SUPPORT, { id: 'x', argsHash: 'y' })).rejects.toBeInstanceOf(
      TaskQuarantinedError,
    );
    expect(await store.quarantined(taskId)).toMatch(reason);
  }
});

describe.each(['agent-1', 'agent-2', 'agent-3', 'agent-4', 'agent-5', 'agent-6', 'agent-7', 'agent-8'])(
  'envelopes of %s',
  (version) => {
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
      // Up to agent/3 the fixture's model asked for 999.00; from agent/4 the refund mandate keeps it to 199.00.
      const fromAgent4 = ['agent-4', 'agent-5', 'agent-6', 'agent-7', 'agent-8'].includes(version);
      const cents = fromAgent4 ? 19_900 : 99_900;
      const reason = fromAgent4 ? 'projector arrived broken' : 'manager approved per note';
      expect(waiting.pendingConfirmation?.summary).toBe(
        `Refund ${(cents / 100).toFixed(2)} on order O-1001 (${reason})`,
      );
      const result = await h.orchestrator.confirm(taskId, SUPPORT, waiting.pendingConfirmation!);
      expect(result.accepted).toBe(true);
      const done = await h.orchestrator.settled(taskId);
      expect(done.state).toBe('done');
      expect(refunds.refunds.map((r) => r.amountCents)).toEqual([cents]);
    });

    it('restores a task stopped in the middle of a write: reconciled by its idempotency key, written once', async () => {
      const { store, taskId, fixture } = storeWith('mid-write', version);
      const bookings = new BookingService();
      const h = harness({ store, bookings, script: bookingScript(), clock: new ManualClock(DEMO_NOW) });
      await h.orchestrator.resume(taskId);
      const status = await h.orchestrator.settled(taskId);
      expect(status.state).toBe('done');
      const key = (
        fixture.envelope as unknown as { snapshot: { context: { batch: { calls: { idempotencyKey: string }[] } } } }
      ).snapshot.context.batch.calls[0]!.idempotencyKey;
      // This process's booking service never saw the first attempt: not found, then the same key once.
      expect(bookings.reserveRequests.map((r) => r.idempotencyKey)).toEqual([key]);
      expect(bookings.bookings).toHaveLength(1);
    });
  },
);

describe.each(['agent-1', 'agent-2', 'agent-3', 'agent-4', 'agent-5', 'agent-6', 'agent-7'])(
  'time travel over a journal of %s (written before transitions were recorded)',
  (version) => {
    it('leaves the state unknown between steps, takes the current one at the end, and records what comes after', async () => {
      const { store, taskId, fixture } = storeWith('waiting-for-confirmation', version);
      const old = fixture.audit as AuditEntry[];
      expect(old.some((e) => 'moves' in e)).toBe(false);
      const stored = (await store.load(taskId))!;
      for (let n = 1; n < old.length; n++)
        expect(replayAudit(old, n, stored.summary.stateValue), `at ${n}`).toMatchObject({
          state: null,
          recorded: false,
        });
      const end = replayAudit(old, old.length, stored.summary.stateValue);
      expect(end).toMatchObject({ state: 'executing.awaitingConfirmation', status: 'waiting_for_confirmation' });
      // The data the entries hold is folded as before: the pending confirmation, the budget used.
      expect(end.pendingConfirmation?.id).toBe(stored.snapshot.context.pendingConfirmation?.id);
      expect(end.budget.used.modelTurns).toBe(stored.snapshot.context.budget.used.modelTurns);

      const h = harness({ store, refunds: new RefundDesk(), script: refundScript(), clock: new ManualClock(DEMO_NOW) });
      const waiting = await h.orchestrator.status(taskId);
      await h.orchestrator.confirm(taskId, SUPPORT, waiting.pendingConfirmation!);
      expect((await h.orchestrator.settled(taskId)).state).toBe('done');
      const audit = (await h.orchestrator.audit(taskId)) as AuditEntry[];
      expect(audit.slice(old.length).every((e) => typeof e.moves === 'string')).toBe(true);
      const after = replayAudit(audit);
      expect(after).toMatchObject({ state: 'done', status: 'done', recorded: true });
      // The transitions this build took, from the state the first of them left (read off the chart).
      expect(after.transitions.length).toBeGreaterThan(0);
      expect(after.transitions.every((t) => t.seq >= old.length)).toBe(true);
      expect(after.visited).toContain('executing.writing');
    });
  },
);

describe.each(['agent-7', 'agent-8'])('time travel over a journal that recorded its transitions (%s)', (version) => {
  it('replays with this build’s chart: a changed chart must still read it (or say it cannot)', async () => {
    const { store, taskId, fixture } = storeWith('recorded-booking', version);
    const audit = fixture.audit as AuditEntry[];
    expect(audit.every((e) => typeof e.moves === 'string')).toBe(true);
    const stored = (await store.load(taskId))!;
    const replayed = replayAudit(audit);
    // Read with the table of the chart that wrote it (src/audit/chartHistory.ts), current or not: a failure here means
    // the table of that chart was lost.
    expect(replayed).toMatchObject({ state: stored.summary.stateValue, status: 'done', recorded: true });
    // An earlier chart's numbering is not today's diagrams': its transitions carry no diagram number.
    const current = chartMoves(agentMachine).fingerprint === replayed.chart;
    expect(replayed.transitions.every((t) => (current ? typeof t.edge === 'number' : t.edge === null))).toBe(true);
    expect(replayed.visited).toEqual(expect.arrayContaining(['vetting.validating', 'executing.writing']));
    expect(replayed.transitions.map((t) => t.to).at(-1)).toBe('done');
  });
});

describe.each(['agent-3', 'agent-4', 'agent-5'])('envelopes of %s (from agent/3 on)', (version) => {
  it('restores a task stopped while a tool validated its call: the validation runs again and the task goes on', async () => {
    const { store, taskId } = storeWith('mid-validation', version);
    const bookings = new BookingService();
    const h = harness({ store, bookings, script: bookingScript(), clock: new ManualClock(DEMO_NOW) });
    await h.orchestrator.resume(taskId);
    const status = await h.orchestrator.settled(taskId);
    expect(status).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } } });
    expect(bookings.bookings).toHaveLength(1);
    const audit = await h.orchestrator.audit(taskId);
    // The restored validation runs again (entry actions are not replayed): one note of the check, one decision.
    expect(audit.filter((e) => e.kind === 'check_started' && e.tool === 'find_available_rooms')).toHaveLength(1);
    expect(
      audit.filter((e) => e.kind === 'gate' && e.gate === 'business' && e.tool === 'find_available_rooms'),
    ).toHaveLength(1);
  });
});

describe.each(['agent-4', 'agent-5'])('envelopes of %s (agent/4 and agent/5: stored mid-re-check)', (version) => {
  it('restores a task stopped while its write was re-checked: the re-check runs again, then the write, once', async () => {
    const { store, taskId } = storeWith('mid-recheck', version);
    const bookings = new BookingService();
    const h = harness({ store, bookings, script: bookingScript(), clock: new ManualClock(DEMO_NOW) });
    await h.orchestrator.resume(taskId);
    const status = await h.orchestrator.settled(taskId);
    expect(status).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } } });
    expect(bookings.bookings).toHaveLength(1);
    const audit = await h.orchestrator.audit(taskId);
    expect(audit.filter((e) => e.kind === 'check_started' && e.gate === 'recheck')).toHaveLength(1);
    expect(audit.filter((e) => e.kind === 'tool_started' && e.tool === 'reserve_room')).toHaveLength(1);
  });
});

describe.each(['agent-4', 'agent-5', 'agent-6', 'agent-7', 'agent-8'])(
  'envelopes of %s (from agent/4 on)',
  (version) => {
    it('restores a task waiting for a reviewer; the task user cannot resolve it, a reviewer can', async () => {
      const { store, taskId } = storeWith('review-required', version);
      const bookings = new BookingService();
      const h = harness({ store, bookings, script: bookingScript(), clock: new ManualClock(DEMO_NOW) });
      const waiting = await h.orchestrator.status(taskId);
      expect(waiting).toMatchObject({
        state: 'review_required',
        review: { reason: 'write_outcome_unknown', tool: 'reserve_room' },
      });
      const own = await h.orchestrator.resolveReview(
        taskId,
        { ...E17, scopes: [...E17.scopes, 'tasks:review'] },
        { resolution: 'not_happened' },
      );
      expect(own).toMatchObject({ accepted: false, code: 'not_a_reviewer' });
      const retried = await h.orchestrator.resolveReview(taskId, REVIEWER, {
        resolution: 'retry',
        note: 'the service has no record',
      });
      expect(retried.accepted).toBe(true);
      const done = await h.orchestrator.settled(taskId);
      expect(done).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } } });
      // Retried with the key the held write had: one booking under it.
      expect(bookings.reserveRequests.map((r) => r.idempotencyKey)).toEqual([waiting.review!.idempotencyKey]);
      expect(bookings.bookings).toHaveLength(1);
    });

    it('restores a task waiting out a model outage: the sweep wakes it when due and the task goes on', async () => {
      const { store, taskId } = storeWith('waiting-for-model', version);
      const clock = new ManualClock(DEMO_NOW);
      const h = harness({ store, script: bookingScript(), clock });
      const waiting = await h.orchestrator.status(taskId);
      expect(waiting.state).toBe('waiting_for_model');
      expect(await h.orchestrator.expireDue()).toBe(0);
      await clock.set(waiting.outage!.wakeAt);
      expect(await h.orchestrator.expireDue()).toBe(1);
      const done = await h.orchestrator.settled(taskId);
      expect(done).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } }, outage: null });
    });
  },
);

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

describe('an agent/7 task stored mid-vetting, in a state agent/8 removed', () => {
  // Made from agent/7's own snapshot of the booking in `vetting.checkingPermission` (the reservation had passed the
  // schema, the mandate and business validation): agent/8 judges a call's synchronous gates in `vetting.judging`.
  it('is placed in vetting.judging and the call judged again from the first gate; booked once, done', async () => {
    const { store, taskId, fixture } = storeWith('mid-vetting', 'agent-7');
    const loaded = (await store.load(taskId))!;
    expect(loaded.machineVersion).toBe('agent/8');
    expect(loaded.snapshot.value).toEqual({ vetting: 'judging' });
    expect(loaded.snapshot.context.batch?.current).toBeNull();
    const bookings = new BookingService();
    const h = harness({ store, bookings, script: bookingScript(), clock: new ManualClock(DEMO_NOW) });
    await h.orchestrator.resume(taskId);
    const status = await h.orchestrator.settled(taskId);
    expect(status).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } } });
    expect(bookings.bookings).toHaveLength(1);
    const audit = (await h.orchestrator.audit(taskId)) as AuditEntry[];
    const gates = audit.flatMap((e) => (e.kind === 'gate' && e.tool === 'reserve_room' ? [e] : []));
    const after = gates.filter((e) => audit.indexOf(e) >= fixture.audit.length);
    // Judged again on its validated arguments (the same hash): every gate passes, once more, then it runs once.
    expect(after.slice(0, 4).map((e) => `${e.gate}:${e.decision}`)).toEqual([
      'schema:pass',
      'mandate:pass',
      'business:pass',
      'permission:pass',
    ]);
    const hashes = new Set(gates.map((e) => e.argsHash));
    expect(hashes.size).toBe(1);
    expect(audit.filter((e) => e.kind === 'tool_started' && e.tool === 'reserve_room')).toHaveLength(1);
  });

  // The same snapshot in each state agent/8 removed, under a session that lost the booking scope since: whichever
  // gate it was stored before, the call is judged again and refused; nothing runs unjudged.
  it.each(['choosing', 'checkingSchema', 'checkingSubtask', 'checkingMandate', 'checkingPermission'])(
    'judges a call stored in vetting.%s again: a scope lost since refuses it, nothing is booked',
    async (state) => {
      const fixture = JSON.parse(readFileSync(join(ROOT, 'agent-7', 'mid-vetting.json'), 'utf8')) as Fixture;
      const envelope = structuredClone(fixture.envelope) as unknown as Raw;
      envelope.snapshot.value = { vetting: state };
      const context = envelope.snapshot.context as unknown as { principal: { scopes: string[] } };
      context.principal.scopes = context.principal.scopes.filter((scope) => scope !== 'rooms:book');
      const { store } = storeHolding(fixture, envelope);
      const taskId = fixture.envelope.taskId;
      const bookings = new BookingService();
      const h = harness({ store, bookings, script: bookingScript(), clock: new ManualClock(DEMO_NOW) });
      await h.orchestrator.resume(taskId);
      await h.orchestrator.settled(taskId);
      expect(bookings.bookings).toHaveLength(0);
      const audit = (await h.orchestrator.audit(taskId)) as AuditEntry[];
      const after = audit.slice(fixture.audit.length);
      expect(after.filter((e) => e.kind === 'tool_started' && e.tool === 'reserve_room')).toHaveLength(0);
      expect(
        after.flatMap((e) => (e.kind === 'gate' && e.tool === 'reserve_room' ? [`${e.gate}:${e.decision}`] : [])),
      ).toContain('permission:reject');
    },
  );
});

describe.each(['agent-7', 'agent-8'])('envelopes of %s (from agent/7 on)', (version) => {
  it('restores a task stopped with its undo in flight: looked up by its key, sent once, the outcome says so', async () => {
    const { store, taskId } = storeWith('mid-undo', version);
    // The service of the new process holds the booking the task made (its undo never reached the old one).
    const bookings = new BookingService();
    const booked = await bookings.reserve(
      { ...MEETING_BOOKING, requesterId: 'E17', idempotencyKey: 'the-task-booking' },
      new AbortController().signal,
    );
    expect(booked).toMatchObject({ status: 'confirmed', booking: { booking_id: 'B204' } });
    const kitchen = new CateringDesk();
    const orchestrator = createOrchestrator({
      tools: sagaTools(bookings, kitchen),
      mandates: [bookingMandate],
      model: scriptedModel([]),
      store,
      clock: new ManualClock(DEMO_NOW),
    });
    await orchestrator.resume(taskId);
    const status = await orchestrator.settled(taskId);
    expect(status).toMatchObject({ state: 'failed', outcome: { reason: { code: 'goal_not_met' } } });
    expect(status.outcome?.compensations?.map((c) => `${c.tool}:${c.result}`)).toEqual(['reserve_room:compensated']);
    expect(bookings.cancelRequests).toEqual([{ bookingId: 'B204', idempotencyKey: expect.any(String) }]);
    const audit = await orchestrator.audit(taskId);
    expect(audit.filter((e) => e.kind === 'write_lookup').map((e) => e.tool)).toEqual(['cancel_booking']);
    await orchestrator.close();
  });

  it('restores a parent waiting for its sub-task and the child waiting for a confirmation: one refund, parent done', async () => {
    const parent = JSON.parse(readFileSync(join(ROOT, version, 'awaiting-subtask.json'), 'utf8')) as Fixture;
    const child = JSON.parse(readFileSync(join(ROOT, version, 'subtask-child.json'), 'utf8')) as Fixture;
    const { store } = storeHolding(parent);
    rawRows(store).set(child.envelope.taskId, {
      envelope: JSON.stringify(child.envelope),
      revision: child.envelope.revision,
      summary: child.envelope.summary,
      audit: child.audit.map((e) => JSON.stringify(e)),
      transcript: child.transcript.map((e) => JSON.stringify(e)),
    });
    const desk = new RefundDesk();
    const orchestrator = createOrchestrator({
      tools: [getOrder(desk), refundOrder(desk, { confirmAboveCents: 10_000 }), delegateRefund],
      mandates: [refundMandate],
      model: scriptedModel(delegatedScript()),
      store,
      clock: new ManualClock(DEMO_NOW),
      expirySweepMs: 0,
    });
    await orchestrator.recover();
    const waiting = await orchestrator.status('delegated-1');
    expect(waiting).toMatchObject({ state: 'waiting_for_subtask', stateValue: 'executing.awaitingSubtask' });
    const childId = waiting.children[0]!.childTaskId;
    expect(childId).toBe(child.envelope.taskId);
    const pending = (await orchestrator.status(childId)).pendingConfirmation!;
    expect((await orchestrator.confirm(childId, E17_SUPPORT, pending)).accepted).toBe(true);
    await until(async () => (await orchestrator.status('delegated-1')).outcome !== null);
    expect((await orchestrator.status('delegated-1')).state).toBe('done');
    expect(desk.refunds).toHaveLength(1);
    expect(await store.list()).toHaveLength(2);
    await orchestrator.close();
  });

  it('restores a task whose plan waits for approval: approved after the restart, each step run once', async () => {
    const { store, taskId } = storeWith('awaiting-plan-approval', version);
    const desk = new RefundDesk();
    const orchestrator = createOrchestrator({
      tools: [getOrder(desk), refundOrder(desk, { confirmAboveCents: 10_000 })],
      mandates: [refundMandate],
      model: scriptedModel(plannedRefundScript()),
      store,
      clock: new ManualClock(DEMO_NOW),
      limits: { money: 19_900 },
      policy: { planning: { mode: 'plan_first' } },
    });
    await orchestrator.resume(taskId);
    let status = await orchestrator.status(taskId);
    expect(status).toMatchObject({
      state: 'waiting_for_confirmation',
      stateValue: 'awaitingPlanApproval',
      plan: { id: 'plan-1', status: 'awaiting_approval' },
      pendingConfirmation: { tool: 'propose_plan', reasons: ['plan'] },
    });
    expect((await orchestrator.confirm(taskId, E17_SUPPORT, status.pendingConfirmation!)).accepted).toBe(true);
    status = await orchestrator.settled(taskId);
    // The refund of 199.00 is confirmed by its own rule.
    expect(status.pendingConfirmation?.tool).toBe('refund_order');
    await orchestrator.confirm(taskId, E17_SUPPORT, status.pendingConfirmation!);
    status = await orchestrator.settled(taskId);
    expect(status.state).toBe('done');
    expect(desk.refunds).toHaveLength(1);
    expect(status.outcome?.plan?.steps.map((step) => `${step.id}:${step.status}`)).toEqual([
      'read_order:succeeded',
      'refund:succeeded',
    ]);
    await orchestrator.close();
  });
});
