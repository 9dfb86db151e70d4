/**
 * The mandate: what the user asked for, as structured terms the host derives before the task starts. Checked at
 * start against its kind's schema, persisted, never changed; each tool's rule relates its arguments to it; a write
 * outside it is refused before anything runs, and the same call proposed again stops the task.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { HostRequestError, MandateUsedError, TaskExistsError } from '../src/errors.js';
import { defineMandate } from '../src/mandate.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { reply } from '../src/testing/index.js';
import { defineTool } from '../src/tool.js';
import { bookingMandate, refundMandate } from '../tools/mandates.js';
import { paymentTool } from './support/paymentTool.js';
import {
  BOOKING_GOAL,
  BOOKING_MANDATE,
  BOOKING_SUCCESS,
  E17,
  MEETING,
  REFUND_GOAL,
  SUPPORT,
  byKind,
  harness,
  reserveArgs,
} from './support/harness.js';
import { withMembers } from './support/takeover.js';

const search = { ...MEETING };
const NO_HISTORY = { moneyMoved: 0, writesStarted: 0 };

describe('a start request with a mandate', () => {
  it('is refused with the kinds installed when its kind is not one of them', async () => {
    const { orchestrator } = harness();
    const start = orchestrator.start({
      principal: E17,
      goal: 'g',
      mandate: { kind: 'holiday', terms: {}, id: 'm-holiday' },
    });
    await expect(start).rejects.toBeInstanceOf(HostRequestError);
    await expect(start).rejects.toThrow('no mandate kind "holiday" is installed (known: room_booking, refund)');
  });

  it('is refused, naming the field, when its terms do not match the schema of its kind', async () => {
    const { orchestrator } = harness();
    const start = orchestrator.start({
      principal: E17,
      goal: 'g',
      mandate: { kind: 'refund', terms: { order_id: 'O-1', max_amount_cents: -5 }, id: 'm-negative' },
    });
    await expect(start).rejects.toThrow(/^start: mandate\.terms: max_amount_cents: /);
    expect(() => refundMandate.of({ order_id: 'O-1', max_amount_cents: 1.5 })).toThrow(
      /mandate\.terms: max_amount_cents/,
    );
  });

  it('is stored as plain JSON, shown in status, and cannot change: the host object is copied at start', async () => {
    const store = new MemoryStore();
    const { orchestrator } = harness({ store, script: [reply.call('find_available_rooms', search)] });
    const terms: Record<string, unknown> = {
      start_at: MEETING.start_at,
      end_at: MEETING.end_at,
      min_attendees: 3,
      needs_projector: true,
    };
    const status = await orchestrator.start({
      principal: E17,
      goal: BOOKING_GOAL,
      mandate: { kind: 'room_booking', terms, id: 'm-copied' },
      taskId: 'copied',
    });
    terms.start_at = '2030-01-01T00:00:00+00:00';
    expect(status.mandate).toEqual({
      kind: 'room_booking',
      terms: { ...terms, start_at: MEETING.start_at },
      id: 'm-copied',
    });
    const stored = (await store.load('copied'))!.snapshot.context.mandate;
    expect(stored).toEqual(status.mandate);
    const started = byKind(await orchestrator.audit('copied'), 'task_started')[0]!;
    expect(started.mandate).toEqual(status.mandate);
    await orchestrator.close();
  });

  it('is refused without an id, telling the host to make it with defineMandate(...).of(terms)', async () => {
    const { orchestrator, store } = harness();
    const terms = { order_id: 'O-1001', max_amount_cents: 50_000 };
    const start = orchestrator.start({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      mandate: { kind: 'refund', terms },
      taskId: 'no-id',
    });
    await expect(start).rejects.toBeInstanceOf(HostRequestError);
    await expect(start).rejects.toThrow(
      'start: mandate "refund" has no id: make it with defineMandate(...).of(terms), once per request (a mandate authorises one task)',
    );
    expect(await store.load('no-id')).toBeNull();
  });

  it('gets a new id from every of(terms)', () => {
    const terms = { order_id: 'O-1001', max_amount_cents: 50_000 };
    const [a, b] = [refundMandate.of(terms), refundMandate.of(terms)];
    expect(a).toEqual({ kind: 'refund', terms, id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(b.id).not.toBe(a.id);
  });

  it('refuses a mandate kind whose name is not a plain identifier', () => {
    expect(() => defineMandate('Room Booking!', z.strictObject({}))).toThrow(/lower case/);
  });
});

describe('a mandate authorises one task', () => {
  const UP_TO_500 = { order_id: 'O-1001', max_amount_cents: 50_000 };
  /** The refunds here run unconfirmed: the tests are about the mandate, not the asking. */
  const UNCONFIRMED_1000 = {
    unconfirmedMoney: { upTo: 100_000, reason: "refunds up to 1,000.00 are the desk lead's own call" },
  };
  const refund400 = (taskId: string) => [
    reply.call('refund_order', { order_id: 'O-1001', amount_cents: 40_000, reason: taskId }),
    reply.answer('refunded'),
  ];

  it('refuses a second task under the same mandate before anything is stored: 400.00 moves once under a 500.00 mandate', async () => {
    const store = new MemoryStore();
    const first = harness({
      store,
      script: refund400('first'),
      refundOptions: { confirmAboveCents: 100_000 },
      loosen: UNCONFIRMED_1000,
    });
    const mandate = refundMandate.of(UP_TO_500);
    expect(
      (await first.orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, mandate, taskId: 'first' })).state,
    ).toBe('answered');
    const second = harness({
      store,
      refunds: first.refunds,
      script: refund400('second'),
      refundOptions: { confirmAboveCents: 100_000 },
      loosen: UNCONFIRMED_1000,
    });
    const refused = await second.orchestrator
      .start({ principal: SUPPORT, goal: REFUND_GOAL, mandate, taskId: 'second' })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(MandateUsedError);
    expect(refused).toMatchObject({ code: 'mandate_used', mandateId: mandate.id, taskId: 'second' });
    expect(await store.load('second')).toBeNull();
    expect(second.orchestrator.inFlight()).toEqual({ live: 0, leases: 0 });
    expect(first.refunds.refunds.map((r) => r.amountCents)).toEqual([40_000]);
    // A mandate of its own (the same terms, made for this request) starts it.
    expect(
      (
        await second.orchestrator.run({
          principal: SUPPORT,
          goal: REFUND_GOAL,
          mandate: refundMandate.of(UP_TO_500),
          taskId: 'second',
        })
      ).state,
    ).toBe('answered');
  });

  it('tells a retried start of the same task that the task exists, not that its mandate is used', async () => {
    const { orchestrator } = harness({
      script: refund400('t'),
      refundOptions: { confirmAboveCents: 100_000 },
      loosen: UNCONFIRMED_1000,
    });
    const mandate = refundMandate.of(UP_TO_500);
    await orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, mandate, taskId: 'retried' });
    await expect(
      orchestrator.start({ principal: SUPPORT, goal: REFUND_GOAL, mandate, taskId: 'retried' }),
    ).rejects.toBeInstanceOf(TaskExistsError);
  });

  it('is not used up by a start refused for another reason', async () => {
    const { orchestrator } = harness({
      script: [reply.ask('which order?'), ...refund400('t')],
      refundOptions: { confirmAboveCents: 100_000 },
      loosen: UNCONFIRMED_1000,
    });
    await orchestrator.start({ principal: SUPPORT, goal: REFUND_GOAL, taskId: 'taken' });
    const mandate = refundMandate.of(UP_TO_500);
    await expect(
      orchestrator.start({ principal: SUPPORT, goal: REFUND_GOAL, mandate, taskId: 'taken' }),
    ).rejects.toBeInstanceOf(TaskExistsError);
    expect(
      (await orchestrator.start({ principal: SUPPORT, goal: REFUND_GOAL, mandate, taskId: 'free' })).mandate,
    ).toEqual(mandate);
  });

  it('is given back when its task is erased', async () => {
    const store = new MemoryStore();
    const { orchestrator } = harness({ store, script: [reply.ask('which order?')] });
    const mandate = refundMandate.of(UP_TO_500);
    await orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, mandate, taskId: 'erased' });
    await orchestrator.erase('erased', { reason: 'gdpr_erasure' });
    expect(await store.claimMandate(mandate.id!, 'after')).toBe('claimed');
  });

  it('needs a store that can claim it: a start with a mandate is refused on one that cannot', async () => {
    const store: TaskStore = withMembers(new MemoryStore(), { claimMandate: undefined, releaseMandate: undefined });
    const { orchestrator } = harness({ store });
    const start = orchestrator.start({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      mandate: refundMandate.of(UP_TO_500),
      taskId: 'unclaimed',
    });
    await expect(start).rejects.toThrow(
      /a task with a mandate needs a store that claims mandates \(claimMandate, releaseMandate\)/,
    );
    expect(await store.load('unclaimed')).toBeNull();
    // Without a mandate, such a store works as before.
    await orchestrator.start({ principal: SUPPORT, goal: REFUND_GOAL, taskId: 'plain' });
  });
});

