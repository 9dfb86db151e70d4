/**
 * The re-check right before a write runs: after a confirmation wait (and after a restart), every gate is asked
 * again on the exact arguments that will run, and the arguments are hashed again. Whatever changed since the call
 * was vetted refuses the write, which then never runs.
 */
import { describe, expect, it } from 'vitest';
import type { Principal } from '../machines/context.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { reply } from '../src/testing/index.js';
import { rawRows } from './support/rawRows.js';
import { paymentTool } from './support/paymentTool.js';
import {
  BOOKING_GOAL,
  BOOKING_MANDATE,
  E17,
  REFUND_GOAL,
  REFUND_MANDATE,
  REFUND_SUCCESS,
  SUPPORT,
  byKind,
  harness,
  reserveArgs,
  until,
} from './support/harness.js';

const REVIEWER: Principal = { userId: 'R2', tenantId: 'acme', scopes: ['tasks:review'] };
const refund = (cents: number, order = 'O-1001') =>
  reply.call('refund_order', { order_id: order, amount_cents: cents, reason: 'broken' });

/** A refund task waiting for the confirmation of 150.00 (above the 100.00 threshold). */
async function waitingRefund(options: Parameters<typeof harness>[0] = {}) {
  const h = harness({ script: [refund(15_000), reply.answer('refunded')], ...options });
  const status = await h.orchestrator.run({
    principal: SUPPORT,
    goal: REFUND_GOAL,
    success: REFUND_SUCCESS,
    mandate: REFUND_MANDATE,
    taskId: 'r1',
  });
  expect(status.state).toBe('waiting_for_confirmation');
  return { ...h, status, pending: status.pendingConfirmation! };
}

