/**
 * Safe by default: what a host that configures nothing extra gets. Each block is one way a team's day-one options
 * used to let the model's word stand in for the host's rules: "done" without evidence, writes run unconfirmed, a
 * write on facts a read could not establish, mandate facts the arguments do not carry, a model that reserves no cost,
 * and untrusted input next to sensitive data (the Rule of Two). Each loosening is explicit and recorded.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { BookingService } from '../examples/booking/bookingService.js';
import { ToolDefinitionError } from '../src/errors.js';
import { cardNumbers } from '../src/privacy/redactors.js';
import { reply, scriptedModel } from '../src/testing/index.js';
import { type ValidationContext, defineTool } from '../src/tool.js';
import { refundMandate, withinRefund } from '../tools/mandates.js';
import { refundDeskAuthority } from '../tools/refundOrder.js';
import { paymentTool } from './support/paymentTool.js';
import {
  BOOKING_GOAL,
  BOOKING_MANDATE,
  BOOKING_SUCCESS,
  E17,
  MEETING,
  REFUND_GOAL,
  REFUND_MANDATE,
  SUPPORT,
  byKind,
  harness,
  reserveArgs,
} from './support/harness.js';
import { noticeTool, waivedNoticeTool, webSearch } from './support/noticeTools.js';

const refund = (cents: number) =>
  reply.call('refund_order', { order_id: 'O-1001', amount_cents: cents, reason: 'broken' });

describe('success needs evidence', () => {
  it('ends a task without a success criterion "answered", never done, and flags an id no tool returned', async () => {
    const h = harness({ script: [reply.answer('Refund completed, TX-9')] });
    const status = await h.orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, taskId: 'claim' });
    expect(status.state).toBe('answered');
    expect(status.outcome).toMatchObject({
      reason: { code: 'answered_without_criterion' },
      evidence: [],
      unsupportedIds: ['TX-9'],
    });
    expect(status.outcome?.reason.message).toMatch(/no write succeeded.*names TX-9, which no trusted result returned/);
    expect(h.refunds.refunds).toEqual([]);
  });

  it('does not count a refused write as evidence: the model saying "ok" after rate_limited ends answered, empty-handed', async () => {
    const sent: string[] = [];
    const limited = Object.assign(paymentTool({ sent }), { rateLimit: { points: 1, perSeconds: 3_600 } });
    const h = harness({
      extraTools: [limited],
      script: [reply.call('send_payment', { amount: 5 }), reply.answer('ok')],
    });
    // Another task of the tenant took the hour's only point.
    await h.orchestrator.run({ principal: SUPPORT, goal: 'pay', taskId: 'first' });
    const status = await h.orchestrator.run({ principal: SUPPORT, goal: 'pay', taskId: 'limited' });
    expect(sent).toHaveLength(1);
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'rate_limited' });
    expect(status).toMatchObject({
      state: 'answered',
      outcome: { evidence: [], reason: { detail: { lastFailure: { code: 'rate_limited' } } } },
    });
  });

  it('flags an answer that names another booking than the evidence, with or without a criterion', async () => {
    const script = [reply.call('reserve_room', reserveArgs()), reply.answer('Booked R7 as B209.')];
    const withCriterion = harness({ script });
    const done = await withCriterion.orchestrator.run({
      principal: E17,
      goal: BOOKING_GOAL,
      success: BOOKING_SUCCESS,
      taskId: 'b9',
    });
    // The write happened (B204): done rests on it; the answer's B209 is flagged, R7 (the tool's own result) is not.
    expect(done).toMatchObject({
      state: 'done',
      outcome: { reason: { code: 'goal_met', detail: { unsupportedIds: ['B209'] } }, unsupportedIds: ['B209'] },
    });
    const without = harness({ script });
    const answered = await without.orchestrator.run({ principal: E17, goal: BOOKING_GOAL, taskId: 'b9-plain' });
    expect(answered.state).toBe('answered');
    expect(answered.outcome?.evidence).toEqual([
      expect.objectContaining({
        tool: 'reserve_room',
        fields: expect.objectContaining({ booking_id: 'B204', room_id: 'R7' }),
      }),
    ]);
    expect(answered.outcome?.unsupportedIds).toEqual(['B209']);
  });

  it("does not take a read of another order as the goal met: under a mandate, the success read needs the mandate's rule", async () => {
    const asked: string[] = [];
    /** A refund's status by order: O-2002 (someone else's) was refunded long ago. */
    const refundStatus = (rule: boolean) =>
      defineTool({
        name: 'get_refund_status',
        description: "Reads an order's refund status.",
        effect: 'read',
        scopes: [],
        timeoutMs: 200,
        input: z.strictObject({ order_id: z.string() }),
        output: z.strictObject({ status: z.string(), refund_id: z.string() }),
        ...(rule
          ? { mandate: refundMandate.rule<{ order_id: string }>((args, terms) => withinRefund(args, terms)) }
          : {}),
        execute: async (args) => {
          asked.push(args.order_id);
          const refunded = args.order_id === 'O-2002';
          return { ok: true, value: { status: refunded ? 'refunded' : 'open', refund_id: refunded ? 'TX-9' : '-' } };
        },
      });
    const run = (rule: boolean, taskId: string) =>
      harness({
        extraTools: [refundStatus(rule)],
        script: [reply.call('get_refund_status', { order_id: 'O-2002' }), reply.answer('Refunded as TX-9.')],
      }).orchestrator.run({
        principal: E17,
        goal: REFUND_GOAL,
        taskId,
        mandate: REFUND_MANDATE,
        success: { tool: 'get_refund_status', match: { status: 'refunded' }, require: ['refund_id'] },
      });

    // The tool says nothing about the mandate: its result could not show this request's goal met, so it is refused.
    const unchecked = await run(false, 'status-unchecked');
    expect(unchecked.state).not.toBe('done');
    expect(unchecked.outcome?.evidence).toEqual([]);
    expect(asked).toEqual([]);
    // With the mandate's rule, the read of another order is refused as outside the mandate.
    const ruled = await run(true, 'status-ruled');
    expect(ruled.state).not.toBe('done');
    expect(asked).toEqual([]);
  });

  it('warns at start about a task that may write but declares no success criterion', async () => {
    const h = harness({ script: [reply.answer('x'), reply.answer('x')] });
    await h.orchestrator.run({ principal: E17, goal: BOOKING_GOAL, taskId: 'may-write' });
    await h.orchestrator.run({
      principal: { ...E17, scopes: ['rooms:read'] },
      goal: BOOKING_GOAL,
      taskId: 'reads-only',
    });
    const [mayWrite] = byKind(await h.orchestrator.audit('may-write'), 'task_started');
    const [readsOnly] = byKind(await h.orchestrator.audit('reads-only'), 'task_started');
    expect(mayWrite!.warnings).toEqual(['no_success_criterion']);
    expect(readsOnly!.warnings).toEqual([]);
  });
});

