/**
 * The demo's four tools over its business services, for a process that continues a stored demo task (the step
 * CLI): in memory (seeded afresh in each process, which is enough to step through a demo task) or, with the Redis
 * store, over the Redis-backed services under the same prefix (shared by every process).
 */
import { findAvailableRooms } from '../../tools/findAvailableRooms.js';
import { getOrder } from '../../tools/getOrder.js';
import { refundOrder } from '../../tools/refundOrder.js';
import { reserveRoom } from '../../tools/reserveRoom.js';
import type { Clock } from '../clock.js';
import type { Tool } from '../tool.js';
import { BookingService, type BookingRow } from './bookingService.js';
import { RefundDesk, type RefundRow } from './refundService.js';

export interface DemoServices {
  tools: Tool[];
  /** Where the business rows live: "in this process" or "in Redis". */
  where: string;
  rows(): Promise<{ bookings: BookingRow[]; refunds: RefundRow[] }>;
  close(): Promise<void>;
}

export async function openDemoServices(kind: 'memory' | 'redis', options: { prefix: string; clock?: Clock }): Promise<DemoServices> {
  if (kind === 'redis') {
    const { RedisBookingService } = await import('./redisBookingService.js');
    const { durableDemoTools } = await import('./durableDemo.js');
    const services = new RedisBookingService({ prefix: options.prefix });
    await services.seed();
    return {
      tools: durableDemoTools(services),
      where: `in Redis (prefix ${options.prefix})`,
      rows: async () => ({ bookings: await services.bookings(), refunds: await services.refunds() }),
      close: () => services.close(),
    };
  }
  const clock = options.clock;
  const booking = new BookingService(undefined, clock ? () => clock.now() : undefined);
  const desk = new RefundDesk();
  return {
    tools: [
      findAvailableRooms(booking, { timeoutMs: 2_000, retry: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 200 } }),
      reserveRoom(booking, { timeoutMs: 3_000 }),
      getOrder(desk),
      refundOrder(desk, { confirmAboveCents: 10_000 }),
    ],
    where: 'in this process (the demo services are seeded afresh per process)',
    rows: async () => ({ bookings: booking.bookings, refunds: desk.refunds }),
    close: async () => {},
  };
}
