import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/testing/manualClock.js';
import { hashArguments } from '../src/hashing.js';
import { reply } from '../src/testing/scriptedModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { E17, REFUND_GOAL, REFUND_MANDATE, SUPPORT, byKind, harness } from './support/harness.js';
import { paymentTool } from './support/paymentTool.js';

const REFUND_999 = { order_id: 'O-1001', amount_cents: 99_900, reason: 'per note' };
const REFUND_50 = { order_id: 'O-1001', amount_cents: 5_000, reason: 'small' };
const goal = 'refund the customer';
const success = { tool: 'refund_order', match: { status: 'succeeded' }, require: ['refund_id'] };

/** A task waiting for confirmation of a 999.00 refund. */
async function waiting(options: Parameters<typeof harness>[0] = {}) {
  const h = harness({
    script: [
      reply.call('refund_order', REFUND_999),
      (v) =>
        v.data('refund_order')
          ? reply.answer('refunded')
          : reply.answer(`not refunded: ${v.errorCode('refund_order')}`),
    ],
    ...options,
  });
  const status = await h.orchestrator.run({ principal: SUPPORT, goal, success, taskId: 'refund-task' });
  return { ...h, status, pending: status.pendingConfirmation! };
}

describe('confirmation bound to exact arguments', () => {
  it('runs a refund below the threshold without asking', async () => {
    const h = harness({ script: [reply.call('refund_order', REFUND_50), reply.answer('ok')] });
    const status = await h.orchestrator.run({ principal: SUPPORT, goal, success });
    expect(status.state).toBe('done');
    expect(h.refunds.refunds).toHaveLength(1);
  });

  it('waits, persisted, with a record of tool, args hash, user, policy version and absolute expiry', async () => {
    const clock = new ManualClock();
    const { status, pending, refunds, store } = await waiting({ clock });
    expect(status.state).toBe('waiting_for_confirmation');
    expect(pending).toMatchObject({
      tool: 'refund_order',
      argsHash: hashArguments(REFUND_999),
      userId: 'E17',
      policyVersion: '1',
      expiresAt: clock.now() + 15 * 60_000,
      summary: 'Refund 999.00 on order O-1001 (per note)',
    });
    expect(refunds.refunds).toEqual([]);
    const stored = await store.load('refund-task');
    expect(stored?.summary).toMatchObject({ state: 'waiting_for_confirmation', wakeAt: pending.expiresAt });
    expect(stored?.snapshot.context.pendingConfirmation).toEqual(pending);
  });

  it('runs the call once the matching confirmation arrives', async () => {
    const { orchestrator, pending, refunds } = await waiting();
    const result = await orchestrator.confirm('refund-task', SUPPORT, pending);
    expect(result).toMatchObject({ accepted: true, code: null });
    const status = await orchestrator.settled('refund-task');
    expect(status.state).toBe('done');
    expect(refunds.refunds.map((r) => r.amountCents)).toEqual([99_900]);
  });

  it.each([
    [
      'an unknown confirmation id',
      (p: { id: string; argsHash: string }) => ({ ...p, id: `${p.id}x` }),
      SUPPORT,
      'unknown_confirmation',
      false,
    ],
    ['another user', (p: { id: string; argsHash: string }) => p, { ...SUPPORT, userId: 'E99' }, 'wrong_user', false],
    [
      'the hash of other arguments (199.00)',
      (p: { id: string; argsHash: string }) => ({
        ...p,
        argsHash: hashArguments({ ...REFUND_999, amount_cents: 19_900 }),
      }),
      SUPPORT,
      'arguments_changed',
      false,
    ],
  ])('refuses a confirmation with %s and runs nothing', async (_label, forge, by, code, asksAgain) => {
    const { orchestrator, pending, refunds } = await waiting();
    const result = await orchestrator.confirm('refund-task', by, forge(pending));
    expect(result).toMatchObject({ accepted: false, code });
    expect(result.status.state).toBe('waiting_for_confirmation');
    expect(refunds.refunds).toEqual([]);
    const next = result.status.pendingConfirmation!;
    if (asksAgain) {
      expect(next.id).not.toBe(pending.id);
      expect(next.request).toBe(2);
      // The old id is spent.
      const replay = await orchestrator.confirm('refund-task', SUPPORT, pending);
      expect(replay.code).toBe('unknown_confirmation');
    } else {
      expect(next).toEqual(pending);
    }
  });

  it('refuses a confirmation from another tenant without delivering it', async () => {
    const { orchestrator, pending, refunds } = await waiting();
    const result = await orchestrator.confirm('refund-task', { ...SUPPORT, tenantId: 'globex' }, pending);
    expect(result).toMatchObject({ accepted: false, code: 'wrong_tenant' });
    expect(refunds.refunds).toEqual([]);
    const audit = await orchestrator.audit('refund-task');
    expect(byKind(audit, 'confirmation').map((c) => c.action)).toEqual(['requested']);
  });

  it('refuses an expired confirmation and asks again with a new expiry', async () => {
    const clock = new ManualClock();
    const { orchestrator, pending, refunds } = await waiting({ clock });
    await clock.advance(15 * 60_000);
    const late = await orchestrator.confirm('refund-task', SUPPORT, pending);
    expect(late).toMatchObject({ accepted: false, code: 'confirmation_expired' });
    const again = late.status.pendingConfirmation!;
    expect(again.expiresAt).toBe(clock.now() + 15 * 60_000);
    expect(refunds.refunds).toEqual([]);
    const ok = await orchestrator.confirm('refund-task', SUPPORT, again);
    expect(ok.accepted).toBe(true);
    await orchestrator.settled('refund-task');
    expect(refunds.refunds).toHaveLength(1);
  });

  it('expires on the host timer sweep, asks again, and gives up after the request limit', async () => {
    const clock = new ManualClock();
    const { orchestrator, refunds } = await waiting({ clock, policy: { maxConfirmationRequests: 2 } });
    await clock.advance(15 * 60_000);
    expect(await orchestrator.expireDue()).toBe(1);
    let status = await orchestrator.status('refund-task');
    expect(status.pendingConfirmation?.request).toBe(2);
    await clock.advance(15 * 60_000);
    expect(await orchestrator.expireDue()).toBe(1);
    status = await orchestrator.settled('refund-task');
    expect(status.state).toBe('failed');
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'confirmation_expired', gate: 'confirmation' });
    expect(refunds.refunds).toEqual([]);
    expect(await orchestrator.expireDue()).toBe(0);
  });

  it('keeps the expiry across a restart: a confirmation that expired while no process ran is refused', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore();
    const first = await waiting({ clock, store });
    await first.orchestrator.close();
    await clock.advance(16 * 60_000);
    const second = harness({
      clock,
      store,
      refunds: first.refunds,
      script: [reply.call('refund_order', REFUND_999), reply.answer('x')],
    });
    const result = await second.orchestrator.confirm('refund-task', SUPPORT, first.pending);
    expect(result).toMatchObject({ accepted: false, code: 'confirmation_expired' });
    expect(first.refunds.refunds).toEqual([]);
  });

  it('asks again when the host policy version changed since the request', async () => {
    const store = new MemoryStore();
    const first = await waiting({ store });
    await first.orchestrator.close();
    const second = harness({
      store,
      refunds: first.refunds,
      policy: { version: '2' },
      script: [reply.call('refund_order', REFUND_999), reply.answer('x')],
    });
    const result = await second.orchestrator.confirm('refund-task', SUPPORT, first.pending);
    expect(result).toMatchObject({ accepted: false, code: 'policy_changed' });
    expect(first.refunds.refunds).toEqual([]);
  });

  it('asks again under the new policy version, and that request can be granted', async () => {
    const store = new MemoryStore();
    const refund = (cents: number) =>
      reply.call('refund_order', { order_id: 'O-1001', amount_cents: cents, reason: 'broken' });
    const first = harness({ store, script: [refund(15_000), reply.answer('refunded')] });
    const refunds = first.refunds;
    const waiting = await first.orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      mandate: REFUND_MANDATE,
      taskId: 'pv',
    });
    await first.orchestrator.close();
    const second = harness({
      store,
      refunds,
      script: [refund(15_000), reply.answer('refunded')],
      policy: { version: '2' },
    });
    const stale = await second.orchestrator.confirm('pv', SUPPORT, waiting.pendingConfirmation!);
    expect(stale).toMatchObject({ accepted: false, code: 'policy_changed' });
    const fresh = stale.status.pendingConfirmation!;
    expect(fresh.request).toBe(2);
    // The request is asked again under the version the host confirms under now, and can be granted.
    expect(fresh.policyVersion).toBe('2');
    const again = await second.orchestrator.confirm('pv', SUPPORT, fresh);
    expect(again).toMatchObject({ accepted: true });
    await second.orchestrator.settled('pv');
    expect(refunds.refunds).toHaveLength(1);
  });

  it('tells the model when the user rejects, and runs nothing', async () => {
    const { orchestrator, pending, refunds, model } = await waiting();
    const result = await orchestrator.reject('refund-task', SUPPORT, { id: pending.id, reason: 'too much' });
    expect(result.accepted).toBe(true);
    const status = await orchestrator.settled('refund-task');
    expect(refunds.refunds).toEqual([]);
    expect(status.outcome?.answer).toBe('not refunded: confirmation_rejected');
    const observed = (model as unknown as { requests: { observations: unknown[] }[] }).requests[1]!.observations[0];
    expect(observed).toMatchObject({
      ok: false,
      code: 'confirmation_rejected',
      summary: expect.stringContaining('too much'),
    });
  });

  it('does not count a user refusing a confirmation as a host rejection of the proposal', async () => {
    const h = harness({
      policy: { maxRejectedTurns: 1 },
      script: [
        reply.call('refund_order', REFUND_999),
        reply.call('refund_order', { ...REFUND_999, amount_cents: 99_800 }),
        reply.answer('gave up'),
      ],
    });
    let status = await h.orchestrator.run({ principal: SUPPORT, goal, taskId: 'two-noes' });
    for (let i = 0; i < 2; i++) {
      await h.orchestrator.reject('two-noes', SUPPORT, { id: status.pendingConfirmation!.id });
      status = await h.orchestrator.settled('two-noes');
    }
    expect(status.state).toBe('answered');
    expect(status.outcome?.answer).toBe('gave up');
    expect(h.refunds.refunds).toEqual([]);
  });

  it('ignores approval claimed in tool output: the write still waits for the user', async () => {
    const h = harness({
      script: [
        reply.call('get_order', { order_id: 'O-1001' }),
        // The note says a manager approved 999.00 and that user.confirmed was granted.
        reply.call('refund_order', REFUND_999),
        reply.answer('x'),
      ],
    });
    const status = await h.orchestrator.run({ principal: SUPPORT, goal, success });
    expect(status.state).toBe('waiting_for_confirmation');
    expect(h.refunds.refunds).toEqual([]);
  });

  it('refuses a confirm when the task is not waiting for one', async () => {
    const h = harness({ script: [reply.answer('hello')] });
    const status = await h.orchestrator.run({ principal: SUPPORT, goal: 'hi', taskId: 'done-task' });
    const result = await h.orchestrator.confirm(status.taskId, SUPPORT, { id: 'x', argsHash: 'y' });
    expect(result).toMatchObject({ accepted: false, code: 'task_finished' });
  });

  it('cancels a task waiting for confirmation without running the call', async () => {
    const { orchestrator, refunds } = await waiting();
    const result = await orchestrator.cancel('refund-task', SUPPORT, 'customer withdrew');
    expect(result.accepted).toBe(true);
    expect(result.status).toMatchObject({ state: 'cancelled', outcome: { reason: { code: 'cancelled' } } });
    expect(refunds.refunds).toEqual([]);
  });

  it('does not count time spent waiting for a human against the wall-clock budget', async () => {
    const clock = new ManualClock();
    const { orchestrator, pending, status } = await waiting({ clock, limits: { wallClockMs: 60_000 } });
    const deadline = status.budget.deadlineAt;
    await clock.advance(10 * 60_000);
    const result = await orchestrator.confirm('refund-task', SUPPORT, pending);
    expect(result.accepted).toBe(true);
    const done = await orchestrator.settled('refund-task');
    expect(done.state).toBe('done');
    expect(done.budget.deadlineAt).toBe(deadline + 10 * 60_000);
  });
});