describe('writes are confirmed unless the tool waives it in writing', () => {
  it('asks the task user before a write that declares no rule', async () => {
    const sent: string[] = [];
    const h = harness({
      extraTools: [noticeTool(sent)],
      script: [reply.call('send_notice', { text: 'Your refund is on its way' }), reply.answer('sent')],
    });
    const waiting = await h.orchestrator.run({ principal: E17, goal: 'notify', taskId: 'notice' });
    expect(waiting).toMatchObject({
      state: 'waiting_for_confirmation',
      pendingConfirmation: { reasons: ['write_default'], risk: 'writable', userId: 'E17' },
    });
    expect(sent).toEqual([]);
    await h.orchestrator.confirm('notice', E17, waiting.pendingConfirmation!);
    expect((await h.orchestrator.settled('notice')).state).toBe('answered');
    expect(sent).toEqual(['Your refund is on its way']);
  });

  it("runs a write that waives it in writing, and records the tool's reason in the audit", async () => {
    const sent: string[] = [];
    const waived = { ...noticeTool(sent), confirm: { never: 'a notice to the requester only' } };
    const h = harness({
      extraTools: [defineTool(waived)],
      script: [reply.call('send_notice', { text: 'hi' }), reply.answer('sent')],
    });
    await h.orchestrator.run({ principal: E17, goal: 'notify', taskId: 'waived' });
    expect(sent).toEqual(['hi']);
    const gates = byKind(await h.orchestrator.audit('waived'), 'gate').filter((g) => g.gate === 'confirmation');
    expect(gates).toEqual([
      expect.objectContaining({
        decision: 'pass',
        summary: 'runs unconfirmed, as its tool declares: a notice to the requester only',
      }),
    ]);
  });

  it.each([
    ['a bare never on a write', { confirm: 'never' }, /a write runs unconfirmed only with a reason in writing/],
    ['a waiver without a reason', { confirm: { never: ' ' } }, /confirm\.never must give the reason/],
    [
      'a waiver on an irreversible write',
      { confirm: { never: 'it is fine' }, risk: 'irreversible' },
      /an irreversible write is always confirmed/,
    ],
    ['a read declared high_risk', { effect: 'read', risk: 'high_risk' }, /a read is read_only/],
    ['a write declared read_only', { risk: 'read_only' }, /a write cannot be read_only/],
    ['dependsOn on a read', { effect: 'read', dependsOn: [] }, /only a write depends on reads/],
    ['a tool without an effect', { effect: undefined }, /effect must be 'read' or 'write', not undefined/],
    ['an effect of another spelling', { effect: 'Write' }, /effect must be 'read' or 'write', not "Write"/],
  ])('refuses %s at definition', (_label, patch, message) => {
    const { lookup: _l, sameKeyRetrySafe: _s, ...read } = noticeTool();
    const base = (patch as { effect?: string }).effect === 'read' ? read : noticeTool();
    expect(() => defineTool({ ...base, ...patch } as never)).toThrow(ToolDefinitionError);
    expect(() => defineTool({ ...base, ...patch } as never)).toThrow(message);
  });

  it("confirms every money-moving write unless the host loosens it, whatever the tool's own threshold says", async () => {
    // The refund tool asks only above 100.00; a 50.00 refund still asks, for money moves.
    const strict = harness({ loosen: null, script: [refund(5_000), reply.answer('refunded')] });
    const waiting = await strict.orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      mandate: REFUND_MANDATE,
      taskId: 'fifty',
    });
    expect(waiting.pendingConfirmation).toMatchObject({
      reasons: ['moves_money'],
      summary: 'Refund 50.00 on order O-1001 (broken)',
    });
    expect(strict.refunds.refunds).toEqual([]);
    // Loosened with a reason, it runs; the task's audit says who loosened what, and why.
    const loose = harness({ loosen: refundDeskAuthority, script: [refund(5_000), reply.answer('refunded')] });
    const status = await loose.orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      mandate: REFUND_MANDATE,
      taskId: 'fifty',
    });
    expect(status.pendingConfirmation).toBeNull();
    expect(loose.refunds.refunds.map((r) => r.amountCents)).toEqual([5_000]);
    const [started] = byKind(await loose.orchestrator.audit('fifty'), 'task_started');
    expect(started!.loosened).toEqual([
      { option: 'unconfirmedMoney.upTo=10000', reason: refundDeskAuthority.unconfirmedMoney.reason },
    ]);
  });

  it("records the privacy options' loosenings with the task too", async () => {
    const reason = "this tenant's tokens are test fixtures";
    const h = harness({
      loosen: null,
      privacy: { omitDefaultRedactors: { names: ['jwt'], reason } },
      script: [reply.answer('x')],
    });
    await h.orchestrator.run({ principal: E17, goal: 'hello', taskId: 'privacy-loosened' });
    const [started] = byKind(await h.orchestrator.audit('privacy-loosened'), 'task_started');
    expect(started!.loosened).toEqual([{ option: 'privacy.omitDefaultRedactors:jwt', reason }]);
  });

  it('refuses a loosening through the policy, without a reason', () => {
    expect(() => harness({ loosen: null, policy: { unconfirmedMoneyUpTo: 10_000 } })).toThrow(
      /policy\.unconfirmedMoneyUpTo: this loosens a safe default; .*loosen\.unconfirmedMoney/,
    );
    expect(() => harness({ loosen: null, policy: { ruleOfTwo: 'off' } })).toThrow(/loosen\.ruleOfTwo/);
    expect(() => harness({ loosen: { ruleOfTwo: { off: true, reason: '' } } })).toThrow(
      /loosen\.ruleOfTwo\.reason: give the reason/,
    );
  });

  it("asks for an irreversible write even when the tool's rule says no, and for approvers for a high-risk one when the policy names them", async () => {
    const irreversible = defineTool({
      ...noticeTool(),
      name: 'delete_account',
      risk: 'irreversible',
      confirm: () => false,
    });
    const highRisk = defineTool({
      ...noticeTool(),
      name: 'wire_funds',
      risk: 'high_risk',
      confirm: { approverScope: 'funds:approve' },
    });
    const policy = { highRiskApproval: { approverScope: 'funds:approve', approvals: 2 } };
    const h = harness({
      extraTools: [irreversible, highRisk],
      policy,
      script: [reply.call('delete_account', { text: 'a' })],
    });
    const first = await h.orchestrator.run({ principal: E17, goal: 'close', taskId: 'irreversible' });
    expect(first.pendingConfirmation).toMatchObject({
      reasons: ['irreversible'],
      risk: 'irreversible',
      approverScope: null,
    });
    const h1 = harness({
      extraTools: [irreversible, highRisk],
      policy,
      script: [reply.call('wire_funds', { text: 'b' })],
    });
    const second = await h1.orchestrator.run({ principal: E17, goal: 'wire', taskId: 'high-risk' });
    // The tool's own approver rule stands (one approver); the policy's would apply to a high-risk tool without one.
    expect(second.pendingConfirmation).toMatchObject({
      reasons: ['tool_rule', 'high_risk'],
      risk: 'high_risk',
      approverScope: 'funds:approve',
      approvalsRequired: 1,
    });
    const plain = defineTool({ ...noticeTool(), name: 'wire_more', risk: 'high_risk', confirm: () => false });
    const h2 = harness({ extraTools: [plain], policy, script: [reply.call('wire_more', { text: 'c' })] });
    const third = await h2.orchestrator.run({ principal: E17, goal: 'wire', taskId: 'high-risk-2' });
    expect(third.pendingConfirmation).toMatchObject({
      reasons: ['high_risk'],
      approverScope: 'funds:approve',
      approvalsRequired: 2,
    });
  });
});

