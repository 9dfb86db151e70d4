/**
 * A small meeting-room booking service for the demo and tests: versioned schedules, an atomic compare-and-set on
 * write, an idempotency store, and faults that can be switched on (a search that hangs, a rival booking between
 * read and write, a reservation whose response is lost after it committed).
 *
 * Fictional data from the design sources: "now" is 2026-09-26 13:00 +08:00; R7 seats 4 at schedule version 17,
 * R9 seats 6 at version 6; bookings are numbered from B204.
 */
import type { RoomSearchInput, RoomSearchOutput, RoomSearchService } from '../../tools/findAvailableRooms.js';
import type { Booking, ReserveRoomInput, RoomBookingService, RoomFacts } from '../../tools/reserveRoom.js';
import type { BookingCancellationService, Cancellation } from '../../tools/cancelBooking.js';

export interface Room {
  roomId: string;
  name: string;
  capacity: number;
  hasProjector: boolean;
  tier: 'ordinary' | 'executive';
  /** Schedule version: +1 on every booking of this room. */
  version: number;
  note: string;
}

export interface BookingRow {
  bookingId: string;
  roomId: string;
  startAt: string;
  endAt: string;
  attendees: number;
  requesterId: string;
  idempotencyKey: string | null;
  /** When it was cancelled (a cancelled booking frees its slot), or absent. */
  cancelledAt?: string;
}

export interface BookingFaults {
  /** The next N searches never answer (until aborted by the caller's timeout). */
  hangingSearches: number;
  /** Just before our next reservation of this room, another employee books the same slot. */
  rivalBeforeReserve: { roomId: string; requesterId: string } | null;
  /** The next reservation commits, then its response is lost (never arrives). */
  loseNextReserveResponse: boolean;
  /** The next cancellation commits, then its response is lost. */
  loseNextCancelResponse?: boolean;
}

export const DEMO_NOW = Date.parse('2026-09-26T13:00:00+08:00');

/**
 * The rooms free for the whole interval with enough seats (and a projector if asked), smallest first, as the
 * search tool reports them. Shared by the in-memory and the Redis-backed services.
 */
export function availableRooms(
  rooms: Iterable<Room>,
  bookings: readonly Pick<BookingRow, 'roomId' | 'startAt' | 'endAt' | 'cancelledAt'>[],
  query: RoomSearchInput,
): RoomSearchOutput['rooms'] {
  const start = Date.parse(query.start_at);
  const end = Date.parse(query.end_at);
  const taken = (roomId: string) =>
    bookings.some(
      (b) => !b.cancelledAt && b.roomId === roomId && Date.parse(b.startAt) < end && start < Date.parse(b.endAt),
    );
  return [...rooms]
    .filter((room) => room.capacity >= query.attendees && (!query.needs_projector || room.hasProjector))
    .filter((room) => !taken(room.roomId))
    .sort((a, b) => a.capacity - b.capacity || (a.roomId < b.roomId ? -1 : a.roomId > b.roomId ? 1 : 0))
    .map((room) => ({
      room_id: room.roomId,
      name: room.name,
      capacity: room.capacity,
      has_projector: room.hasProjector,
      tier: room.tier,
      version: room.version,
      note: room.note,
    }));
}

/**
 * A credential the facilities team left in R7's note, as people do: the search returns it to the task, and the
 * default redactors seal it before the model, the store or any stream sees it (the demo shows the token and checks
 * that the key is nowhere in the task's records).
 */
export const LEAKED_PANEL_KEY = 'sk-live-4eC39HqLyjWDarjtT1zdp7dc';

export function demoRooms(): Room[] {
  return [
    {
      roomId: 'R7',
      name: 'Room 7',
      capacity: 4,
      hasProjector: true,
      tier: 'ordinary',
      version: 17,
      note: `Whiteboard on the east wall. Door panel: api_key=${LEAKED_PANEL_KEY}`,
    },
    { roomId: 'R9', name: 'Room 9', capacity: 6, hasProjector: true, tier: 'ordinary', version: 6, note: '' },
    {
      roomId: 'R1',
      name: 'Board room',
      capacity: 12,
      hasProjector: true,
      tier: 'executive',
      version: 3,
      note: 'Executive floor.',
    },
    { roomId: 'R3', name: 'Room 3', capacity: 2, hasProjector: false, tier: 'ordinary', version: 11, note: '' },
  ];
}

export class BookingService implements RoomSearchService, RoomBookingService, BookingCancellationService {
  readonly rooms: Map<string, Room>;
  readonly bookings: BookingRow[] = [];
  readonly faults: BookingFaults = { hangingSearches: 0, rivalBeforeReserve: null, loseNextReserveResponse: false };
  /** Every reserve request that reached the service, for tests ("how many times was the write sent?"). */
  readonly reserveRequests: { idempotencyKey: string; roomId: string }[] = [];
  /** Every cancel request that reached the service ("was the compensation sent once?"). */
  readonly cancelRequests: { idempotencyKey: string; bookingId: string }[] = [];
  searches = 0;
  private readonly byKey = new Map<string, string>();
  private readonly cancelledByKey = new Map<string, string>();
  private nextNumber = 204;

  constructor(
    rooms: Room[] = demoRooms(),
    private readonly currentTime: () => number = () => DEMO_NOW,
  ) {
    this.rooms = new Map(rooms.map((room) => [room.roomId, { ...room }]));
  }

  now(): number {
    return this.currentTime();
  }

