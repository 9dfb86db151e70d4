/**
 * Money as a budget: a tool declares how much a call moves; the task's money budget is checked before the call is
 * even offered for confirmation, checked again right before the write, and debited before it runs. No money moves
 * unless the host budgets it.
 */
import { describe, expect, it } from 'vitest';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { reply, scriptedModel } from '../src/testing/index.js';
import { defineTool } from '../src/tool.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { refundOrder } from '../tools/refundOrder.js';
import { paymentTool } from './support/paymentTool.js';
import { REFUND_GOAL, REFUND_MANDATE, REFUND_SUCCESS, SUPPORT, byKind, harness } from './support/harness.js';

const refund = (cents: number) =>
  reply.call('refund_order', { order_id: 'O-1001', amount_cents: cents, reason: 'broken' });

describe('the money budget', () => {
  it('stops before a refund the budget cannot pay, before anyone is asked to confirm it', async () => {
    const h = harness({ script: [refund(19_900), reply.answer('x')], limits: { money: 10_000 } });
    const status = await h.orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, taskId: 'm1' });
    expect(status).toMatchObject({
      state: 'budget_exhausted',
      outcome: { reason: { code: 'budget_exhausted', detail: { dimension: 'money' } } },
    });
    expect(status.outcome!.reason.message).toContain('the money budget is spent (0 of 10000 used)');
    expect(byKind(await h.orchestrator.audit('m1'), 'confirmation')).toEqual([]);
    expect(h.refunds.refunds).toEqual([]);
  });

  it('debits what each write moves, and stops before the one that would overdraw it', async () => {
    const h = harness({ script: [refund(6_000), refund(5_000), reply.answer('x')], limits: { money: 10_000 } });
    const status = await h.orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, taskId: 'm2' });
    expect(h.refunds.refunds.map((r) => r.amountCents)).toEqual([6_000]);
    expect(status.budget.used.money).toBe(6_000);
    expect(status.budget.remaining.money).toBe(4_000);
    expect(status.state).toBe('budget_exhausted');
    const started = byKind(await h.orchestrator.audit('m2'), 'tool_started');
    expect(started.map((e) => e.money)).toEqual([6_000]);
  });

  it('moves no money by default: a tool that declares an amount needs the host to budget it', async () => {
    const desk = new RefundDesk();
    const orchestrator = createOrchestrator({
      tools: [refundOrder(desk)],
      model: scriptedModel([refund(5_000), reply.answer('x')]),
    });
    const status = await orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL });
    expect(status.outcome?.reason).toMatchObject({ code: 'budget_exhausted', detail: { dimension: 'money' } });
    expect(status.budget.limits.money).toBe(0);
    expect(desk.refunds).toEqual([]);
    await orchestrator.close();
  });

  it('does not run a write whose tool cannot say how much it moves (a throw, a fraction, a negative)', async () => {
    for (const [name, amount] of [
      [
        'throws',
        () => {
          throw new Error('no rate');
        },
      ],
      ['fraction', () => 1.5],
      ['negative', () => -1],
    ] as const) {
      const sent: string[] = [];
      const tool = Object.assign(paymentTool({ sent }), { amount });
      const h = harness({ extraTools: [tool], script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')] });
      const status = await h.orchestrator.run({ principal: SUPPORT, goal: 'pay', taskId: `amount-${name}` });
      expect(sent, name).toEqual([]);
      expect(status.outcome?.reason.detail, name).toEqual({ dimension: 'money' });
    }
  });

  it('does not run a write whose amount rule throws when the host budgets Number.MAX_SAFE_INTEGER', async () => {
    const sent: string[] = [];
    const tool = Object.assign(paymentTool({ sent }), {
      amount: () => {
        throw new Error('no exchange rate');
      },
    });
    const h = harness({
      extraTools: [tool],
      script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')],
      limits: { money: Number.MAX_SAFE_INTEGER },
    });
    const status = await h.orchestrator.run({ principal: SUPPORT, goal: 'pay', taskId: 'unlimited' });
    // "A rule that cannot say how much a write moves spends more than any budget holds: the write does not run"
    // (guards/budget.ts), also when the budget is the largest the host can give.
    expect(sent).toEqual([]);
    expect(status.outcome?.reason.detail).toEqual({ dimension: 'money' });
  });

  it('a same-key retry does not debit the money again, and the budget still stops the next write', async () => {
    const sent: string[] = [];
    const amounts: number[] = [];
    const tool = Object.assign(
      paymentTool({ sent, amounts, sameKeyRetrySafe: true, hang: (n) => n === 1, timeoutMs: 20 }),
      { amount: (a: { amount: number }) => a.amount },
    );
    const script = [
      reply.call('send_payment', { amount: 600 }),
      reply.call('send_payment', { amount: 500 }),
      reply.answer('x'),
    ];
    const h = harness({ extraTools: [tool], script, limits: { money: 1_000 } });
    const status = await h.orchestrator.run({ principal: SUPPORT, goal: 'pay', taskId: 'money-retry' });
    expect(amounts).toEqual([600, 600]);
    expect(status.budget.used.money).toBe(600);
    expect(status.state).toBe('budget_exhausted');
  });

  it('counts reads as moving nothing, and refuses an amount on a read', () => {
    expect(() =>
      defineTool({
        name: 'peek',
        description: 'Reads.',
        effect: 'read',
        scopes: [],
        timeoutMs: 10,
        input: paymentTool().input,
        output: paymentTool().output,
        execute: async () => ({ ok: true, value: { status: 'sent' as const } }),
        ...({ amount: () => 1 } as object),
      } as never),
    ).toThrow(/only a write moves money/);
  });
});

