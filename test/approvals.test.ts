/**
 * Confirmations by approvers (four eyes and more), and what a rejected or expired confirmation does by the tool's
 * policy. The requester never approves their own request; each approver decides once and must hold the approver
 * scope; every decision records who decided, with which scope.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock, reply } from '../src/testing/index.js';
import { paymentTool } from './support/paymentTool.js';
import { REFUND_GOAL, REFUND_MANDATE, REFUND_SUCCESS, SUPPORT, byKind, harness } from './support/harness.js';

const M1 = { userId: 'M1', tenantId: 'acme', scopes: ['refunds:approve'] };
const M2 = { userId: 'M2', tenantId: 'acme', scopes: ['refunds:approve'] };
const refund = (cents: number) =>
  reply.call('refund_order', { order_id: 'O-1001', amount_cents: cents, reason: 'broken' });

async function waitingForApproval(options: Parameters<typeof harness>[0] = {}) {
  const h = harness({
    script: [refund(15_000), refund(15_000), reply.answer('refunded')],
    refundOptions: { approveAboveCents: 10_000 },
    ...options,
  });
  const status = await h.orchestrator.run({
    principal: SUPPORT,
    goal: REFUND_GOAL,
    success: REFUND_SUCCESS,
    mandate: REFUND_MANDATE,
    taskId: 'a1',
  });
  expect(status.state).toBe('waiting_for_confirmation');
  return { ...h, pending: status.pendingConfirmation! };
}

describe('a four-eyes refund', () => {
  it('is refused to the requester, to a session without the scope and to another tenant, and runs on an approver', async () => {
    const { orchestrator, refunds, pending } = await waitingForApproval();
    expect(pending).toMatchObject({
      userId: 'E17',
      approverScope: 'refunds:approve',
      approvalsRequired: 1,
      approvals: [],
    });
    const own = await orchestrator.confirm(
      'a1',
      { ...SUPPORT, scopes: [...SUPPORT.scopes, 'refunds:approve'] },
      pending,
    );
    expect(own).toMatchObject({ accepted: false, code: 'self_approval' });
    const noScope = await orchestrator.confirm(
      'a1',
      { userId: 'M3', tenantId: 'acme', scopes: ['refunds:write'] },
      pending,
    );
    expect(noScope).toMatchObject({ accepted: false, code: 'missing_approver_scope' });
    const otherTenant = await orchestrator.confirm('a1', { ...M1, tenantId: 'globex' }, pending);
    expect(otherTenant).toMatchObject({ accepted: false, code: 'wrong_tenant' });
    expect(refunds.refunds).toEqual([]);

    const approved = await orchestrator.confirm('a1', M1, pending);
    expect(approved).toMatchObject({ accepted: true, code: null });
    const status = await orchestrator.settled('a1');
    expect(status.state).toBe('done');
    expect(refunds.refunds).toEqual([expect.objectContaining({ amountCents: 15_000, requestedBy: 'E17' })]);

    const audit = await orchestrator.audit('a1');
    const decisions = byKind(audit, 'confirmation').map((c) =>
      `${c.action} ${c.userId ?? '-'} ${c.decidedAs ?? '-'} ${c.scope ?? '-'} ${c.code ?? ''}`.trim(),
    );
    expect(decisions).toEqual([
      'requested - - -',
      'refused E17 requester - self_approval',
      'refused M3 approver refunds:approve missing_approver_scope',
      'granted M1 approver refunds:approve',
    ]);
    const write = byKind(audit, 'gate').find((g) => g.gate === 'confirmation' && g.decision === 'pass');
    expect(write?.summary).toBe(`confirmed by M1 (refunds:approve) (${pending.id}) for exactly these arguments`);
  });

  it('needs as many distinct approvers as the rule asks: one approval is recorded, the same approver twice is not two', async () => {
    const script = [refund(15_000), reply.answer('refunded')];
    const { orchestrator, refunds, pending } = await waitingForApproval({
      script,
      refundOptions: { approveAboveCents: 10_000, approvals: 2 },
    });
    expect(pending.approvalsRequired).toBe(2);
    const first = await orchestrator.confirm('a1', M1, pending);
    expect(first).toMatchObject({
      accepted: true,
      code: 'approval_recorded',
      message: 'approval 1 of 2 recorded; another approver must decide',
    });
    expect(first.status.state).toBe('waiting_for_confirmation');
    expect(first.status.pendingConfirmation!.approvals).toEqual([
      expect.objectContaining({ userId: 'M1', as: 'approver', scope: 'refunds:approve' }),
    ]);
    const again = await orchestrator.confirm('a1', M1, pending);
    expect(again).toMatchObject({ accepted: false, code: 'already_approved' });
    expect(refunds.refunds).toEqual([]);
    const second = await orchestrator.confirm('a1', M2, pending);
    expect(second.accepted).toBe(true);
    expect((await orchestrator.settled('a1')).state).toBe('done');
    expect(refunds.refunds).toHaveLength(1);
    const granted = (await orchestrator.store.load('a1'))!.snapshot.context.batch!.calls[0]!.confirmedBy!;
    expect(granted.decisions.map((d) => d.userId)).toEqual(['M1', 'M2']);
    expect(granted.argsHash).toBe(pending.argsHash);
  });

  it('refuses an approval of other arguments and keeps the request and its approvals as they are', async () => {
    const { orchestrator, pending } = await waitingForApproval({
      refundOptions: { approveAboveCents: 10_000, approvals: 2 },
    });
    await orchestrator.confirm('a1', M1, pending);
    const wrong = await orchestrator.confirm('a1', M2, { id: pending.id, argsHash: 'sha256:other' });
    expect(wrong).toMatchObject({ accepted: false, code: 'arguments_changed' });
    expect(wrong.status.pendingConfirmation).toMatchObject({
      id: pending.id,
      request: 1,
      approvals: [{ userId: 'M1' }],
    });
    // M2, shown the request again, approves what it is for.
    expect((await orchestrator.confirm('a1', M2, pending)).accepted).toBe(true);
  });

  it('lets an approver reject it (the model is told) and the requester withdraw it', async () => {
    const { orchestrator, refunds, pending } = await waitingForApproval();
    const rejected = await orchestrator.reject('a1', M1, { id: pending.id, reason: 'not covered by the warranty' });
    expect(rejected.accepted).toBe(true);
    const next = await orchestrator.settled('a1');
    // The model proposed the same refund again: a new request, which the requester withdraws.
    expect(next.state).toBe('waiting_for_confirmation');
    expect(
      (await orchestrator.transcript('a1')).some(
        (e) =>
          e.kind === 'result' &&
          !e.observation.ok &&
          e.observation.summary.includes('rejected by M1: not covered by the warranty'),
      ),
    ).toBe(true);
    const withdrawn = await orchestrator.reject('a1', SUPPORT, { id: next.pendingConfirmation!.id });
    expect(withdrawn.accepted).toBe(true);
    const outsider = { userId: 'X1', tenantId: 'acme', scopes: [] };
    expect(refunds.refunds).toEqual([]);
    const status = await orchestrator.settled('a1');
    expect(status.state).toBe('failed');
    const rejecters = byKind(await orchestrator.audit('a1'), 'confirmation')
      .filter((c) => c.action === 'rejected')
      .map((c) => `${c.userId} ${c.decidedAs}`);
    expect(rejecters).toEqual(['M1 approver', 'E17 requester']);
    expect(outsider.scopes).toEqual([]);
  });

  it('does not take a rejection from someone who is neither the requester nor an approver', async () => {
    const { orchestrator, pending } = await waitingForApproval();
    const result = await orchestrator.reject(
      'a1',
      { userId: 'X1', tenantId: 'acme', scopes: ['refunds:write'] },
      { id: pending.id },
    );
    expect(result).toMatchObject({ accepted: false, code: 'missing_approver_scope' });
    expect(result.status.state).toBe('waiting_for_confirmation');
    expect(result.status.pendingConfirmation).toEqual(pending);
  });
});

describe('confirmation policies of a tool', () => {
  it('cancels the task on a rejection when the tool says onReject: cancel', async () => {
    const h = harness({ script: [refund(15_000), reply.answer('x')], refundOptions: { cancelOnReject: true } });
    const waiting = await h.orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      mandate: REFUND_MANDATE,
      taskId: 'c1',
    });
    const result = await h.orchestrator.reject('c1', SUPPORT, { id: waiting.pendingConfirmation!.id, reason: 'no' });
    expect(result.accepted).toBe(true);
    expect(result.status).toMatchObject({
      state: 'cancelled',
      outcome: { status: 'cancelled', reason: { code: 'confirmation_rejected' } },
    });
    expect(result.status.outcome!.reason.message).toBe(
      'the call was rejected by E17: no; it was not run; the policy of refund_order cancels the task',
    );
    expect(result.status.observations).toEqual([expect.objectContaining({ ok: false, code: 'cancelled' })]);
    expect(h.refunds.refunds).toEqual([]);
  });

  it('cancels the task when nobody confirms in time and the tool says onExpiry: cancel; a late confirmation too', async () => {
    for (const how of ['timer', 'late confirm'] as const) {
      const clock = new ManualClock();
      const h = harness({ clock, script: [refund(15_000), reply.answer('x')], expirySweepMs: 0 });
      Object.assign(
        h.tools.find((t) => t.name === 'refund_order')!,
        { confirmation: { onExpiry: 'cancel' } },
      );
      const taskId = `e-${how.replace(' ', '-')}`;
      const waiting = await h.orchestrator.run({
        principal: SUPPORT,
        goal: REFUND_GOAL,
        mandate: REFUND_MANDATE,
        taskId,
      });
      await clock.advance(h.orchestrator.policy.confirmationTtlMs);
      if (how === 'timer') expect(await h.orchestrator.expireDue()).toBe(1);
      else
        expect(await h.orchestrator.confirm(taskId, SUPPORT, waiting.pendingConfirmation!)).toMatchObject({
          accepted: false,
          code: 'confirmation_expired',
        });
      const status = await h.orchestrator.status(taskId);
      expect(status, how).toMatchObject({ state: 'cancelled', outcome: { reason: { code: 'confirmation_expired' } } });
      expect(h.refunds.refunds).toEqual([]);
    }
  });

  it('asks again on expiry by default, up to the policy limit, then tells the model', async () => {
    const clock = new ManualClock();
    const h = harness({
      clock,
      script: [refund(15_000), reply.answer('not refunded')],
      expirySweepMs: 0,
      policy: { maxConfirmationRequests: 2 },
    });
    await h.orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, mandate: REFUND_MANDATE, taskId: 'again' });
    await clock.advance(h.orchestrator.policy.confirmationTtlMs);
    await h.orchestrator.expireDue();
    expect((await h.orchestrator.status('again')).pendingConfirmation?.request).toBe(2);
    await clock.advance(h.orchestrator.policy.confirmationTtlMs);
    await h.orchestrator.expireDue();
    const status = await h.orchestrator.settled('again');
    expect(status.state).toBe('answered');
    expect(byKind(await h.orchestrator.audit('again'), 'confirmation').map((c) => c.action)).toEqual([
      'requested',
      'expired',
      'requested',
      'expired',
    ]);
  });
});

describe('approvals of a request that needs two', () => {
  async function waiting(options: Parameters<typeof harness>[0] = {}) {
    const h = harness({
      script: [refund(15_000), refund(15_000), reply.answer('refunded')],
      refundOptions: { approveAboveCents: 10_000, approvals: 2 },
      ...options,
    });
    const status = await h.orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      success: REFUND_SUCCESS,
      mandate: REFUND_MANDATE,
      taskId: 'ap',
    });
    return { ...h, pending: status.pendingConfirmation! };
  }

  it('do not carry over an expiry: the re-asked request starts with none', async () => {
    const clock = new ManualClock();
    const { orchestrator, refunds, pending } = await waiting({ clock, expirySweepMs: 0 });
    expect((await orchestrator.confirm('ap', M1, pending)).code).toBe('approval_recorded');
    await clock.advance(orchestrator.policy.confirmationTtlMs);
    expect(await orchestrator.expireDue()).toBe(1);
    const again = (await orchestrator.status('ap')).pendingConfirmation!;
    expect(again).toMatchObject({ request: 2, approvals: [] });
    // M1's old approval does not count on the new request; M2 alone is one of two.
    expect((await orchestrator.confirm('ap', M2, again)).code).toBe('approval_recorded');
    // And the old request's id is dead.
    expect((await orchestrator.confirm('ap', M1, pending)).code).toBe('unknown_confirmation');
    expect(refunds.refunds).toEqual([]);
  });

  it('never count the requester: not by holding the scope, not after a rejection and a re-proposal', async () => {
    const { orchestrator, refunds, pending } = await waiting();
    const self = { ...SUPPORT, scopes: [...SUPPORT.scopes, 'refunds:approve'] };
    await orchestrator.confirm('ap', M1, pending);
    expect((await orchestrator.confirm('ap', self, pending)).code).toBe('self_approval');
    await orchestrator.reject('ap', SUPPORT, { id: pending.id });
    const next = (await orchestrator.settled('ap')).pendingConfirmation!;
    expect(next.approvals).toEqual([]);
    expect((await orchestrator.confirm('ap', self, next)).code).toBe('self_approval');
    expect((await orchestrator.confirm('ap', M1, next)).code).toBe('approval_recorded');
    expect((await orchestrator.confirm('ap', M1, next)).code).toBe('already_approved');
    expect(refunds.refunds).toEqual([]);
  });

  it('of another tenant do not count', async () => {
    const { orchestrator, pending } = await waiting();
    expect((await orchestrator.confirm('ap', { ...M1, tenantId: 'globex' }, pending)).code).toBe('wrong_tenant');
    expect((await orchestrator.reject('ap', { ...M1, tenantId: 'globex' }, { id: pending.id })).code).toBe(
      'wrong_tenant',
    );
  });

  it('compare user ids exactly (NOTE: "E17 " is another user to the library; the host must canonicalise ids)', async () => {
    const h = harness({
      script: [refund(15_000), reply.answer('refunded')],
      refundOptions: { approveAboveCents: 10_000 },
    });
    const status = await h.orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      mandate: REFUND_MANDATE,
      taskId: 'ws',
    });
    const padded = await h.orchestrator.confirm(
      'ws',
      { userId: 'E17 ', tenantId: 'acme', scopes: ['refunds:approve'] },
      status.pendingConfirmation!,
    );
    expect(padded.accepted).toBe(true);
  });
});

describe('an approval rule that fails', () => {
  const TIERS: Record<number, false | { approverScope: string }> = {
    0: false,
    1: { approverScope: 'payments:approve' },
  };

  it.each([
    [
      'throws',
      (args: { amount: number }) => {
        const tier = TIERS[Math.floor(args.amount / 1_000)];
        if (tier === undefined) throw new Error(`no approval tier for ${args.amount}`);
        return tier;
      },
    ],
    ['returns a promise', () => Promise.resolve({ approverScope: 'payments:approve' })],
  ])('a rule that %s does not let the requester confirm their own payment', async (name, confirm) => {
    const sent: string[] = [];
    const h = harness({
      extraTools: [paymentTool({ sent, confirm })],
      script: [reply.call('send_payment', { amount: 5_000 }), reply.answer('paid')],
    });
    const taskId = `rule-${name.replace(' ', '-')}`;
    const waiting = await h.orchestrator.run({ principal: SUPPORT, goal: 'pay', taskId });
    if (waiting.pendingConfirmation) await h.orchestrator.confirm(taskId, SUPPORT, waiting.pendingConfirmation);
    await h.orchestrator.settled(taskId);
    // A payment of 5,000 needs an approver other than the requester; the model picked an amount the rule cannot
    // evaluate (or the rule is async). Failing closed must not mean the requester's own confirmation: the payment is
    // refused, or keeps the strictest requirement.
    expect(sent).toEqual([]);
  });
});