describe('unverified facts block writes', () => {
  const hanging = () => {
    const bookings = new BookingService();
    bookings.faults.hangingSearches = 2;
    return bookings;
  };

  it('refuses a write after a read timed out, and runs it once a read of the same tool succeeds', async () => {
    const h = harness({
      bookings: hanging(),
      timeouts: { search: 30 },
      script: [
        reply.call('find_available_rooms', { ...MEETING }),
        reply.call('reserve_room', reserveArgs()),
        reply.call('find_available_rooms', { ...MEETING }),
        reply.call('reserve_room', reserveArgs()),
        reply.answer('Booked R7: B204.'),
      ],
    });
    const status = await h.orchestrator.run({
      principal: E17,
      goal: BOOKING_GOAL,
      mandate: BOOKING_MANDATE,
      success: BOOKING_SUCCESS,
      taskId: 'unverified',
    });
    const gates = byKind(await h.orchestrator.audit('unverified'), 'gate').filter((g) => g.gate === 'verification');
    expect(gates).toEqual([
      expect.objectContaining({ decision: 'reject', code: 'unverified_facts', tool: 'reserve_room' }),
    ]);
    expect(status).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } } });
    // The first proposal never reached the service; the second ran after the search succeeded.
    expect(h.bookings.reserveRequests).toHaveLength(1);
  });

  it('stops with could_not_verify when reading again did not help', async () => {
    const bookings = new BookingService();
    bookings.faults.hangingSearches = 4;
    const h = harness({
      bookings,
      timeouts: { search: 30 },
      script: [
        reply.call('find_available_rooms', { ...MEETING }),
        reply.call('find_available_rooms', { ...MEETING, attendees: 4 }),
        reply.call('reserve_room', reserveArgs()),
      ],
    });
    const status = await h.orchestrator.run({
      principal: E17,
      goal: BOOKING_GOAL,
      mandate: BOOKING_MANDATE,
      success: BOOKING_SUCCESS,
      taskId: 'gave-up',
    });
    expect(status.outcome).toMatchObject({
      status: 'failed',
      reason: {
        code: 'could_not_verify',
        detail: { unverified: [{ tool: 'find_available_rooms', code: 'timeout', times: 2 }] },
      },
    });
    expect(status.observations.at(-1)).toMatchObject({ ok: false, code: 'unverified_facts' });
    expect(bookings.reserveRequests).toEqual([]);
  });

  it('lets a write that depends on no read run (dependsOn: [])', async () => {
    const sent: string[] = [];
    const independent = defineTool({ ...noticeTool(sent), confirm: { never: 'a notice' }, dependsOn: [] });
    const h = harness({
      bookings: hanging(),
      timeouts: { search: 30 },
      extraTools: [independent],
      script: [
        reply.call('find_available_rooms', { ...MEETING }),
        reply.call('send_notice', { text: 'searching' }),
        reply.answer('x'),
      ],
    });
    await h.orchestrator.run({ principal: E17, goal: 'notify', taskId: 'independent' });
    expect(sent).toEqual(['searching']);
  });
});

