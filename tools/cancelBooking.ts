/**
 * cancel_booking: a write that undoes a booking, and the compensation of reserve_room. Only the requester's own
 * bookings can be cancelled (the service checks who asks, from the principal). The model is not offered it as a way
 * out of a booking mandate: under one, a proposed cancellation is outside what the user asked for; the host runs it
 * as a compensation when a task that booked stops without meeting its goal.
 */
import { z } from 'zod';
import { type ToolResult, defineTool } from '../src/index.js';
import { bookingMandate } from './mandates.js';

export const cancelBookingInput = z.strictObject({ booking_id: z.string().min(1).max(32) });

export const cancellationSchema = z.strictObject({
  status: z.literal('cancelled'),
  booking_id: z.string(),
  cancelled_at: z.iso.datetime({ offset: true }),
});

export type Cancellation = z.infer<typeof cancellationSchema>;

/** What the tool needs from the booking service. */
export interface BookingCancellationService {
  /** Idempotent by key: the same key answers with the same cancellation. */
  cancel(
    request: { bookingId: string; requesterId: string; idempotencyKey: string },
    signal: AbortSignal,
  ): Promise<
    { status: 'cancelled'; cancellation: Cancellation } | { status: 'not_found' | 'forbidden'; detail: string }
  >;
  findCancellationByKey(key: string): Promise<Cancellation | undefined>;
}

export function cancelBooking(service: BookingCancellationService, options: { timeoutMs?: number } = {}) {
  return defineTool({
    name: 'cancel_booking',
    description:
      'Cancels one of the requester\'s own bookings by its booking_id. Writes: only status "cancelled" is success.',
    effect: 'write',
    scopes: ['rooms:book'],
    input: cancelBookingInput,
    output: cancellationSchema,
    timeoutMs: options.timeoutMs ?? 3_000,
    sameKeyRetrySafe: true,
    confirm: { never: "cancels the requester's own booking, which the service checks; nobody else is affected" },
    // Not part of any booking request: a model under a booking mandate cannot cancel on its own.
    mandate: bookingMandate.rule(() => ({
      ok: false,
      code: 'not_requested',
      summary: 'the user asked for a booking, not for a cancellation',
    })),
    async execute(args, ctx): Promise<ToolResult<Cancellation>> {
      const result = await service.cancel(
        { bookingId: args.booking_id, requesterId: ctx.principal.userId, idempotencyKey: ctx.idempotencyKey },
        ctx.signal,
      );
      if (result.status === 'cancelled') return { ok: true, value: result.cancellation };
      return { ok: false, code: result.status, summary: result.detail };
    },
    async lookup(idempotencyKey) {
      const cancellation = await service.findCancellationByKey(idempotencyKey);
      return cancellation ? { found: true, value: cancellation } : { found: false };
    },
  });
}
