/**
 * Money as a budget: a tool declares how much a call moves; the task's money budget is checked before the call is
 * even offered for confirmation, checked again right before the write, and debited before it runs. No money moves
 * unless the host budgets it.
 */
import { describe, expect, it } from 'vitest';
import { reply } from '../src/testing/index.js';
import { defineTool } from '../src/tool.js';
import { paymentTool } from './support/paymentTool.js';
import { byKind } from './support/harness.js';
import { CASH_GOAL, CLERK, PAYOUT_SUCCESS, cashDesk, clerkAuthority, payoutMandate } from './support/domain.js';

const payOut = (amount: number) => reply.call('pay_out', { account_id: 'A-1', amount, memo: 'taxi' });
/** The cash desk as these tests' host runs it: the clerk's authority loosened, a fast backoff. */
const desk = (options: Parameters<typeof cashDesk>[0]) =>
  cashDesk({ loosen: clerkAuthority, backoff: { baseDelayMs: 5, maxDelayMs: 20 }, ...options });

describe('the money budget', () => {
  it('stops before a payout the budget cannot pay, before anyone is asked to confirm it', async () => {
    // 150 is above the desk's confirmation threshold (100): the budget stops it before anyone is asked.
    const h = desk({ script: [payOut(150), reply.answer('x')], limits: { money: 100 } });
    const status = await h.orchestrator.run({ principal: CLERK, goal: CASH_GOAL, taskId: 'm1' });
    expect(status).toMatchObject({
      state: 'budget_exhausted',
      outcome: { reason: { code: 'budget_exhausted', detail: { dimension: 'money' } } },
    });
    expect(status.outcome!.reason.message).toContain('the money budget is spent (0 of 100 used)');
    expect(byKind(await h.orchestrator.audit('m1'), 'confirmation')).toEqual([]);
    expect(h.ledger.payouts).toEqual([]);
  });

  it('debits what each write moves, and stops before the one that would overdraw it', async () => {
    const h = desk({ script: [payOut(60), payOut(50), reply.answer('x')], limits: { money: 100 } });
    const status = await h.orchestrator.run({ principal: CLERK, goal: CASH_GOAL, taskId: 'm2' });
    expect(h.ledger.payouts.map((p) => p.amount)).toEqual([60]);
    expect(status.budget.used.money).toBe(60);
    expect(status.budget.remaining.money).toBe(40);
    expect(status.state).toBe('budget_exhausted');
    const started = byKind(await h.orchestrator.audit('m2'), 'tool_started');
    expect(started.map((e) => e.money)).toEqual([60]);
  });

  it('moves no money by default: a tool that declares an amount needs the host to budget it', async () => {
    const { orchestrator, ledger } = cashDesk({ script: [payOut(50), reply.answer('x')] });
    const status = await orchestrator.run({ principal: CLERK, goal: CASH_GOAL });
    expect(status.outcome?.reason).toMatchObject({ code: 'budget_exhausted', detail: { dimension: 'money' } });
    expect(status.budget.limits.money).toBe(0);
    expect(ledger.payouts).toEqual([]);
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
      const h = desk({
        extraTools: [tool],
        script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')],
        limits: { money: 1_000_000 },
      });
      const status = await h.orchestrator.run({ principal: CLERK, goal: 'pay', taskId: `amount-${name}` });
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
    const h = desk({
      extraTools: [tool],
      script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')],
      limits: { money: Number.MAX_SAFE_INTEGER },
    });
    const status = await h.orchestrator.run({ principal: CLERK, goal: 'pay', taskId: 'unlimited' });
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
    const h = desk({ extraTools: [tool], script, limits: { money: 1_000 } });
    const status = await h.orchestrator.run({ principal: CLERK, goal: 'pay', taskId: 'money-retry' });
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
  it('does not pay out 3 x 99 on a mandate of "at most 199" without anyone confirming', async () => {
    const split = (n: number) => ({
      name: 'pay_out',
      args: { account_id: 'A-1', amount: 99, memo: `taxi receipt (part ${n})` },
    });
    // The clerk's authority (up to 1,000 unconfirmed) leaves the asking to pay_out's own rule: above 100 in a task.
    const h = desk({
      script: [reply.calls(split(1), split(2), split(3)), reply.answer('paid')],
      limits: { money: 1_000 },
    });
    await h.orchestrator.run({
      principal: CLERK,
      goal: CASH_GOAL,
      success: PAYOUT_SUCCESS,
      mandate: payoutMandate.of({ account_id: 'A-1', max_amount: 199 }),
      taskId: 'split',
    });
    const total = h.ledger.payouts.reduce((sum, p) => sum + p.amount, 0);
    const confirmations = byKind(await h.orchestrator.audit('split'), 'confirmation');
    // The user asked to pay out at most 199 from A-1, and a payout taking the task above 100 needs the user's
    // confirmation: three payouts of 99 must not add up to 297 unasked. Both rules see what the task moved.
    expect(total).toBeLessThanOrEqual(199);
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
      { confirm: { approverScope: 'cash:approve', approvals: 0 } },
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