describe('the re-check before a write', () => {
  it('refuses a confirmed refund whose order changed between the confirmation and the write', async () => {
    const { orchestrator, refunds, pending } = await waitingRefund();
    // Meanwhile, someone else refunds most of the order: 150.00 is no longer refundable.
    await refunds.refund({
      order_id: 'O-1001',
      amount_cents: 120_000,
      reason: 'other',
      tenantId: 'acme',
      requestedBy: 'E42',
      idempotencyKey: 'other',
    });
    const answer = await orchestrator.confirm('r1', SUPPORT, pending);
    expect(answer.accepted).toBe(true);
    const status = await orchestrator.settled('r1');
    expect(refunds.refunds.map((r) => r.requestedBy)).toEqual(['E42']);
    expect(status.state).toBe('failed');
    const audit = await orchestrator.audit('r1');
    const refused = byKind(audit, 'gate').find((g) => g.decision === 'reject');
    expect(refused).toMatchObject({
      gate: 'business',
      code: 'amount_exceeds_refundable',
      summary: expect.stringContaining('checked again before the write; it was not run'),
    });
    expect(byKind(audit, 'check_started').map((c) => c.gate)).toEqual(['business', 'recheck']);
    expect(byKind(audit, 'tool_started')).toEqual([]);
  });

  it('never runs stored arguments that were altered behind the hash the user confirmed', async () => {
    const { orchestrator, refunds, store, pending } = await waitingRefund();
    await orchestrator.close();
    // Someone with access to the store rewrites the pending refund to go to another order, the hashes kept. (An
    // amount above the task's money budget would already stop it there, before the write.)
    const rows = rawRows(store as MemoryStore);
    const row = rows.get('r1')!;
    const envelope = JSON.parse(row.envelope);
    const call = envelope.snapshot.context.batch.calls[0];
    call.args = { order_id: 'O-2002', amount_cents: 15_000, reason: 'broken' };
    row.envelope = JSON.stringify(envelope);
    const second = harness({ store, refunds, script: [refund(15_000), reply.answer('refunded')] });
    // The user confirms what they were shown (the pending confirmation's own id and hash).
    const answer = await second.orchestrator.confirm('r1', SUPPORT, pending);
    expect(answer.accepted).toBe(true);
    const status = await second.orchestrator.settled('r1');
    expect(refunds.refunds).toEqual([]);
    const refused = byKind(await second.orchestrator.audit('r1'), 'gate').filter((g) => g.decision === 'reject');
    expect(refused).toEqual([expect.objectContaining({ gate: 'confirmation', code: 'arguments_changed' })]);
    expect(status.observations).toEqual([
      expect.objectContaining({ ok: false, code: 'arguments_changed', retryable: false }),
    ]);
  });

  it("refuses the write when the principal's session lost the tool's scope after the confirmation", async () => {
    let session: Principal | null = SUPPORT;
    const { orchestrator, refunds, pending } = await waitingRefund({ refreshPrincipal: () => session });
    // The scope is revoked in the host's identity system while the confirmation is on its way (the confirming
    // request itself still carried it).
    session = { ...SUPPORT, scopes: ['orders:read'] };
    const answer = await orchestrator.confirm('r1', SUPPORT, pending);
    expect(answer.accepted).toBe(true);
    const status = await orchestrator.settled('r1');
    expect(refunds.refunds).toEqual([]);
    const refused = byKind(await orchestrator.audit('r1'), 'gate').find((g) => g.decision === 'reject');
    expect(refused).toMatchObject({
      gate: 'permission',
      code: 'permission_denied',
      summary: 'the session of E17 lacks scope refunds:write now; the write was not run',
    });
    expect(status.state).toBe('failed');
  });

  it('refuses the write when the session is gone, or the host cannot say (a throw, another user)', async () => {
    const answers: Record<string, [() => unknown, string, string]> = {
      gone: [() => null, 'permission_denied', 'the session of E17 is no longer valid; the write was not run'],
      throws: [
        () => {
          throw new Error('identity provider down');
        },
        'unavailable',
        'the host could not say whether the session is still valid (Error); the write was not run',
      ],
      otherUser: [
        () => ({ ...SUPPORT, userId: 'E99' }),
        'unavailable',
        'the host answered with a session of another user or tenant; the write was not run',
      ],
    };
    for (const [name, [refresh, code, summary]] of Object.entries(answers)) {
      const h = harness({ script: [refund(5_000), reply.answer('x')], refreshPrincipal: refresh as never });
      const status = await h.orchestrator.run({
        principal: SUPPORT,
        goal: REFUND_GOAL,
        mandate: REFUND_MANDATE,
        taskId: `s-${name}`,
      });
      expect(h.refunds.refunds, name).toEqual([]);
      expect(status.observations[0], name).toMatchObject({ code, summary });
    }
  });

  it('asks the current session right before the write, with a copy of the principal', async () => {
    const asked: Principal[] = [];
    const refresh = (p: Principal) => {
      asked.push(p);
      p.scopes.push('admin');
      return { ...SUPPORT };
    };
    const h = harness({ script: [refund(5_000), reply.answer('refunded')], refreshPrincipal: refresh });
    const status = await h.orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      success: REFUND_SUCCESS,
      mandate: REFUND_MANDATE,
      taskId: 'ask',
    });
    expect(status.state).toBe('done');
    expect(asked).toHaveLength(1);
    expect(status.principal.scopes).toEqual(SUPPORT.scopes);
  });

  it('asks for a new confirmation when the tool now wants another one (approvers) than the call holds', async () => {
    const { orchestrator, refunds, pending, tools } = await waitingRefund();
    // The host tightens the tool after the request: refunds above 100.00 now need an approver.
    const tool = tools.find((t) => t.name === 'refund_order')!;
    Object.assign(tool, {
      confirm: (args: { amount_cents: number }) =>
        args.amount_cents > 10_000 ? { approverScope: 'refunds:approve' } : false,
    });
    const answer = await orchestrator.confirm('r1', SUPPORT, pending);
    expect(answer.accepted).toBe(true);
    const status = await orchestrator.settled('r1');
    expect(status.state).toBe('waiting_for_confirmation');
    expect(status.pendingConfirmation).toMatchObject({
      approverScope: 'refunds:approve',
      approvalsRequired: 1,
      request: 2,
    });
    expect(refunds.refunds).toEqual([]);
    const approver = { userId: 'M1', tenantId: 'acme', scopes: ['refunds:approve'] };
    expect((await orchestrator.confirm('r1', approver, status.pendingConfirmation!)).accepted).toBe(true);
    expect((await orchestrator.settled('r1')).state).toBe('done');
    expect(refunds.refunds.map((r) => r.amountCents)).toEqual([15_000]);
  });

  it('refuses with rate_limited once the tool used up its per-tenant limit, before anything runs', async () => {
    const h = harness({ script: [refund(2_000), refund(3_000), reply.answer('x')] });
    const tool = h.tools.find((t) => t.name === 'refund_order')!;
    Object.assign(tool, { rateLimit: { points: 1, perSeconds: 60 } });
    const status = await h.orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      mandate: REFUND_MANDATE,
      taskId: 'rate',
    });
    expect(h.refunds.refunds.map((r) => r.amountCents)).toEqual([2_000]);
    const refused = byKind(await h.orchestrator.audit('rate'), 'gate').find((g) => g.decision === 'reject');
    expect(refused).toMatchObject({
      gate: 'rate',
      code: 'rate_limited',
      summary: expect.stringMatching(/allows 1 call\(s\) per 60 s for this tenant; try again in \d+ s/),
    });
    expect(status.observations).toEqual([expect.objectContaining({ ok: false, code: 'rate_limited', gate: 'rate' })]);
    // Another tenant has its own count.
    const other = { ...SUPPORT, tenantId: 'globex' };
    h.refunds.orders.set('O-1001', { ...h.refunds.orders.get('O-1001')!, tenantId: 'globex' });
    const second = harness({ refunds: h.refunds, script: [refund(2_000), reply.answer('x')] });
    Object.assign(
      second.tools.find((t) => t.name === 'refund_order')!,
      { rateLimit: { points: 1, perSeconds: 60 } },
    );
    await second.orchestrator.run({ principal: other, goal: REFUND_GOAL, mandate: REFUND_MANDATE, taskId: 'rate-2' });
    expect(h.refunds.refunds).toHaveLength(2);
  });

  it('counts reads against their limit too, before they run', async () => {
    const h = harness({
      script: [
        reply.call('get_order', { order_id: 'O-1001' }),
        reply.call('get_order', { order_id: 'O-1001' }),
        reply.answer('x'),
      ],
    });
    Object.assign(
      h.tools.find((t) => t.name === 'get_order')!,
      { rateLimit: { points: 1, perSeconds: 60 } },
    );
    const status = await h.orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, taskId: 'rate-read' });
    const finished = byKind(await h.orchestrator.audit('rate-read'), 'tool_finished').map((e) => e.code);
    expect(finished).toEqual(['ok', 'rate_limited']);
    expect(status.observations).toEqual([expect.objectContaining({ ok: false, code: 'rate_limited' })]);
  });

  it('runs the re-check again after a restart in the middle of it, and the write once', async () => {
    const store = new MemoryStore();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let validations = 0;
    const first = harness({ store, script: [refund(5_000), reply.answer('refunded')] });
    const tool = first.tools.find((t) => t.name === 'refund_order')!;
    const validate = tool.validate!.bind(tool);
    Object.assign(tool, {
      validate: async (args: never, ctx: never) => {
        validations += 1;
        // The re-check's validation (the second) never answers in the first process.
        if (validations === 2) await gate;
        return validate(args, ctx);
      },
    });
    await first.orchestrator.start({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      success: REFUND_SUCCESS,
      mandate: REFUND_MANDATE,
      taskId: 'restart',
    });
    // The re-check is under way (it saves nothing: what is durable is the model turn that proposed the refund).
    await until(async () => validations === 2);
    await first.orchestrator.close();
    release();
    const second = harness({ store, refunds: first.refunds, script: [refund(5_000), reply.answer('refunded')] });
    await second.orchestrator.resume('restart');
    const status = await second.orchestrator.settled('restart');
    expect(status.state).toBe('done');
    expect(first.refunds.refunds).toHaveLength(1);
  });

  it('does not book an executive room after the session lost rooms:book:executive', async () => {
    // E17 started with the executive scope; the identity system has since revoked it (refreshPrincipal says so).
    const EXECUTIVE: Principal = { ...E17, scopes: [...E17.scopes, 'rooms:book:executive'] };
    const asked: string[][] = [];
    const h = harness({
      script: [
        reply.call('reserve_room', reserveArgs({ room_id: 'R1', expected_version: 3 })),
        reply.answer('booked R1'),
      ],
      refreshPrincipal: (p) => {
        asked.push(p.scopes);
        return { ...E17 }; // the current session: ordinary rooms only
      },
    });
    const status = await h.orchestrator.run({
      principal: EXECUTIVE,
      goal: BOOKING_GOAL,
      mandate: BOOKING_MANDATE,
      taskId: 'exec',
    });
    expect(asked).toHaveLength(1); // the re-check did ask the session
    // The tool's own resource check (authorize: executive rooms need rooms:book:executive) is asked with the principal
    // as the host sees it now, not the one the task started with; so is execute().
    expect(h.bookings.bookings).toEqual([]);
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'permission_denied' });
  });
});

