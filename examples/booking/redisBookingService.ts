/**
 * The demo's booking and refund services with their state in Redis, for tests across processes and for the tasks
 * CLI: rooms with schedule versions, bookings, refunds and the idempotency keys that map to them live under a key
 * prefix, so a process that dies and the one that takes over see the same business data. Each reservation and
 * each refund is one Lua script (`lua/reserveRoom.lua`, `lua/refundOrder.lua`) with the semantics of the
 * in-memory `BookingService.reserve` and `RefundDesk.refund`.
 *
 * Faults are stored in Redis too (`injectFaults`), so a test process can make a worker process misbehave at a
 * chosen point: each occurrence is consumed atomically by whichever process meets it first.
 */
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { RoomSearchInput, RoomSearchOutput, RoomSearchService } from '../../tools/findAvailableRooms.js';
import type { Order } from '../../tools/getOrder.js';
import type { Refund, RefundOrderInput, RefundService } from '../../tools/refundOrder.js';
import type { Booking, ReserveRoomInput, RoomBookingService, RoomFacts } from '../../tools/reserveRoom.js';
import { type BookingRow, DEMO_NOW, type Room, availableRooms, demoRooms } from './bookingService.js';
import { type OrderRecord, type RefundRow, demoOrders } from './refundService.js';

/** Faults to inject: each is a count of occurrences, consumed one at a time by any process using the prefix. */
export interface RedisDemoFaults {
  /** The next N searches never answer (until the caller aborts them). */
  hangSearches?: number;
  /** The next N searches answer only after `slowSearchMs`. */
  slowSearches?: number;
  slowSearchMs?: number;
  /** The next N reservations stall before reaching the service: the tool's execute ran, nothing is committed. */
  stallReserves?: number;
  /** The next N reservations commit, then their response is lost (never arrives). */
  loseReserveResponses?: number;
  /** The next N refunds commit, then their response is lost. */
  loseRefundResponses?: number;
  /** The next N idempotency-key lookups (bookings or refunds) never answer. */
  hangLookups?: number;
}

export type RedisDemoFault = Exclude<keyof RedisDemoFaults, 'slowSearchMs'>;

export interface RedisBookingServiceOptions {
  /** A client to use (left open on `close()`); otherwise one is created for `url`. */
  client?: Redis;
  /** Default: REDIS_URL, else redis://127.0.0.1:6379. */
  url?: string;
  /** Key prefix; every key is under the `{prefix}` hash tag. */
  prefix: string;
  /** Business "now" (default: the demo's fictional 2026-09-26 13:00 +08:00). */
  now?: () => number;
  /** Called when this process meets an injected fault, just before it misbehaves (crash tests print a marker). */
  onFault?: (fault: RedisDemoFault) => void;
}

interface DemoScripts {
  demoReserveRoom(...args: (string | number)[]): Promise<[number, string, number?]>;
  demoRefundOrder(...args: (string | number)[]): Promise<[number, string, string?]>;
  demoSeed(...args: (string | number)[]): Promise<number>;
  demoTakeFault(...args: (string | number)[]): Promise<number>;
}

const lua = (name: string) => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8');
const SCRIPTS: Record<keyof DemoScripts, { lua: string; numberOfKeys: number }> = {
  demoReserveRoom: { lua: lua('reserveRoom'), numberOfKeys: 8 },
  demoRefundOrder: { lua: lua('refundOrder'), numberOfKeys: 7 },
  demoSeed: { lua: lua('seedDemo'), numberOfKeys: 6 },
  demoTakeFault: { lua: lua('takeFault'), numberOfKeys: 1 },
};

/**
 * Room and refund services on Redis, interchangeable with `BookingService` and `RefundDesk` for the tools (the
 * refund tool takes `refundService()`).
 *
 * @example
 * const services = new RedisBookingService({ prefix: 'demo' });
 * await services.seed();
 * const tools = [findAvailableRooms(services), reserveRoom(services), refundOrder(services.refundService())];
 */
export class RedisBookingService implements RoomSearchService, RoomBookingService {
  private readonly client: Redis & DemoScripts;
  private readonly ownsClient: boolean;
  private readonly k: ReturnType<typeof demoKeys>;

