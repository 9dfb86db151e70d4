/**
 * The booking demo as a host module for the store CLIs (`tasks`, `step`, `trace`; see src/cli/host.ts): the demo's
 * tools over its business services and the scripted demo model. With the file store the services live in the
 * CLI's own process, seeded afresh (enough to step through a demo task); with the Redis store they are the
 * Redis-backed services under the task's prefix, shared by every process.
 *
 *   npm run step -- refund-1            (npm's scripts pass --host ./examples/booking/host.ts)
 */
import { findAvailableRooms } from '../../tools/findAvailableRooms.js';
import { getOrder } from '../../tools/getOrder.js';
import { refundOrder } from '../../tools/refundOrder.js';
import { reserveRoom } from '../../tools/reserveRoom.js';
import { cancelBooking } from '../../tools/cancelBooking.js';
import { orderCatering } from '../../tools/orderCatering.js';
import { CateringDesk } from './cateringService.js';
import type { HostContext, HostSetup } from '../../src/index.js';
import { BookingService, type BookingRow } from './bookingService.js';
import { demoModel, durableDemoTools } from './durableDemo.js';
import { RefundDesk, type RefundRow } from './refundService.js';
import { DEMO_DATA_DIR, demoPrefix } from './demoStores.js';
import { SCENARIO_NAMES } from './scenarios.js';

/** The demo keeps one store per scenario and names its tasks `<scenario>-1`: a demo task id says where it is. */
export function locate(taskId: string): { dataDir?: string; prefix?: string } {
  const scenario = SCENARIO_NAMES.find((name) => taskId === `${name}-1`);
  return scenario ? { dataDir: `${DEMO_DATA_DIR}/${scenario}`, prefix: `${demoPrefix()}:${scenario}` } : {};
}

/** What the demo service sets beyond the CLIs' host (which keep the refunds E17 confirms alone). */
export interface DemoHostOptions {
  /** Above this, a refund needs an approver holding `refunds:approve`, not the requester (the service: 300.00). */
  approveAboveCents?: number;
}

export default async function demoHost(context: HostContext, options: DemoHostOptions = {}): Promise<HostSetup> {
  if (context.store === 'redis') {
    const { RedisBookingService } = await import('./redisBookingService.js');
    const services = new RedisBookingService({ prefix: context.prefix });
    await services.seed();
    return {
      tools: durableDemoTools(services),
      model: demoModel(),
      where: `in Redis (prefix ${context.prefix})`,
      rows: async () => describeRows(await services.bookings(), await services.refunds()),
      close: () => services.close(),
    };
  }
  const booking = new BookingService(undefined, () => context.clock.now());
  const desk = new RefundDesk();
  return {
    tools: [
      findAvailableRooms(booking, { timeoutMs: 2_000, retry: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 200 } }),
      reserveRoom(booking, { timeoutMs: 3_000 }),
      cancelBooking(booking),
      orderCatering(new CateringDesk()),
      getOrder(desk),
      refundOrder(desk, {
        confirmAboveCents: 10_000,
        ...(options.approveAboveCents !== undefined ? { approveAboveCents: options.approveAboveCents } : {}),
      }),
    ],
    model: demoModel(),
    where: 'in this process (the demo services are seeded afresh per process)',
    rows: async () => describeRows(booking.bookings, desk.refunds),
  };
}

function describeRows(bookings: BookingRow[], refunds: RefundRow[]): string[] {
  return [
    ...bookings.map((b) => `booking ${b.bookingId} ${b.roomId} by ${b.requesterId}`),
    ...refunds.map((r) => `refund ${r.refundId} ${r.orderId} ${(r.amountCents / 100).toFixed(2)} by ${r.requestedBy}`),
  ];
}
