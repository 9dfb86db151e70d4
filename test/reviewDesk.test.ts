/**
 * The review desk: a write whose outcome nobody could establish, or that its tool found inconsistent, holds the
 * task in `review_required` (a waiting state; listing by it is the queue) until a reviewer says what happened.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { BookingService } from '../examples/booking/bookingService.js';
import { ManualClock, reply } from '../src/testing/index.js';
import { defineTool } from '../src/tool.js';
import { paymentTool } from './support/paymentTool.js';
import {
  BOOKING_GOAL,
  BOOKING_MANDATE,
  BOOKING_SUCCESS,
  E17,
  SUPPORT,
  byKind,
  harness,
  reserveArgs,
  until,
} from './support/harness.js';

const REVIEWER = { userId: 'R2', tenantId: 'acme', scopes: ['tasks:review'] };

/** A booking whose response is lost and whose lookups fail: held for review, with B204 in fact created. */
async function heldBooking() {
  const bookings = new BookingService();
  bookings.faults.loseNextReserveResponse = true;
  bookings.findByIdempotencyKey = async () => {
    throw new Error('booking index unavailable');
  };
  const h = harness({ bookings, script: [reply.call('reserve_room', reserveArgs()), reply.answer('Booked B204.')] });
  const status = await h.orchestrator.run({
    principal: E17,
    goal: BOOKING_GOAL,
    success: BOOKING_SUCCESS,
    mandate: BOOKING_MANDATE,
    taskId: 'lost',
  });
  return { ...h, bookings, status };
}