  constructor(private readonly options: RedisBookingServiceOptions) {
    this.k = demoKeys(options.prefix);
    this.ownsClient = options.client === undefined;
    const client =
      options.client ??
      new Redis(options.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
        maxRetriesPerRequest: 1,
        connectTimeout: 1_000,
        commandTimeout: 3_000,
      });
    for (const [name, definition] of Object.entries(SCRIPTS)) client.defineCommand(name, definition);
    this.client = client as Redis & DemoScripts;
  }

  /** Writes the demo rooms and orders unless the prefix holds them already. Returns true when it wrote them. */
  async seed(rooms: Room[] = demoRooms(), orders: OrderRecord[] = demoOrders()): Promise<boolean> {
    const k = this.k;
    const roomArgs = rooms.flatMap(({ version, ...facts }) => [facts.roomId, JSON.stringify(facts), version]);
    const orderArgs = orders.flatMap((order) => [order.orderId, JSON.stringify(order)]);
    const seeded = await this.client.demoSeed(
      k.seeded,
      k.rooms,
      k.versions,
      k.bookingSeq,
      k.orders,
      k.refundSeq,
      203,
      9000,
      rooms.length,
      ...roomArgs,
      ...orderArgs,
    );
    return seeded === 1;
  }

  /** Arms faults (adds to the counts already armed). */
  async injectFaults(faults: RedisDemoFaults): Promise<void> {
    const pipeline = this.client.pipeline();
    for (const [name, value] of Object.entries(faults)) {
      if (name === 'slowSearchMs') pipeline.hset(this.k.faults, name, value as number);
      else pipeline.hincrby(this.k.faults, name, value as number);
    }
    await pipeline.exec();
  }

  /** Occurrences of each fault not yet consumed. */
  async pendingFaults(): Promise<Record<string, number>> {
    const raw = await this.client.hgetall(this.k.faults);
    return Object.fromEntries(Object.entries(raw).map(([name, value]) => [name, Number(value)]));
  }

  now(): number {
    return (this.options.now ?? (() => DEMO_NOW))();
  }

  // --- rooms ----------------------------------------------------------------------------------------------

  async search(query: RoomSearchInput, signal: AbortSignal): Promise<RoomSearchOutput> {
    if (await this.take('hangSearches')) return never(signal);
    if (await this.take('slowSearches')) {
      const ms = Number((await this.client.hget(this.k.faults, 'slowSearchMs')) ?? 1000);
      await abortableDelay(ms, signal);
    }
    const [rooms, versions, bookings] = await Promise.all([
      this.client.hgetall(this.k.rooms),
      this.client.hgetall(this.k.versions),
      this.bookings(),
    ]);
    const withVersions = Object.values(rooms).map((text) => {
      const room = JSON.parse(text) as Omit<Room, 'version'>;
      return { ...room, version: Number(versions[room.roomId]) };
    });
    return { observed_at: new Date(this.now()).toISOString(), rooms: availableRooms(withVersions, bookings, query) };
  }

  async room(roomId: string): Promise<RoomFacts | undefined> {
    const text = await this.client.hget(this.k.rooms, roomId);
    if (!text) return undefined;
    const room = JSON.parse(text) as Omit<Room, 'version'>;
    return { roomId: room.roomId, capacity: room.capacity, hasProjector: room.hasProjector, tier: room.tier };
  }

  async reserve(
    request: ReserveRoomInput & { requesterId: string; idempotencyKey: string },
    signal: AbortSignal,
  ): Promise<{ status: 'confirmed'; booking: Booking } | { status: 'conflict'; detail: string }> {
    if (await this.take('stallReserves')) return never(signal);
    const k = this.k;
    const [code, detail, lost] = await this.client.demoReserveRoom(
      k.rooms,
      k.versions,
      k.bookings,
      k.bookingKeys,
      k.bookingSeq,
      k.roomBookings(request.room_id),
      k.faults,
      k.reserveRequests,
      request.room_id,
      request.start_at,
      request.end_at,
      Date.parse(request.start_at),
      Date.parse(request.end_at),
      request.attendees,
      request.requesterId,
      request.idempotencyKey,
      request.expected_version,
    );
    if (code === 0) return { status: 'conflict', detail };
    if (lost === 1) {
      this.options.onFault?.('loseReserveResponses');
      return never(signal);
    }
    return { status: 'confirmed', booking: bookingReceipt(parseBooking(detail)) };
  }

  async findByIdempotencyKey(key: string): Promise<Booking | undefined> {
    if (await this.take('hangLookups')) return never();
    const bookingId = await this.client.hget(this.k.bookingKeys, key);
    const text = bookingId ? await this.client.hget(this.k.bookings, bookingId) : null;
    return text ? bookingReceipt(parseBooking(text)) : undefined;
  }

  /** Every booking, in booking-number order. */
  async bookings(): Promise<BookingRow[]> {
    const rows = Object.values(await this.client.hgetall(this.k.bookings)).map(parseBooking);
    return rows.sort((a, b) => Number(a.bookingId.slice(1)) - Number(b.bookingId.slice(1)));
  }

  // --- refunds --------------------------------------------------------------------------------------------

  async getOrder(tenantId: string, orderId: string): Promise<Order | undefined> {
    const [text, refunded] = await Promise.all([
      this.client.hget(this.k.orders, orderId),
      this.client.hget(this.k.refunded, orderId),
    ]);
    if (!text) return undefined;
    const order = JSON.parse(text) as OrderRecord;
    if (order.tenantId !== tenantId) return undefined;
    // The record's refundedCents is what was refunded before seeding; the hash counts refunds made here.
    const refundedCents = order.refundedCents + Number(refunded ?? 0);
    return {
      order_id: order.orderId,
      total_cents: order.totalCents,
      refunded_cents: refundedCents,
      refundable_cents: order.totalCents - refundedCents,
      currency: order.currency,
      customer_note: order.customerNote,
    };
  }

  async refund(
    request: RefundOrderInput & { tenantId: string; requestedBy: string; idempotencyKey: string },
    signal: AbortSignal,
  ): Promise<{ status: 'succeeded'; refund: Refund } | { status: 'rejected'; code: string; detail: string }> {
    const k = this.k;
    const [code, detail, more] = await this.client.demoRefundOrder(
      k.orders,
      k.refunded,
      k.refunds,
      k.refundKeys,
      k.refundSeq,
      k.faults,
      k.refundRequests,
      request.order_id,
      request.tenantId,
      request.amount_cents,
      request.requestedBy,
      request.idempotencyKey,
    );
    if (code === 0) return { status: 'rejected', code: detail, detail: String(more) };
    if (Number(more) === 1) {
      this.options.onFault?.('loseRefundResponses');
      return never(signal);
    }
    return { status: 'succeeded', refund: refundReceipt(JSON.parse(detail) as RefundRow) };
  }

  async refundByIdempotencyKey(key: string): Promise<Refund | undefined> {
    if (await this.take('hangLookups')) return never();
    const refundId = await this.client.hget(this.k.refundKeys, key);
    const text = refundId ? await this.client.hget(this.k.refunds, refundId) : null;
    return text ? refundReceipt(JSON.parse(text) as RefundRow) : undefined;
  }

  /** Every refund, in refund-number order. */
  async refunds(): Promise<RefundRow[]> {
    const rows = Object.values(await this.client.hgetall(this.k.refunds)).map((text) => JSON.parse(text) as RefundRow);
    return rows.sort((a, b) => Number(a.refundId.slice(3)) - Number(b.refundId.slice(3)));
  }

  /** How many reservation and refund requests reached the service (replays and conflicts included). */
  async requestCounts(): Promise<{ reserve: number; refund: number }> {
    const [reserve, refund] = await this.client.mget(this.k.reserveRequests, this.k.refundRequests);
    return { reserve: Number(reserve ?? 0), refund: Number(refund ?? 0) };
  }

  /** The refund service as the refund tool sees it (its lookup is by the refund's key, not a booking's). */
  refundService(): RefundService {
    return {
      getOrder: (tenantId, orderId) => this.getOrder(tenantId, orderId),
      refund: (request, signal) => this.refund(request, signal),
      findByIdempotencyKey: (key) => this.refundByIdempotencyKey(key),
    };
  }

  async close(): Promise<void> {
    if (!this.ownsClient) return;
    await this.client.quit().catch(() => this.client.disconnect());
  }

  /** Consumes one occurrence of `fault`; true when this process must now misbehave. */
  private async take(fault: RedisDemoFault): Promise<boolean> {
    const taken = (await this.client.demoTakeFault(this.k.faults, fault)) === 1;
    if (taken) this.options.onFault?.(fault);
    return taken;
  }
}