  async search(query: RoomSearchInput, signal: AbortSignal): Promise<RoomSearchOutput> {
    this.searches += 1;
    if (this.faults.hangingSearches > 0) {
      this.faults.hangingSearches -= 1;
      return never(signal);
    }
    const rooms = availableRooms(this.rooms.values(), this.bookings, query);
    return { observed_at: new Date(this.now()).toISOString(), rooms };
  }

  async room(roomId: string): Promise<RoomFacts | undefined> {
    const room = this.rooms.get(roomId);
    return room && { roomId: room.roomId, capacity: room.capacity, hasProjector: room.hasProjector, tier: room.tier };
  }

  async reserve(
    request: ReserveRoomInput & { requesterId: string; idempotencyKey: string },
    signal: AbortSignal,
  ): Promise<{ status: 'confirmed'; booking: Booking } | { status: 'conflict'; detail: string }> {
    this.reserveRequests.push({ idempotencyKey: request.idempotencyKey, roomId: request.room_id });
    const rival = this.faults.rivalBeforeReserve;
    if (rival && rival.roomId === request.room_id) {
      this.faults.rivalBeforeReserve = null;
      this.commit({ ...request, requesterId: rival.requesterId, idempotencyKey: null });
    }
    // Everything from here to the commit is synchronous: the compare-and-set is atomic.
    const existing = this.byKey.get(request.idempotencyKey);
    if (existing) return { status: 'confirmed', booking: this.receipt(existing) };
    const room = this.rooms.get(request.room_id);
    if (!room) return { status: 'conflict', detail: `room ${request.room_id} does not exist` };
    if (room.version !== request.expected_version) {
      return {
        status: 'conflict',
        detail: `${room.roomId} changed since it was read (version ${room.version}, not ${request.expected_version}); search again`,
      };
    }
    if (this.overlaps(room.roomId, Date.parse(request.start_at), Date.parse(request.end_at))) {
      return { status: 'conflict', detail: `${room.roomId} is already booked in that interval` };
    }
    const bookingId = this.commit(request);
    if (this.faults.loseNextReserveResponse) {
      this.faults.loseNextReserveResponse = false;
      return never(signal);
    }
    return { status: 'confirmed', booking: this.receipt(bookingId) };
  }

  async findByIdempotencyKey(key: string): Promise<Booking | undefined> {
    const bookingId = this.byKey.get(key);
    return bookingId ? this.receipt(bookingId) : undefined;
  }

  async cancel(
    request: { bookingId: string; requesterId: string; idempotencyKey: string },
    signal: AbortSignal,
  ): Promise<
    { status: 'cancelled'; cancellation: Cancellation } | { status: 'not_found' | 'forbidden'; detail: string }
  > {
    this.cancelRequests.push({ idempotencyKey: request.idempotencyKey, bookingId: request.bookingId });
    const earlier = this.cancelledByKey.get(request.idempotencyKey);
    if (earlier) return { status: 'cancelled', cancellation: this.cancellation(earlier) };
    const row = this.bookings.find((b) => b.bookingId === request.bookingId);
    if (!row) return { status: 'not_found', detail: `there is no booking ${request.bookingId}` };
    if (row.requesterId !== request.requesterId)
      return { status: 'forbidden', detail: `${request.bookingId} is not a booking of ${request.requesterId}` };
    row.cancelledAt ??= new Date(this.now()).toISOString();
    this.cancelledByKey.set(request.idempotencyKey, row.bookingId);
    if (this.faults.loseNextCancelResponse) {
      this.faults.loseNextCancelResponse = false;
      return never(signal);
    }
    return { status: 'cancelled', cancellation: this.cancellation(row.bookingId) };
  }

  async findCancellationByKey(key: string): Promise<Cancellation | undefined> {
    const bookingId = this.cancelledByKey.get(key);
    return bookingId ? this.cancellation(bookingId) : undefined;
  }

  private cancellation(bookingId: string): Cancellation {
    const row = this.bookings.find((b) => b.bookingId === bookingId)!;
    return { status: 'cancelled', booking_id: row.bookingId, cancelled_at: row.cancelledAt! };
  }

  private commit(request: ReserveRoomInput & { requesterId: string; idempotencyKey: string | null }): string {
    const bookingId = `B${this.nextNumber++}`;
    this.bookings.push({
      bookingId,
      roomId: request.room_id,
      startAt: request.start_at,
      endAt: request.end_at,
      attendees: request.attendees,
      requesterId: request.requesterId,
      idempotencyKey: request.idempotencyKey,
    });
    const room = this.rooms.get(request.room_id);
    if (room) room.version += 1;
    if (request.idempotencyKey) this.byKey.set(request.idempotencyKey, bookingId);
    return bookingId;
  }

  private receipt(bookingId: string): Booking {
    const row = this.bookings.find((b) => b.bookingId === bookingId)!;
    return {
      status: 'confirmed',
      booking_id: row.bookingId,
      room_id: row.roomId,
      start_at: row.startAt,
      end_at: row.endAt,
    };
  }

  private overlaps(roomId: string, start: number, end: number): boolean {
    return this.bookings.some(
      (b) => !b.cancelledAt && b.roomId === roomId && Date.parse(b.startAt) < end && start < Date.parse(b.endAt),
    );
  }
}

/** A call that never answers: it settles only by rejecting when the caller aborts. */
function never<T>(signal: AbortSignal): Promise<T> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}
