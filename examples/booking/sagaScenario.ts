/**
 * The saga trajectory: the room is booked, the kitchen refuses the catering, and the booking is undone by its
 * compensation (cancel_booking), through the same gates as any write, with its own idempotency key. The task fails
 * (the goal was catering for a booked room); its outcome lists the booking as undone.
 */
import { createOrchestrator } from '../../src/index.js';
import { type ScriptStep, type ScriptView, reply, scriptedModel } from '../../src/testing/index.js';
import { cancelBooking } from '../../tools/cancelBooking.js';
import { findAvailableRooms, type RoomSearchOutput } from '../../tools/findAvailableRooms.js';
import { bookingMandate } from '../../tools/mandates.js';
import { type CateringOrder, orderCatering } from '../../tools/orderCatering.js';
import { type Booking, reserveRoom } from '../../tools/reserveRoom.js';
import { BookingService } from './bookingService.js';
import { CateringDesk } from './cateringService.js';
import { BOOKING_TERMS, E17, MEETING } from './requests.js';
import type { ScenarioEnv, ScenarioResult } from './scenario.js';

export const SAGA_GOAL =
  'Book a meeting room on 2026-09-28 from 14:00 to 15:00 (+08:00) for 3 people with a projector, and order catering for them.';

export const SAGA_SUCCESS = {
  tool: 'order_catering',
  match: { status: 'ordered' },
  require: ['order_id'],
  description: 'catering ordered for a booked room',
};

/** The assistant's policy: search, book the first room, order catering for it, report what happened. */
export function sagaScript(turns = 6): ScriptStep[] {
  const step = (view: ScriptView) => {
    const order = view.data<CateringOrder>('order_catering');
    if (order) return reply.answer(`Booked and catered: order ${order.order_id}.`);
    if (view.errorCode('order_catering'))
      return reply.answer('The room was booked, but the kitchen refused the catering; I could not do both.');
    const booking = view.data<Booking>('reserve_room');
    if (booking) return reply.call('order_catering', { booking_id: booking.booking_id, people: MEETING.attendees });
    const room = view.data<RoomSearchOutput>('find_available_rooms')?.rooms[0];
    if (room)
      return reply.call('reserve_room', {
        room_id: room.room_id,
        start_at: MEETING.start_at,
        end_at: MEETING.end_at,
        attendees: MEETING.attendees,
        expected_version: room.version,
      });
    return reply.call('find_available_rooms', { ...MEETING });
  };
  return Array.from({ length: turns }, () => step);
}

/** The saga's tools: the booking undone by cancel_booking when the task stops without meeting its goal. */
export function sagaTools(service: BookingService, kitchen: CateringDesk) {
  return [
    findAvailableRooms(service, { timeoutMs: 250, retry: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 200 } }),
    reserveRoom(service, { timeoutMs: 300, cancelOnStop: true }),
    cancelBooking(service, { timeoutMs: 300 }),
    orderCatering(kitchen, { timeoutMs: 300 }),
  ];
}

export async function runSaga(env: ScenarioEnv): Promise<ScenarioResult> {
  const service = new BookingService(undefined, env.clock ? () => env.clock!.now() : undefined);
  const kitchen = new CateringDesk();
  kitchen.closed = 'the kitchen is closed on Mondays';
  const script = sagaScript();
  const orchestrator = createOrchestrator({
    tools: sagaTools(service, kitchen),
    mandates: [bookingMandate],
    model: env.model ? env.model(script) : scriptedModel(script),
    store: env.store,
    clock: env.clock,
    inspect: env.inspect,
  });
  try {
    const status = await orchestrator.run({
      principal: E17,
      goal: SAGA_GOAL,
      success: SAGA_SUCCESS,
      mandate: bookingMandate.of(BOOKING_TERMS),
      taskId: 'compensated-1',
    });
    return {
      name: 'compensated',
      title: 'Booked, then undone',
      expectation:
        'R7 is booked as B204, the kitchen refuses the catering: the task fails and B204 is cancelled by its compensation, once',
      status,
      audit: await orchestrator.audit(status.taskId),
      // No human step: the undo is the host's, shown in the trace (`undo`) and the outcome.
      steps: [],
      bookings: service.bookings,
      refunds: [],
      reserveRequests: service.reserveRequests.length,
      transcript: await orchestrator.transcript(status.taskId),
    };
  } finally {
    await orchestrator.close();
  }
}