describe('a lost response whose lookups cannot settle it', () => {
  it('waits in the review queue, holding the write and its key, with nothing else of the batch run', async () => {
    const { orchestrator, status, bookings } = await heldBooking();
    expect(status).toMatchObject({ state: 'review_required', outcome: null, stateValue: 'reviewRequired' });
    expect(status.review).toMatchObject({
      tool: 'reserve_room',
      reason: 'write_outcome_unknown',
      idempotencyKey: bookings.reserveRequests[0]!.idempotencyKey,
    });
    expect(status.review!.summary).toContain('could not be established after 3 lookup(s)');
    expect((await orchestrator.list({ states: ['review_required'] })).map((t) => t.taskId)).toEqual(['lost']);
    const held = byKind(await orchestrator.audit('lost'), 'review');
    expect(held).toEqual([expect.objectContaining({ action: 'held', code: 'write_outcome_unknown' })]);
  });

  it('is resolved only by a reviewer: not the task user, even holding the scope; a cancel waits for the review', async () => {
    const { orchestrator } = await heldBooking();
    const user = await orchestrator.resolveReview('lost', E17, { resolution: 'not_happened' });
    expect(user).toMatchObject({ accepted: false, code: 'not_a_reviewer' });
    const ownReview = await orchestrator.resolveReview(
      'lost',
      { ...E17, scopes: ['tasks:review'] },
      { resolution: 'not_happened' },
    );
    expect(ownReview).toMatchObject({ accepted: false, code: 'not_a_reviewer' });
    const otherTenant = await orchestrator.resolveReview(
      'lost',
      { ...REVIEWER, tenantId: 'globex' },
      { resolution: 'not_happened' },
    );
    expect(otherTenant).toMatchObject({ accepted: false, code: 'wrong_tenant' });
    expect((await orchestrator.status('lost')).state).toBe('review_required');
  });

  it('takes a cancel while it waits, and applies it once the reviewer said what the write did', async () => {
    const { orchestrator, bookings } = await heldBooking();
    const cancel = await orchestrator.cancel('lost', E17, 'never mind');
    expect(cancel).toMatchObject({ accepted: true, code: 'cancel_deferred', status: { state: 'review_required' } });
    // A retry is no longer what the user wants: the reviewer must say whether it happened.
    const retry = await orchestrator.resolveReview('lost', REVIEWER, { resolution: 'retry' });
    expect(retry).toMatchObject({
      accepted: false,
      code: 'invalid_review',
      message: expect.stringContaining('cancelled meanwhile'),
    });
    const booking = bookings.bookings[0]!;
    const found = {
      status: 'confirmed',
      booking_id: booking.bookingId,
      room_id: booking.roomId,
      start_at: booking.startAt,
      end_at: booking.endAt,
    };
    await orchestrator.resolveReview('lost', REVIEWER, { resolution: 'happened', result: found });
    const status = await orchestrator.settled('lost');
    expect(status).toMatchObject({
      state: 'cancelled',
      outcome: { reason: { code: 'cancelled', message: 'cancelled by E17: never mind' } },
    });
    // The booking the reviewer found stays on record: it is the task's evidence, and nothing else was sent.
    expect(status.evidence.at(-1)?.fields).toEqual({ status: 'confirmed', booking_id: 'B204' });
    expect(bookings.reserveRequests).toHaveLength(1);
  });

  it('goes on to done with the booking the reviewer found, which becomes the trusted result', async () => {
    const { orchestrator, bookings } = await heldBooking();
    const booking = bookings.bookings[0]!;
    const found = {
      status: 'confirmed',
      booking_id: booking.bookingId,
      room_id: booking.roomId,
      start_at: booking.startAt,
      end_at: booking.endAt,
    };
    const invalid = await orchestrator.resolveReview('lost', REVIEWER, {
      resolution: 'happened',
      result: { booking_id: 'B204' },
    });
    expect(invalid).toMatchObject({ accepted: false, code: 'invalid_review' });
    const resolved = await orchestrator.resolveReview('lost', REVIEWER, {
      resolution: 'happened',
      result: found,
      note: 'found in the room system',
    });
    expect(resolved.accepted).toBe(true);
    const status = await orchestrator.settled('lost');
    expect(status).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } }, review: null });
    expect(status.evidence.at(-1)?.fields).toEqual({ status: 'confirmed', booking_id: 'B204' });
    expect(bookings.bookings).toHaveLength(1);
    expect(bookings.reserveRequests).toHaveLength(1);
    const reviews = byKind(await orchestrator.audit('lost'), 'review').map(
      (r) => `${r.action} ${r.code} ${r.userId ?? '-'} ${r.scope ?? '-'}`,
    );
    expect(reviews).toEqual([
      'held write_outcome_unknown - -',
      'refused invalid_review R2 tasks:review',
      'resolved happened R2 tasks:review',
    ]);
    // The model was shown the reviewer's finding as the write's result.
    const transcript = await orchestrator.transcript('lost');
    expect(transcript.filter((e) => e.kind === 'result').map((e) => e.kind === 'result' && e.observation.ok)).toEqual([
      true,
    ]);
  });

  it('tells the model when the reviewer finds it did not happen', async () => {
    const { orchestrator } = await heldBooking();
    await orchestrator.resolveReview('lost', REVIEWER, { resolution: 'not_happened', note: 'no such booking' });
    const status = await orchestrator.settled('lost');
    expect(status).toMatchObject({ state: 'failed', outcome: { reason: { code: 'goal_not_met' } } });
    const result = (await orchestrator.transcript('lost')).find((e) => e.kind === 'result');
    expect(result).toMatchObject({
      observation: {
        ok: false,
        code: 'not_executed',
        summary: 'a reviewer established that this write did not take effect (no such booking)',
      },
    });
  });

  it('retries with the same key when asked, for a tool that never duplicates on one: still one booking', async () => {
    const { orchestrator, bookings } = await heldBooking();
    const retried = await orchestrator.resolveReview('lost', REVIEWER, { resolution: 'retry' });
    expect(retried.accepted).toBe(true);
    const status = await orchestrator.settled('lost');
    expect(status.state).toBe('done');
    expect(bookings.reserveRequests.map((r) => r.idempotencyKey)).toEqual([
      bookings.reserveRequests[0]!.idempotencyKey,
      bookings.reserveRequests[0]!.idempotencyKey,
    ]);
    expect(bookings.bookings).toHaveLength(1);
    expect(status.budget.used.retries).toBeGreaterThan(0);
  });

  it('refuses a retry of a tool that may duplicate on the same key', async () => {
    const sent: string[] = [];
    const h = harness({
      extraTools: [paymentTool({ sent, hang: () => true, timeoutMs: 20 })],
      script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')],
    });
    const status = await h.orchestrator.run({ principal: E17, goal: 'pay', taskId: 'pay' });
    expect(status.state).toBe('review_required');
    const retry = await h.orchestrator.resolveReview('pay', REVIEWER, { resolution: 'retry' });
    expect(retry).toMatchObject({
      accepted: false,
      code: 'invalid_review',
      message: expect.stringContaining('not safe to retry'),
    });
    expect(sent).toHaveLength(1);
  });

  it('takes a cancel of the batch while it waits: the second write of the batch never runs', async () => {
    const sent: string[] = [];
    const tool = paymentTool({ sent, hang: (n) => n === 1, timeoutMs: 20 });
    const script = [
      reply.calls({ name: 'send_payment', args: { amount: 1 } }, { name: 'send_payment', args: { amount: 2 } }),
      reply.answer('x'),
    ];
    const h = harness({ extraTools: [tool], script });
    expect((await h.orchestrator.run({ principal: SUPPORT, goal: 'pay twice', taskId: 'cancel-review' })).state).toBe(
      'review_required',
    );
    const cancel = await h.orchestrator.cancel('cancel-review', SUPPORT, 'stop everything');
    expect(cancel).toMatchObject({ accepted: true, code: 'cancel_deferred' });
    await h.orchestrator.resolveReview('cancel-review', REVIEWER, { resolution: 'not_happened' });
    const status = await h.orchestrator.settled('cancel-review');
    // The cancel waited for the review, then applied before the second payment.
    expect(sent).toHaveLength(1);
    expect(status.state).toBe('cancelled');
  });

  it('the review desk\'s "happened" result must match the output schema before it counts as evidence', async () => {
    const sent: string[] = [];
    const h = harness({
      extraTools: [paymentTool({ sent, hang: () => true, timeoutMs: 20 })],
      script: [reply.call('send_payment', { amount: 5 }), reply.answer('paid')],
    });
    await h.orchestrator.run({
      principal: E17,
      goal: 'pay',
      success: { tool: 'send_payment', match: { status: 'sent' } },
      taskId: 'rv-result',
    });
    for (const result of [{ status: 'sent', extra: 1 }, { status: 'SENT' }, 'sent', null]) {
      const answer = await h.orchestrator.resolveReview('rv-result', REVIEWER, { resolution: 'happened', result });
      expect(answer.accepted, JSON.stringify(result)).toBe(false);
    }
    expect(
      (
        await h.orchestrator.resolveReview(
          'rv-result',
          { ...E17, scopes: ['tasks:review'] },
          { resolution: 'happened', result: { status: 'sent' } },
        )
      ).code,
    ).toBe('not_a_reviewer');
    expect((await h.orchestrator.status('rv-result')).state).toBe('review_required');
  });

  it('the sweep has nothing to deliver to a task waiting for review, and timer events change nothing there', async () => {
    const clock = new ManualClock();
    const sent: string[] = [];
    const h = harness({
      clock,
      expirySweepMs: 0,
      extraTools: [paymentTool({ sent, hang: () => true, timeoutMs: 20 })],
      script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')],
    });
    const start = h.orchestrator.run({ principal: E17, goal: 'pay', taskId: 'rv-timer' });
    // The write's timeout runs on the manual clock.
    await until(() => sent.length === 1);
    await clock.advance(1_000);
    expect((await start).state).toBe('review_required');
    await clock.advance(48 * 60 * 60_000);
    expect(await h.orchestrator.expireDue()).toBe(0);
    expect((await h.orchestrator.status('rv-timer')).state).toBe('review_required');
  });
});