describe('the mandate is visible to every check', () => {
  it("gives validate and authorize the task's mandate and totals, at vetting and again right before the write", async () => {
    const seen: { hook: string; mandate: unknown; moneyMoved: number }[] = [];
    const note = (hook: string) => (_args: unknown, ctx: ValidationContext) => {
      seen.push({ hook, mandate: ctx.mandate, moneyMoved: ctx.task.moneyMoved });
      return { ok: true as const };
    };
    const tool = defineTool({
      ...noticeTool(),
      confirm: { never: 'a notice' },
      mandate: () => ({ ok: true }),
      validate: note('validate'),
      authorize: note('authorize'),
    });
    const h = harness({ extraTools: [tool], script: [reply.call('send_notice', { text: 'hi' }), reply.answer('x')] });
    await h.orchestrator.run({ principal: E17, goal: 'notify', mandate: BOOKING_MANDATE, taskId: 'visible' });
    expect(seen.map((s) => s.hook)).toEqual(['validate', 'authorize', 'validate', 'authorize']);
    for (const s of seen)
      expect(s).toMatchObject({ mandate: { kind: 'room_booking', terms: BOOKING_MANDATE.terms }, moneyMoved: 0 });
  });

  it('refuses a room without a projector when the mandate needs one (a fact of the room, not of the arguments)', async () => {
    const h = harness({
      script: [
        reply.call('reserve_room', reserveArgs({ room_id: 'R3', attendees: 2, expected_version: 11 })),
        reply.answer('x'),
      ],
    });
    const mandate = { ...BOOKING_MANDATE, terms: { ...(BOOKING_MANDATE.terms as object), min_attendees: 2 } };
    const status = await h.orchestrator.run({ principal: E17, goal: BOOKING_GOAL, mandate, taskId: 'projector' });
    expect(status.observations[0]).toMatchObject({ ok: false, gate: 'business', code: 'projector_required' });
    expect(h.bookings.reserveRequests).toEqual([]);
  });
});

