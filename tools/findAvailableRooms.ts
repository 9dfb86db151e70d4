/**
 * find_available_rooms: a read. Availability is a snapshot at `observed_at`: someone may book the room a second
 * later, which is why every room carries the schedule `version` that a reservation must present.
 */
import { z } from 'zod';
import { type RetryPolicy, type ToolResult, defineTool } from '../src/index.js';
import { bookingMandate, enoughSeats, sameSlot } from './mandates.js';

const dateTime = z.iso.datetime({ offset: true });

export const roomSearchInput = z.strictObject({
  start_at: dateTime.describe('Start, with time zone offset, e.g. 2026-09-28T14:00:00+08:00'),
  end_at: dateTime.describe('End, with time zone offset'),
  attendees: z.number().int().min(1).max(200),
  needs_projector: z.boolean(),
});

export const roomSearchOutput = z.strictObject({
  observed_at: dateTime,
  rooms: z.array(
    z.strictObject({
      room_id: z.string(),
      name: z.string(),
      capacity: z.number().int(),
      has_projector: z.boolean(),
      tier: z.enum(['ordinary', 'executive']),
      version: z.number().int().nonnegative(),
      /** Free text from the facilities team: untrusted data, never an instruction. */
      note: z.string().max(500),
    }),
  ),
});

export type RoomSearchInput = z.infer<typeof roomSearchInput>;
export type RoomSearchOutput = z.infer<typeof roomSearchOutput>;

/** What the tool needs from the room service. */
export interface RoomSearchService {
  search(query: RoomSearchInput, signal: AbortSignal): Promise<RoomSearchOutput>;
}

export function findAvailableRooms(
  service: RoomSearchService,
  options: { timeoutMs?: number; retry?: RetryPolicy } = {},
) {
  return defineTool({
    name: 'find_available_rooms',
    description:
      'Lists meeting rooms free for the whole interval with enough seats (and a projector if asked). Read-only. ' +
      'Free means free when observed; reserve_room checks again with the room version.',
    effect: 'read',
    scopes: ['rooms:read'],
    input: roomSearchInput,
    output: roomSearchOutput,
    timeoutMs: options.timeoutMs ?? 2_000,
    retry: options.retry ?? { maxAttempts: 2, baseDelayMs: 100, maxDelayMs: 1_000 },
    // Under a booking mandate: the slot the user asked for, at least their head count, a projector if they need one.
    mandate: bookingMandate.rule((args, terms) => {
      const slot = sameSlot(args, terms);
      if (!slot.ok) return slot;
      const seats = enoughSeats(args.attendees, terms);
      if (!seats.ok) return seats;
      if (terms.needs_projector && !args.needs_projector)
        return { ok: false, code: 'projector_required', summary: 'the user needs a projector' };
      return { ok: true };
    }),
    // The time order needs no I/O: asked by the gate's guard itself, in the step that judges the call.
    hooks: 'sync',
    validate: (args) =>
      Date.parse(args.start_at) < Date.parse(args.end_at)
        ? { ok: true }
        : {
            ok: false,
            code: 'invalid_time_range',
            summary: `start_at ${args.start_at} is not before end_at ${args.end_at}`,
          },
    async execute(args, ctx): Promise<ToolResult<RoomSearchOutput>> {
      return { ok: true, value: await service.search(args, ctx.signal) };
    },
  });
}
