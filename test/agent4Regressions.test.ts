/**
 * Regressions from an adversarial review of machine version agent/4 (the mandate, the re-check before every write,
 * approvers, the review desk, waits, money and rate limits, the agent/3 -> agent/4 migration). Each "finding" block
 * reproduced a guarantee the first agent/4 build broke, and now checks it holds; the "held" blocks are probes that
 * held from the start.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../machines/context.js';
import { DEMO_NOW } from '../examples/booking/bookingService.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { refundScript } from '../examples/booking/scenarios.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { ManualClock, reply } from '../src/testing/index.js';
import { paymentTool } from './support/paymentTool.js';
import { rawRows } from './support/rawRows.js';
import {
  BOOKING_GOAL,
  BOOKING_MANDATE,
  BOOKING_SUCCESS,
  E17,
  SUPPORT,
  harness,
  reserveArgs,
} from './support/harness.js';

const M1: Principal = { userId: 'M1', tenantId: 'acme', scopes: ['refunds:approve'] };

/** A MemoryStore holding an agent/3 fixture exactly as an agent/3 build stored it. */
function agent3Store(name: string): { store: MemoryStore; taskId: string } {
  const fixture = JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures', 'envelopes', 'agent-3', `${name}.json`), 'utf8'));
  const store = new MemoryStore();
  rawRows(store).set(fixture.envelope.taskId, {
    envelope: JSON.stringify(fixture.envelope),
    revision: fixture.envelope.revision,
    summary: fixture.envelope.summary,
    audit: fixture.audit.map((e: unknown) => JSON.stringify(e)),
    transcript: fixture.transcript.map((e: unknown) => JSON.stringify(e)),
  });
  return { store, taskId: fixture.envelope.taskId };
}

// ---------------------------------------------------------------------------------------------------------------
// Findings (failing on purpose)
// ---------------------------------------------------------------------------------------------------------------

describe('finding: a write whose amount is unknown never runs, whatever the money budget', () => {

  it('does not run it in a task migrated from agent/3 (whose money budget is unbounded)', async () => {
    const { store, taskId } = agent3Store('waiting-for-confirmation');
    const refunds = new RefundDesk();
    const h = harness({ store, refunds, script: refundScript(), clock: new ManualClock(DEMO_NOW) });
    Object.assign(h.tools.find((t) => t.name === 'refund_order')!, {
      amount: () => {
        throw new Error('amount service down');
      },
    });
    const waiting = await h.orchestrator.status(taskId);
    await h.orchestrator.confirm(taskId, SUPPORT, waiting.pendingConfirmation!);
    await h.orchestrator.settled(taskId);
    // Was broken: the refund's amount could not be established, yet 999.00 moved (used.money is now MAX_SAFE_INTEGER).
    expect(refunds.refunds).toEqual([]);
  });
});

describe('finding: an authorization hook that is unavailable is not a final denial', () => {
  it('runs the call proposed again after a transient outage of the hook', async () => {
    const sent: string[] = [];
    let asked = 0;
    const authorize = () => {
      asked += 1;
      if (asked === 1) throw new Error('ETIMEDOUT authz.internal');
      return { ok: true as const };
    };
    const h = harness({
      extraTools: [paymentTool({ sent, authorize })],
      script: [reply.call('send_payment', { amount: 5 }), reply.call('send_payment', { amount: 5 }), reply.answer('paid')],
    });
    const status = await h.orchestrator.run({ principal: SUPPORT, goal: 'pay', taskId: 'authz-down' });
    expect(status.observations.length + sent.length).toBeGreaterThan(0);
    // Was broken: refuseForPermission records the `unavailable` verdict in `denied` (gate 'permission'), so the retry is
    // treated as "a denial is final" and stops with permission_denied. Nobody denied anything.
    expect(status.outcome?.reason.code).not.toBe('permission_denied');
    expect(sent).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Probes that held (passing)
// ---------------------------------------------------------------------------------------------------------------

describe('held: the migration of a pending agent/3 confirmation', () => {
  it('asks for an approver when the agent/4 tool wants one; the requester\'s confirmation alone runs nothing', async () => {
    const { store, taskId } = agent3Store('waiting-for-confirmation');
    const refunds = new RefundDesk();
    const h = harness({ store, refunds, script: refundScript(), clock: new ManualClock(DEMO_NOW), refundOptions: { approveAboveCents: 10_000 } });
    const waiting = await h.orchestrator.status(taskId);
    expect((await h.orchestrator.confirm(taskId, SUPPORT, waiting.pendingConfirmation!)).accepted).toBe(true);
    const next = await h.orchestrator.settled(taskId);
    expect(next.pendingConfirmation).toMatchObject({ approverScope: 'refunds:approve', request: 2 });
    expect(refunds.refunds).toEqual([]);
    expect((await h.orchestrator.confirm(taskId, SUPPORT, next.pendingConfirmation!)).code).toBe('self_approval');
    expect((await h.orchestrator.confirm(taskId, M1, next.pendingConfirmation!)).accepted).toBe(true);
    await h.orchestrator.settled(taskId);
    expect(refunds.refunds.map((r) => r.amountCents)).toEqual([99_900]);
  });
});

describe('held: the mandate', () => {
  it('a booking for another slot is refused at vetting and nothing runs, however the model phrases it', async () => {
    const other = reserveArgs({ start_at: '2026-09-28T15:00:00+08:00', end_at: '2026-09-28T16:00:00+08:00' });
    const h = harness({ script: [reply.call('reserve_room', other), reply.answer('x')] });
    const status = await h.orchestrator.run({ principal: E17, goal: BOOKING_GOAL, success: BOOKING_SUCCESS, mandate: BOOKING_MANDATE, taskId: 'slot' });
    expect(h.bookings.reserveRequests).toEqual([]);
    expect(status.observations[0]).toMatchObject({ code: 'outside_mandate' });
  });
});