describe('the mandate gate', () => {
  it("refuses a write outside the mandate before its business validation, telling the model why in the rule's words", async () => {
    const wrongDay = reserveArgs({ start_at: '2026-09-29T14:00:00+08:00', end_at: '2026-09-29T15:00:00+08:00' });
    const { orchestrator, bookings } = harness({
      script: [reply.call('reserve_room', wrongDay), reply.answer('done')],
    });
    const status = await orchestrator.run({
      principal: E17,
      goal: BOOKING_GOAL,
      success: BOOKING_SUCCESS,
      mandate: BOOKING_MANDATE,
    });
    expect(bookings.reserveRequests).toEqual([]);
    const audit = await orchestrator.audit(status.taskId);
    const gates = byKind(audit, 'gate')
      .filter((g) => g.tool === 'reserve_room')
      .map((g) => `${g.gate} ${g.decision}`);
    expect(gates).toEqual(['schema pass', 'mandate reject']);
    expect(byKind(audit, 'check_started')).toEqual([]);
    const transcript = await orchestrator.transcript(status.taskId);
    const result = transcript.find((e) => e.kind === 'result');
    expect(result).toMatchObject({
      observation: { ok: false, code: 'outside_mandate', gate: 'mandate', retryable: true },
    });
    expect(JSON.stringify(result)).toContain('is not the slot the user asked for (2026-09-28T14:00:00+08:00');
  });

  it('lets the model correct itself: the right slot after the wrong one is booked', async () => {
    const wrongDay = reserveArgs({ start_at: '2026-09-29T14:00:00+08:00', end_at: '2026-09-29T15:00:00+08:00' });
    const script = [
      reply.call('reserve_room', wrongDay),
      reply.call('reserve_room', reserveArgs()),
      reply.answer('booked'),
    ];
    const { orchestrator, bookings } = harness({ script });
    const status = await orchestrator.run({
      principal: E17,
      goal: BOOKING_GOAL,
      success: BOOKING_SUCCESS,
      mandate: BOOKING_MANDATE,
    });
    expect(status).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } } });
    expect(bookings.bookings.map((b) => b.startAt)).toEqual([MEETING.start_at]);
  });

  it('accepts the same instant written with another offset', async () => {
    const utc = reserveArgs({ start_at: '2026-09-28T06:00:00Z', end_at: '2026-09-28T07:00:00Z' });
    const { orchestrator, bookings } = harness({ script: [reply.call('reserve_room', utc), reply.answer('booked')] });
    await orchestrator.run({ principal: E17, goal: BOOKING_GOAL, success: BOOKING_SUCCESS, mandate: BOOKING_MANDATE });
    expect(bookings.bookings).toHaveLength(1);
  });

  it('a booking for another slot is refused at vetting and nothing runs, however the model phrases it', async () => {
    const other = reserveArgs({ start_at: '2026-09-28T15:00:00+08:00', end_at: '2026-09-28T16:00:00+08:00' });
    const h = harness({ script: [reply.call('reserve_room', other), reply.answer('x')] });
    const status = await h.orchestrator.run({
      principal: E17,
      goal: BOOKING_GOAL,
      success: BOOKING_SUCCESS,
      mandate: BOOKING_MANDATE,
      taskId: 'slot',
    });
    expect(h.bookings.reserveRequests).toEqual([]);
    expect(status.observations[0]).toMatchObject({ code: 'outside_mandate' });
  });

  it('refuses a read outside the mandate too when its tool declares a rule (a search without the projector)', async () => {
    const { orchestrator } = harness({
      script: [reply.call('find_available_rooms', { ...search, needs_projector: false }), reply.answer('x')],
    });
    const status = await orchestrator.run({ principal: E17, goal: BOOKING_GOAL, mandate: BOOKING_MANDATE });
    expect(status.observations).toEqual([
      expect.objectContaining({
        ok: false,
        code: 'outside_mandate',
        summary: expect.stringContaining('[projector_required]'),
      }),
    ]);
  });

  it('refuses a write whose tool declares no rule: a mandate covers only what its tools can be checked against', async () => {
    const sent: string[] = [];
    const { orchestrator } = harness({
      extraTools: [paymentTool({ sent })],
      script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')],
    });
    const status = await orchestrator.run({ principal: E17, goal: BOOKING_GOAL, mandate: BOOKING_MANDATE });
    expect(sent).toEqual([]);
    expect(status.observations[0]).toMatchObject({
      code: 'outside_mandate',
      summary: expect.stringContaining("declares no rule against the user's mandate (room_booking)"),
    });
  });

  it('passes every call of a task started without a mandate, and says so in the audit', async () => {
    const sent: string[] = [];
    const { orchestrator } = harness({
      extraTools: [paymentTool({ sent })],
      script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')],
    });
    const status = await orchestrator.run({ principal: E17, goal: 'pay' });
    expect(sent).toHaveLength(1);
    const mandate = byKind(await orchestrator.audit(status.taskId), 'gate').find((g) => g.gate === 'mandate');
    expect(mandate).toMatchObject({ decision: 'pass', summary: 'the task has no mandate' });
  });

  it('fails closed on a rule that throws, returns a promise, or is for another kind', async () => {
    const rules = {
      throws: () => {
        throw new Error('boom');
      },
      promise: () => Promise.resolve({ ok: true as const }),
      other: refundMandate.rule(() => ({ ok: true })),
    };
    for (const [name, rule] of Object.entries(rules)) {
      const sent: string[] = [];
      const tool = Object.assign(paymentTool({ sent }), { mandate: rule });
      const { orchestrator } = harness({
        extraTools: [tool],
        script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')],
      });
      const status = await orchestrator.run({
        principal: E17,
        goal: 'pay',
        mandate: BOOKING_MANDATE,
        taskId: `rule-${name}`,
      });
      expect(sent, name).toEqual([]);
      expect(status.observations[0]?.ok, name).toBe(false);
      expect((status.observations[0] as { code: string }).code, name).toBe('outside_mandate');
    }
  });

  it('gives the rule its own copy of the arguments and the mandate', async () => {
    const seen: unknown[] = [];
    const tool = Object.assign(paymentTool(), {
      mandate: (args: { amount: number }, mandate: { terms: Record<string, unknown> }) => {
        seen.push(structuredClone({ args, mandate }));
        args.amount = 0;
        mandate.terms.min_attendees = 999;
        return { ok: true as const };
      },
    });
    const { orchestrator, store } = harness({
      extraTools: [tool],
      script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')],
    });
    const status = await orchestrator.run({ principal: E17, goal: 'pay', mandate: BOOKING_MANDATE, taskId: 'copies' });
    const context = (await store.load('copies'))!.snapshot.context;
    expect(context.mandate).toEqual(BOOKING_MANDATE);
    expect(context.batch!.calls[0]!.args).toEqual({ amount: 5 });
    expect(status.state).toBe('answered');
    expect(seen.length).toBeGreaterThanOrEqual(2);
  });
});