describe('a write sent again (by the review desk or after a lookup)', () => {
  it('the reviewer retry is not sent for a session that is gone', async () => {
    let session: Principal | null = SUPPORT;
    const sent: string[] = [];
    const tool = paymentTool({ sent, sameKeyRetrySafe: true, hang: (n) => n <= 3, timeoutMs: 20 });
    const h = harness({
      extraTools: [tool],
      script: [reply.call('send_payment', { amount: 5 }), reply.answer('paid')],
      refreshPrincipal: () => session,
    });
    const held = await h.orchestrator.run({ principal: SUPPORT, goal: 'pay', taskId: 'rv-session' });
    expect(held.state).toBe('review_required');
    expect(sent).toHaveLength(3);
    // Days later: E17 has left the company; a reviewer finds no payment and asks for a retry.
    session = null;
    await h.orchestrator.resolveReview('rv-session', REVIEWER, { resolution: 'retry' });
    await h.orchestrator.settled('rv-session');
    // The retry passes through executing.resending first: the session is gone, nothing is sent, and the write goes
    // back to the reviewer (its first attempts are still unknown).
    expect(sent).toHaveLength(3);
    expect((await h.orchestrator.status('rv-session')).state).toBe('review_required');
  });

  it('the reviewer retry is counted against the tenant rate limit another task already used up', async () => {
    const sent: string[] = [];
    const tool = Object.assign(paymentTool({ sent, sameKeyRetrySafe: true, hang: (n) => n === 1, timeoutMs: 20 }), {
      rateLimit: { points: 2, perSeconds: 3_600 },
      // The payee cannot be asked: every lookup fails, so the first payment is held for review.
      lookup: async () => {
        throw new Error('payee index down');
      },
    });
    const h = harness({ extraTools: [tool], script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')] });
    expect((await h.orchestrator.run({ principal: SUPPORT, goal: 'pay', taskId: 'rl-held' })).state).toBe(
      'review_required',
    );
    // Another task of the same tenant takes the hour's second point.
    await h.orchestrator.run({ principal: SUPPORT, goal: 'pay 6', taskId: 'rl-other' });
    expect(sent).toHaveLength(2);
    await h.orchestrator.resolveReview('rl-held', REVIEWER, { resolution: 'retry' });
    const status = await h.orchestrator.settled('rl-held');
    // The retry goes through its re-check: rate limited, not sent, and back to the reviewer (still unknown).
    expect(sent).toHaveLength(2);
    expect(status).toMatchObject({
      state: 'review_required',
      review: { reason: 'write_outcome_unknown', summary: expect.stringContaining('allows 2 call(s) per 3600 s') },
    });
  });

  it('the same-key retry after an unknown outcome is not sent for a session revoked meanwhile', async () => {
    let session: Principal | null = SUPPORT;
    const sent: string[] = [];
    const tool = paymentTool({ sent, sameKeyRetrySafe: true, hang: (n) => n === 1, timeoutMs: 50 });
    const h = harness({
      extraTools: [tool],
      script: [reply.call('send_payment', { amount: 5 }), reply.answer('paid')],
      refreshPrincipal: () => session,
    });
    await h.orchestrator.start({ principal: SUPPORT, goal: 'pay', taskId: 'rc-session' });
    await until(() => sent.length === 1);
    session = null; // revoked while the first attempt hangs (it never reached the payee)
    await h.orchestrator.settled('rc-session');
    // Looked up, not found: the same-key retry asks the session again first.
    expect(sent).toHaveLength(1);
  });
});

describe('a write refused at the re-check', () => {
  it('a write refused at the re-check (scope revoked) and proposed again stops the task', async () => {
    const h = harness({
      script: [refund(5_000), refund(5_000), reply.answer('x')],
      refreshPrincipal: () => ({ ...SUPPORT, scopes: ['orders:read'] }),
    });
    const status = await h.orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      mandate: REFUND_MANDATE,
      taskId: 'deny-twice',
    });
    expect(status.outcome?.reason.code).toBe('permission_denied');
    expect(h.refunds.refunds).toEqual([]);
  });

  it('a rate limiter that cannot answer (a broken Redis client) refuses the write', async () => {
    const h = harness({ script: [refund(5_000), reply.answer('x')], rateLimits: { redis: {} } });
    Object.assign(
      h.tools.find((t) => t.name === 'refund_order')!,
      { rateLimit: { points: 10, perSeconds: 60 } },
    );
    const status = await h.orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      mandate: REFUND_MANDATE,
      taskId: 'redis-down',
    });
    expect(h.refunds.refunds).toEqual([]);
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'rate_limited' });
  });
});