describe('a mandate cap and a confirmation threshold', () => {
  // They hold for the task's total, not only per call.
  it('does not refund 3 x 99.00 on a mandate of "at most 199.00" without anyone confirming', async () => {
    const split = (n: number) => ({
      name: 'refund_order',
      args: { order_id: 'O-1001', amount_cents: 9_900, reason: `projector broken (part ${n})` },
    });
    const h = harness({ script: [reply.calls(split(1), split(2), split(3)), reply.answer('refunded')] });
    await h.orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      success: REFUND_SUCCESS,
      mandate: REFUND_MANDATE,
      taskId: 'split',
    });
    const total = h.refunds.refunds.reduce((sum, r) => sum + r.amountCents, 0);
    const confirmations = byKind(await h.orchestrator.audit('split'), 'confirmation');
    // The user asked to refund at most 199.00 on O-1001, and a single refund above 100.00 needs the user's
    // confirmation: three refunds of 99.00 must not add up to 297.00 unasked. Both rules see what the task moved.
    expect(total).toBeLessThanOrEqual(19_900);
    expect(confirmations.length).toBeGreaterThan(0);
  });
});

describe('defineTool and the new rules', () => {
  it.each([
    [
      { confirm: { approverScope: '' } },
      /confirm must be 'never', 'always', \{ never: reason \}, \{ approverScope, approvals\? \} or a function/,
    ],
    [
      { confirm: { approverScope: 'refunds:approve', approvals: 0 } },
      /confirm\.approvals must be a whole number from 1 to 16/,
    ],
    [{ confirmation: { onReject: 'ignore' } }, /confirmation\.onReject must be 'replan' or 'cancel'/],
    [{ confirmation: { onExpiry: 'retry' } }, /confirmation\.onExpiry must be 'ask_again' or 'cancel'/],
    [{ rateLimit: { points: 0, perSeconds: 60 } }, /rateLimit needs whole positive points and perSeconds/],
    [{ amount: 5 }, /amount must be a function/],
  ])('refuses %j', (patch, message) => {
    expect(() => defineTool({ ...paymentTool(), ...patch } as never)).toThrow(message);
  });

  it('accepts an approval rule given as a constant or returned by a predicate', () => {
    expect(() =>
      defineTool({ ...paymentTool(), confirm: { approverScope: 'payments:approve', approvals: 2 } }),
    ).not.toThrow();
    expect(() =>
      defineTool({
        ...paymentTool(),
        confirm: (args: { amount: number }) => (args.amount > 5 ? { approverScope: 'p' } : true),
      }),
    ).not.toThrow();
  });
});