describe('a denial is final for that call', () => {
  const executive = reserveArgs({ room_id: 'R1', expected_version: 3 });

  it('stops the task with permission_denied when the model proposes a denied call again', async () => {
    const script = [reply.call('reserve_room', executive), reply.call('reserve_room', executive), reply.answer('x')];
    const { orchestrator, bookings } = harness({ script });
    const status = await orchestrator.run({ principal: E17, goal: BOOKING_GOAL, success: BOOKING_SUCCESS });
    expect(status).toMatchObject({ state: 'failed', outcome: { reason: { code: 'permission_denied' } } });
    expect(status.outcome!.reason.message).toContain(
      'was proposed again with the same arguments after the host denied it',
    );
    expect(bookings.reserveRequests).toEqual([]);
    // The second proposal was not asked of the tool's hooks again: the denial was remembered.
    const audit = await orchestrator.audit(status.taskId);
    expect(byKind(audit, 'check_started').filter((c) => c.gate === 'permission')).toHaveLength(1);
    expect(byKind(audit, 'model_output')).toHaveLength(2);
  });

  it('refuses it again instead when the policy says replan, and other arguments are judged afresh', async () => {
    const script = [
      reply.call('reserve_room', executive),
      reply.call('reserve_room', executive),
      reply.call('reserve_room', reserveArgs()),
      reply.answer('booked'),
    ];
    const { orchestrator, bookings } = harness({ script, policy: { onRepeatedDenial: 'replan', maxRejectedTurns: 3 } });
    const status = await orchestrator.run({ principal: E17, goal: BOOKING_GOAL, success: BOOKING_SUCCESS });
    expect(status.state).toBe('done');
    const denials = byKind(await orchestrator.audit(status.taskId), 'gate').filter(
      (g) => g.gate === 'permission' && g.decision === 'reject',
    );
    expect(denials).toHaveLength(2);
    expect(bookings.bookings.map((b) => b.roomId)).toEqual(['R7']);
  });

  it('stops with outside_mandate when a call outside the mandate is proposed again, even after new observations', async () => {
    const wrongDay = reserveArgs({ start_at: '2026-09-29T14:00:00+08:00', end_at: '2026-09-29T15:00:00+08:00' });
    const script = [
      reply.call('reserve_room', wrongDay),
      reply.call('find_available_rooms', search),
      reply.call('reserve_room', wrongDay),
      reply.answer('x'),
    ];
    const { orchestrator } = harness({ script });
    const status = await orchestrator.run({ principal: E17, goal: BOOKING_GOAL, mandate: BOOKING_MANDATE });
    expect(status).toMatchObject({ state: 'failed', outcome: { reason: { code: 'outside_mandate' } } });
  });

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
      script: [
        reply.call('send_payment', { amount: 5 }),
        reply.call('send_payment', { amount: 5 }),
        reply.answer('paid'),
      ],
    });
    const status = await h.orchestrator.run({ principal: SUPPORT, goal: 'pay', taskId: 'authz-down' });
    expect(status.observations.length + sent.length).toBeGreaterThan(0);
    // An `unavailable` verdict is not recorded as a denial (gate 'permission'): nobody denied anything, so the call
    // proposed again is asked afresh instead of stopping the task with permission_denied.
    expect(status.outcome?.reason.code).not.toBe('permission_denied');
    expect(sent).toHaveLength(1);
  });
});

describe('defineTool and mandate rules', () => {
  it('refuses a mandate that is not a function, or is asynchronous', () => {
    expect(() => defineTool({ ...paymentTool(), mandate: { kind: 'x' } as never })).toThrow(
      /mandate must be a function/,
    );
    expect(() => defineTool({ ...paymentTool(), mandate: (async () => ({ ok: true as const })) as never })).toThrow(
      /mandate must be synchronous/,
    );
  });

  it('types the terms of a kind in its rule', () => {
    const rule = bookingMandate.rule<{ attendees: number }>((args, terms) =>
      args.attendees >= terms.min_attendees ? { ok: true } : { ok: false, summary: 'too few' },
    );
    expect(rule({ attendees: 5 }, BOOKING_MANDATE, NO_HISTORY)).toEqual({ ok: true });
    expect(rule({ attendees: 1 }, BOOKING_MANDATE, NO_HISTORY)).toEqual({ ok: false, summary: 'too few' });
    expect(
      rule({ attendees: 5 }, { kind: 'room_booking', terms: { start_at: 'not a date' } }, NO_HISTORY),
    ).toMatchObject({ ok: false, code: 'invalid_mandate' });
    expect(SUPPORT.userId).toBe('E17');
  });
});
