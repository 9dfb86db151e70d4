/**
 * The example domain's mandates: what the user asked for, as the host reads it off the request before the task
 * starts. A booking mandate names the slot, the head count and whether a projector is needed; a refund mandate
 * names the order and the most the user asked to refund. Each tool's rule says how its arguments must fit.
 */
import { z } from 'zod';
import { defineMandate } from '../src/index.js';

const dateTime = z.iso.datetime({ offset: true });

export const bookingMandate = defineMandate(
  'room_booking',
  z.strictObject({
    start_at: dateTime,
    end_at: dateTime,
    min_attendees: z.number().int().positive(),
    needs_projector: z.boolean(),
  }),
);

export const refundMandate = defineMandate(
  'refund',
  z.strictObject({ order_id: z.string().min(1), max_amount_cents: z.number().int().positive() }),
  // The task's money budget is what the user asked to refund, at most. A sub-task's refund mandate is within its
  // parent's when it is about the same order and asks for no more.
  {
    money: (terms) => terms.max_amount_cents,
    within: (child, parent) => child.order_id === parent.order_id && child.max_amount_cents <= parent.max_amount_cents,
  },
);

export type BookingTerms = z.infer<typeof bookingMandate.schema>;

const instant = (text: string) => Date.parse(text);
const money = (cents: number) => (cents / 100).toFixed(2);

/** The same instants as the mandate's slot (offsets may differ: 06:00Z is 14:00+08:00). */
export function sameSlot(args: { start_at: string; end_at: string }, terms: BookingTerms) {
  if (instant(args.start_at) === instant(terms.start_at) && instant(args.end_at) === instant(terms.end_at))
    return { ok: true } as const;
  return {
    ok: false,
    code: 'other_slot',
    summary: `${args.start_at}–${args.end_at} is not the slot the user asked for (${terms.start_at}–${terms.end_at})`,
  } as const;
}

/** A booking for fewer people than asked fits nobody's request. */
export function enoughSeats(attendees: number, terms: BookingTerms) {
  if (attendees >= terms.min_attendees) return { ok: true } as const;
  return {
    ok: false,
    code: 'too_few_attendees',
    summary: `${attendees} attendees, but the user asked for ${terms.min_attendees}`,
  } as const;
}

/** The order the user asked about, and no more than they asked for: this refund plus what the task refunded already. */
export function withinRefund(
  args: { order_id: string; amount_cents?: number },
  terms: z.infer<typeof refundMandate.schema>,
  task: { moneyMoved: number } = { moneyMoved: 0 },
) {
  if (args.order_id !== terms.order_id) {
    return {
      ok: false,
      code: 'other_order',
      summary: `${args.order_id} is not the order the user asked about (${terms.order_id})`,
    } as const;
  }
  if (args.amount_cents !== undefined && args.amount_cents + task.moneyMoved > terms.max_amount_cents) {
    const already = task.moneyMoved > 0 ? ` (with the ${money(task.moneyMoved)} this task refunded already)` : '';
    return {
      ok: false,
      code: 'amount_above_request',
      summary: `${money(args.amount_cents)}${already} is more than the ${money(terms.max_amount_cents)} the user asked to refund`,
    } as const;
  }
  return { ok: true } as const;
}

/** `money(c)` as the tools print it. */
export { money };
