/**
 * reserve_room: a write. Succeeds only with status "confirmed" and a booking id. The service re-checks the
 * schedule version atomically and records the host's idempotency key, so a lost response can be looked up and a
 * same-key retry never books twice. Who books comes from the principal, never from the arguments.
 */
import { z } from 'zod';
import { type ToolResult, type ValidationResult, defineTool } from '../src/index.js';
import { bookingMandate, enoughSeats, sameSlot } from './mandates.js';

const dateTime = z.iso.datetime({ offset: true });
const MAX_MINUTES = 8 * 60;

export const reserveRoomInput = z.strictObject({
  room_id: z.string().min(1).max(32),
  start_at: dateTime,
  end_at: dateTime,
  attendees: z.number().int().min(1).max(200),
  expected_version: z.number().int().nonnegative().describe('The room version seen by find_available_rooms'),
});

export const bookingSchema = z.strictObject({
  status: z.literal('confirmed'),
  booking_id: z.string(),
  room_id: z.string(),
  start_at: dateTime,
  end_at: dateTime,
});

export type ReserveRoomInput = z.infer<typeof reserveRoomInput>;
export type Booking = z.infer<typeof bookingSchema>;

export interface RoomFacts {
  roomId: string;
  capacity: number;
  hasProjector: boolean;
  tier: 'ordinary' | 'executive';
}

/** What the tool needs from the booking service. */
export interface RoomBookingService {
  /** Business "now" of the service (ms since epoch): bookings in the past are refused. */
  now(): number;
  room(roomId: string): Promise<RoomFacts | undefined>;
  /** Atomic: checks the version and overlaps, books, stores the idempotency key. Same key → same booking. */
  reserve(
    request: ReserveRoomInput & { requesterId: string; idempotencyKey: string },
    signal: AbortSignal,
  ): Promise<{ status: 'confirmed'; booking: Booking } | { status: 'conflict'; detail: string }>;
  findByIdempotencyKey(key: string): Promise<Booking | undefined>;
}

export interface ReserveRoomOptions {
  timeoutMs?: number;
  /**
   * Undo a booking with `cancel_booking` (installed beside it) when the task that made it stops without meeting its
   * goal: the booking's compensation.
   */
  cancelOnStop?: boolean;
}

export function reserveRoom(service: RoomBookingService, options: ReserveRoomOptions = {}) {
  return defineTool({
    name: 'reserve_room',
    description:
      'Books one room for the interval. Writes: only status "confirmed" with a booking_id is success. ' +
      'On conflict (the room changed since you looked), search again and choose again.',
    effect: 'write',
    scopes: ['rooms:book'],
    input: reserveRoomInput,
    output: bookingSchema,
    timeoutMs: options.timeoutMs ?? 3_000,
    sameKeyRetrySafe: true,
    // A booking for the requester alone, in a free slot, that they can cancel: it runs without asking them again.
    confirm: {
      never: 'books a room for the requester only, within the slot of their request; a booking can be cancelled',
    },
    // Written on what find_available_rooms saw (the room's version): not while that search's result is unknown.
    dependsOn: ['find_available_rooms'],
    // Under a booking mandate: exactly the slot the user asked for, for at least as many people. (The projector is a
    // fact of the room, not of the arguments: `validate` checks it against the mandate, again right before the write.)
    mandate: bookingMandate.rule((args, terms) => {
      const slot = sameSlot(args, terms);
      return slot.ok ? enoughSeats(args.attendees, terms) : slot;
    }),
    async validate(args, ctx): Promise<ValidationResult> {
      const start = Date.parse(args.start_at);
      const end = Date.parse(args.end_at);
      if (!(start < end)) {
        return {
          ok: false,
          code: 'invalid_time_range',
          summary: `start_at ${args.start_at} is not before end_at ${args.end_at}`,
        };
      }
      if (end - start > MAX_MINUTES * 60_000) {
        return { ok: false, code: 'invalid_time_range', summary: `bookings are limited to ${MAX_MINUTES / 60} hours` };
      }
      if (start < service.now())
        return { ok: false, code: 'invalid_time_range', summary: `${args.start_at} is in the past` };
      const room = await service.room(args.room_id);
      if (!room) return { ok: false, code: 'not_found', summary: `there is no room ${args.room_id}` };
      if (args.attendees > room.capacity) {
        return {
          ok: false,
          code: 'capacity_exceeded',
          summary: `${args.room_id} seats ${room.capacity}, not ${args.attendees}`,
        };
      }
      if (bookingMandate.termsOf(ctx.mandate)?.needs_projector && !room.hasProjector) {
        return {
          ok: false,
          code: 'projector_required',
          summary: `${args.room_id} has no projector, and the user needs one`,
        };
      }
      return { ok: true };
    },
    async authorize(args, ctx): Promise<ValidationResult> {
      const room = await service.room(args.room_id);
      if (room?.tier === 'executive' && !ctx.principal.scopes.includes('rooms:book:executive')) {
        return {
          ok: false,
          summary: `${args.room_id} is an executive room; ${ctx.principal.userId} may book ordinary rooms only`,
        };
      }
      return { ok: true };
    },
    async execute(args, ctx): Promise<ToolResult<Booking>> {
      const result = await service.reserve(
        { ...args, requesterId: ctx.principal.userId, idempotencyKey: ctx.idempotencyKey },
        ctx.signal,
      );
      if (result.status === 'confirmed') return { ok: true, value: result.booking };
      return { ok: false, code: 'conflict', summary: result.detail };
    },
    async lookup(idempotencyKey) {
      const booking = await service.findByIdempotencyKey(idempotencyKey);
      return booking ? { found: true, value: booking } : { found: false };
    },
    ...(options.cancelOnStop
      ? {
          compensation: {
            tool: 'cancel_booking',
            args: (_args: ReserveRoomInput, booking: Booking) => ({ booking_id: booking.booking_id }),
          },
        }
      : {}),
  });
}