describe('a write its tool finds inconsistent', () => {
  it("is held for review with the tool's reason, and resolved", async () => {
    const transfers: number[] = [];
    const transfer = defineTool({
      name: 'transfer_funds',
      description: 'Moves funds.',
      effect: 'write',
      scopes: [],
      timeoutMs: 100,
      sameKeyRetrySafe: true,
      confirm: { never: 'a test transfer; its test is about the review desk' },
      input: z.strictObject({ amount: z.number() }),
      output: z.strictObject({ status: z.literal('done'), transfer_id: z.string() }),
      execute: async (args) => {
        transfers.push(args.amount);
        return {
          ok: false as const,
          code: 'needs_review',
          summary: 'the ledger shows a transfer of the same amount a minute ago: possible duplicate',
        };
      },
      lookup: async () => ({ found: false as const }),
    });
    const h = harness({
      extraTools: [transfer],
      script: [reply.call('transfer_funds', { amount: 10 }), reply.answer('done')],
    });
    const status = await h.orchestrator.run({
      principal: E17,
      goal: 'transfer',
      success: { tool: 'transfer_funds', require: ['transfer_id'] },
      taskId: 'dup',
    });
    expect(status).toMatchObject({
      state: 'review_required',
      review: { reason: 'needs_review', summary: expect.stringContaining('possible duplicate') },
    });
    const finished = byKind(await h.orchestrator.audit('dup'), 'tool_finished');
    expect(finished.map((e) => e.code)).toEqual(['needs_review']);
    await h.orchestrator.resolveReview('dup', REVIEWER, {
      resolution: 'happened',
      result: { status: 'done', transfer_id: 'T-1' },
    });
    expect(await h.orchestrator.settled('dup')).toMatchObject({
      state: 'done',
      outcome: { reason: { code: 'goal_met' } },
    });
    expect(transfers).toEqual([10]);
  });

  it('answers a resolution sent to a task that does not wait for one', async () => {
    const h = harness({ script: [reply.answer('nothing to do')] });
    await h.orchestrator.run({ principal: E17, goal: 'x', taskId: 'idle' });
    const late = await h.orchestrator.resolveReview('idle', REVIEWER, { resolution: 'retry' });
    expect(late).toMatchObject({ accepted: false, code: 'task_finished' });
  });
});