describe('budgets hold against a model that reserves nothing', () => {
  it('reserves what the largest turn cost, and stops before a turn the cost budget cannot pay for', async () => {
    const costly = (text: string) => ({
      ...reply.answer(text),
      usage: { inputTokens: 100, outputTokens: 10, costMicros: 600_000 },
    });
    const model = scriptedModel([
      {
        ...reply.call('find_available_rooms', { ...MEETING }),
        usage: { inputTokens: 100, outputTokens: 10, costMicros: 600_000 },
      },
      costly('x'),
      costly('y'),
    ]);
    expect(model.reservation.costMicros).toBe(0);
    const h = harness({ model, limits: { costMicros: 1_000_000 } });
    const status = await h.orchestrator.run({ principal: E17, goal: BOOKING_GOAL, taskId: 'cost' });
    // Turn 1 cost 600,000; turn 2 would need as much with 400,000 left: stopped before it, not 20% over after it.
    expect(status).toMatchObject({
      state: 'budget_exhausted',
      turn: 1,
      outcome: { reason: { detail: { dimension: 'costMicros' } } },
    });
    expect(status.budget.used.costMicros).toBe(600_000);
    expect(model.turns).toBe(1);
  });
});

describe('the Rule of Two', () => {
  const waived = () => waivedNoticeTool();
  const script = () => [
    reply.call('search_web', { q: 'x' }),
    reply.call('send_notice', { text: 'card on file' }),
    reply.answer('x'),
  ];
  const goal = 'Tell me about card 4111 1111 1111 1111';

  it('confirms any write of a task that saw untrusted input and holds sensitive data, whatever its tool says', async () => {
    const h = harness({ extraTools: [webSearch, waived()], privacy: { redactors: [cardNumbers()] }, script: script() });
    const status = await h.orchestrator.run({ principal: E17, goal, taskId: 'two' });
    expect(status.pendingConfirmation).toMatchObject({ tool: 'send_notice', reasons: ['rule_of_two'] });
  });

  it('does not ask without sensitive data, nor once the host turns it off with a reason', async () => {
    const plain = harness({ extraTools: [webSearch, waived()], script: script() });
    expect((await plain.orchestrator.run({ principal: E17, goal: 'Tell me about it', taskId: 'one' })).state).toBe(
      'answered',
    );
    const off = harness({
      extraTools: [webSearch, waived()],
      privacy: { redactors: [cardNumbers()] },
      loosen: { ruleOfTwo: { off: true, reason: 'notices carry no data' } },
      script: script(),
    });
    expect((await off.orchestrator.run({ principal: E17, goal, taskId: 'off' })).state).toBe('answered');
  });
});
