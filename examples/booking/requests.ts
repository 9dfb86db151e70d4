/**
 * Who asks for what in the demo: the principals the host's session gives, the goals, what counts as success, and the
 * mandates the host reads off each request.
 */
import type { Principal, SuccessCriterion } from '../../src/index.js';
import { bookingMandate, refundMandate } from '../../tools/mandates.js';

export const MEETING = {
  start_at: '2026-09-28T14:00:00+08:00',
  end_at: '2026-09-28T15:00:00+08:00',
  attendees: 3,
  needs_projector: true,
} as const;

/** E17's session: may read rooms and book ordinary ones. */
export const E17: Principal = { userId: 'E17', tenantId: 'acme', scopes: ['rooms:read', 'rooms:book'] };
/** E17 acting as a support agent on orders. */
export const E17_SUPPORT: Principal = { userId: 'E17', tenantId: 'acme', scopes: ['orders:read', 'refunds:write'] };

export const BOOKING_GOAL =
  'Book a meeting room on 2026-09-28 from 14:00 to 15:00 (+08:00) for 3 people with a projector. Any suitable ordinary room is fine.';
export const BOOKING_SUCCESS: SuccessCriterion = {
  tool: 'reserve_room',
  match: { status: 'confirmed' },
  require: ['booking_id'],
  description: 'a confirmed booking with a booking id',
};
/** What E17 asked for, as the host reads it off the request: the slot, at least 3 people, a projector. */
export const BOOKING_TERMS = {
  start_at: MEETING.start_at,
  end_at: MEETING.end_at,
  min_attendees: MEETING.attendees,
  needs_projector: MEETING.needs_projector,
};
/** One mandate of those terms. A mandate authorises one task: a host makes one per request (`bookingMandate.of`). */
export const BOOKING_MANDATE = bookingMandate.of(BOOKING_TERMS);
export const REFUND_GOAL =
  'The customer of order O-1001 asks for a refund of 199.00 because the projector arrived broken.';
/** The refund the customer asked for: order O-1001, at most 199.00. */
export const REFUND_TERMS = { order_id: 'O-1001', max_amount_cents: 19_900 };
/** One mandate of those terms (one task; a host makes one per request with `refundMandate.of`). */
export const REFUND_MANDATE = refundMandate.of(REFUND_TERMS);
export const REFUND_SUCCESS: SuccessCriterion = {
  tool: 'refund_order',
  match: { status: 'succeeded' },
  require: ['refund_id'],
  description: 'a succeeded refund with a refund id',
};

/** The four-eyes refund: 450.00 is above what E17 refunds alone (300.00), so a `refunds:approve` holder decides. */
export const APPROVAL_REFUND_GOAL =
  'The customer of order O-1002 asks for a refund of 450.00: the standing desk arrived with a cracked top.';
/** What that customer asked for: order O-1002, at most 450.00. */
export const APPROVAL_REFUND_TERMS = { order_id: 'O-1002', max_amount_cents: 45_000 };
/** Above this a refund needs an approver holding `refunds:approve` (not the requester): the demo's four-eyes rule. */
export const APPROVE_ABOVE_CENTS = 30_000;