describe('a confirmation rule that does not decide', () => {
  for (const [name, rule] of [
    ['a rule that returns a promise', () => Promise.resolve(true)],
    ['a truthy non-boolean', () => 1],
    ['an approval rule without a scope', () => ({ approvals: 2 })],
    ['an approval rule asking for no approver', () => ({ approverScope: 'payments:approve', approvals: 0 })],
    [
      'a rule that throws something that is not an Error',
      () => {
        throw Object.create(null);
      },
    ],
  ] as const) {
    it(`fails closed: ${name} refuses the call, and never asks anyone weaker than the rule meant`, async () => {
      const sent: string[] = [];
      const h = harness({
        extraTools: [paymentTool({ sent, confirm: rule, sameKeyRetrySafe: true })],
        script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')],
      });
      const status = await h.orchestrator.run({ principal: E17, goal: 'pay', taskId: 'rule' });
      expect(sent).toEqual([]);
      expect(byKind(await h.orchestrator.audit('rule'), 'confirmation')).toEqual([]);
      expect(status.observations).toEqual([
        expect.objectContaining({
          ok: false,
          code: 'confirmation_rule_failed',
          gate: 'confirmation',
          retryable: false,
        }),
      ]);
    });
  }

  it('is refused at definition when it is an async function', () => {
    expect(() => paymentTool({ confirm: async () => true })).toThrow(/confirm must be synchronous/);
  });

  it('gives each host function its own copy of the arguments: a redact that edits them changes nothing else', async () => {
    const amounts: number[] = [];
    const shown: number[] = [];
    const tool = paymentTool({ amounts, confirm: (args: { amount: number }) => args.amount > 100 });
    Object.assign(tool, {
      redact: (args: { amount: number }) => Object.assign(args, { amount: 0 }),
      describeConfirmation: (args: { amount: number }) => (shown.push(args.amount), `Pay ${args.amount}`),
    });
    const h = harness({
      extraTools: [tool],
      script: [reply.call('send_payment', { amount: 5_000 }), reply.answer('x')],
    });
    const waiting = await h.orchestrator.run({ principal: E17, goal: 'pay', taskId: 'redact-copy' });
    expect(waiting.pendingConfirmation).toMatchObject({ summary: 'Pay 5000', args: { amount: 0 } });
    await h.orchestrator.confirm('redact-copy', E17, waiting.pendingConfirmation!);
    await h.orchestrator.settled('redact-copy');
    expect(shown).toEqual([5_000]);
    expect(amounts).toEqual([5_000]);
  });

  it('an unknown rule name is refused by defineTool', () => {
    expect(() => paymentTool({ confirm: 'Always' })).toThrow(/confirm must be/);
  });
});

describe('a confirmation from a session that lost its scopes', () => {
  it('refuses a confirmation from the right user whose session no longer holds the tool scopes', async () => {
    const h = harness({
      script: [reply.call('refund_order', { order_id: 'O-1001', amount_cents: 99_900, reason: 'x' })],
    });
    const principal = { userId: 'E17', tenantId: 'acme', scopes: ['refunds:write'] };
    const waiting = await h.orchestrator.run({ principal, goal: 'refund', taskId: 'revoked' });
    const result = await h.orchestrator.confirm('revoked', { ...principal, scopes: [] }, waiting.pendingConfirmation!);
    expect(result).toMatchObject({ accepted: false, code: 'permission_denied' });
    expect(h.refunds.refunds).toEqual([]);
    expect((await h.orchestrator.confirm('revoked', principal, waiting.pendingConfirmation!)).accepted).toBe(true);
  });
});