/** The service's keys: all under the `{prefix}` hash tag, so one Lua script may touch them in a cluster too. */
export function demoKeys(prefix: string) {
  if (prefix.length === 0 || /[{}]/.test(prefix)) {
    throw new TypeError(`Redis key prefix ${JSON.stringify(prefix)} must be non-empty and contain no braces`);
  }
  const root = `{${prefix}}:demo`;
  return {
    seeded: `${root}:seeded`,
    rooms: `${root}:rooms`,
    versions: `${root}:versions`,
    bookings: `${root}:bookings`,
    bookingKeys: `${root}:bookingKeys`,
    bookingSeq: `${root}:bookingSeq`,
    roomBookings: (roomId: string) => `${root}:roomBookings:${roomId}`,
    reserveRequests: `${root}:reserveRequests`,
    orders: `${root}:orders`,
    refunded: `${root}:refunded`,
    refunds: `${root}:refunds`,
    refundKeys: `${root}:refundKeys`,
    refundSeq: `${root}:refundSeq`,
    refundRequests: `${root}:refundRequests`,
    faults: `${root}:faults`,
  };
}

function parseBooking(text: string): BookingRow {
  const row = JSON.parse(text) as BookingRow & { startMs?: number; endMs?: number };
  return {
    bookingId: row.bookingId,
    roomId: row.roomId,
    startAt: row.startAt,
    endAt: row.endAt,
    attendees: row.attendees,
    requesterId: row.requesterId,
    idempotencyKey: row.idempotencyKey || null,
  };
}

function bookingReceipt(row: BookingRow): Booking {
  return {
    status: 'confirmed',
    booking_id: row.bookingId,
    room_id: row.roomId,
    start_at: row.startAt,
    end_at: row.endAt,
  };
}

function refundReceipt(row: RefundRow): Refund {
  return { status: 'succeeded', refund_id: row.refundId, order_id: row.orderId, amount_cents: row.amountCents };
}

/** A call that never answers: it settles only by rejecting when the caller aborts (or never, without a signal). */
function never<T>(signal?: AbortSignal): Promise<T> {
  return new Promise((_, reject) => {
    if (signal?.aborted) reject(signal.reason);
    signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
