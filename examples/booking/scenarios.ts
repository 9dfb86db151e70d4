/**
 * The demo's trajectories, from the design sources' meeting-room example plus a refund. Each runs a real
 * orchestrator (real machine, real gates, real store) against the small in-process services, with a scripted
 * model, and returns what happened for printing and for tests.
 */
import { findAvailableRooms, type RoomSearchOutput } from '../../tools/findAvailableRooms.js';
import { type Booking, reserveRoom } from '../../tools/reserveRoom.js';
import { bookingMandate } from '../../tools/mandates.js';
import { runRefund } from './refundScenario.js';
import { runSaga } from './sagaScenario.js';
import { runPlanned } from './planScenario.js';
import { runWorkflow } from './workflowScenario.js';
import { runDelegated } from './subtaskScenario.js';
import { runLong } from './longScenario.js';
import { BOOKING_GOAL, BOOKING_SUCCESS, BOOKING_TERMS, E17, MEETING } from './requests.js';
import type { Mandate, ModelReply } from '../../src/index.js';
import { type ScriptStep, type ScriptView, reply, scriptedModel } from '../../src/testing/index.js';
import { createOrchestrator } from '../../src/index.js';
import { BookingService } from './bookingService.js';
import type { ScenarioEnv, ScenarioName, ScenarioResult } from './scenario.js';

export * from './requests.js';
export { refundScript } from './refundScenario.js';
export { SCENARIO_NAMES, type ScenarioEnv, type ScenarioName, type ScenarioResult } from './scenario.js';

/** The booking assistant's policy as a script: search, book the first suitable room, report the receipt. */
export function bookingScript(turns = 8): ScriptStep[] {
  const step = (view: ScriptView): ModelReply => {
    const booking = view.data<Booking>('reserve_room');
    if (booking) {
      return reply.answer(
        `Booked ${booking.room_id} on 2026-09-28 14:00-15:00 for 3 people with a projector: booking ${booking.booking_id}.`,
      );
    }
    const found = view.data<RoomSearchOutput>('find_available_rooms');
    if (found) {
      const room = found.rooms[0];
      if (!room) return reply.answer('No suitable room is free at that time; nothing was booked.');
      return reply.call('reserve_room', {
        room_id: room.room_id,
        start_at: MEETING.start_at,
        end_at: MEETING.end_at,
        attendees: MEETING.attendees,
        expected_version: room.version,
      });
    }
    if (view.errorCode('find_available_rooms')) {
      return reply.answer(
        'I could not verify which rooms are free (the room search did not answer), so nothing was booked.',
      );
    }
    // First turn, or the room was taken since it was read: look again.
    return reply.call('find_available_rooms', { ...MEETING });
  };
  return Array.from({ length: turns }, () => step);
}

function bookingSetup(env: ScenarioEnv, script: ScriptStep[], timeouts = { search: 250, reserve: 300 }) {
  const service = new BookingService(undefined, env.clock ? () => env.clock!.now() : undefined);
  const model = env.model ? env.model(script) : scriptedModel(script);
  const orchestrator = createOrchestrator({
    tools: [
      findAvailableRooms(service, {
        timeoutMs: timeouts.search,
        retry: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 200 },
      }),
      reserveRoom(service, { timeoutMs: timeouts.reserve }),
    ],
    mandates: [bookingMandate],
    model,
    store: env.store,
    clock: env.clock,
    inspect: env.inspect,
  });
  return { service, orchestrator };
}

async function runBooking(
  env: ScenarioEnv,
  meta: Pick<ScenarioResult, 'name' | 'title' | 'expectation'>,
  arrange: (service: BookingService) => void,
  script: ScriptStep[] = bookingScript(),
  request?: { goal: string; mandate: Mandate },
): Promise<ScenarioResult> {
  const { service, orchestrator } = bookingSetup(env, script);
  arrange(service);
  try {
    const status = await orchestrator.run({
      principal: E17,
      goal: request?.goal ?? BOOKING_GOAL,
      success: BOOKING_SUCCESS,
      // One mandate per request: the scenarios may share a store, and a mandate authorises one task.
      mandate: request?.mandate ?? bookingMandate.of(BOOKING_TERMS),
      taskId: `${meta.name}-1`,
    });
    return {
      ...meta,
      status,
      audit: await orchestrator.audit(status.taskId),
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

/** What each scenario must end with: the demo checks it, so a regression shows as a red line. */
export const EXPECTED: Record<ScenarioName, { state: string; code: string; rows: string[] }> = {
  normal: { state: 'done', code: 'goal_met', rows: ['B204 R7 E17'] },
  conflict: { state: 'done', code: 'goal_met', rows: ['B204 R7 E42', 'B205 R9 E17'] },
  searchTimeout: { state: 'failed', code: 'could_not_verify', rows: [] },
  guessedWrite: { state: 'failed', code: 'could_not_verify', rows: [] },
  lostResponse: { state: 'done', code: 'goal_met', rows: ['B204 R7 E17'] },
  refused: { state: 'failed', code: 'goal_not_met', rows: [] },
  noProjector: { state: 'done', code: 'goal_met', rows: ['B204 R7 E17'] },
  wrongDate: { state: 'failed', code: 'outside_mandate', rows: [] },
  refund: { state: 'done', code: 'goal_met', rows: ['TX-9001 O-1001 199.00'] },
  compensated: { state: 'failed', code: 'goal_not_met', rows: ['B204 R7 E17 cancelled'] },
  planned: { state: 'done', code: 'goal_met', rows: ['TX-9001 O-1001 199.00'] },
  workflow: { state: 'done', code: 'goal_met', rows: ['TX-9001 O-1001 199.00'] },
  delegated: { state: 'done', code: 'goal_met', rows: ['TX-9001 O-1001 199.00'] },
  long: { state: 'done', code: 'goal_met', rows: ['B204 R7 E17'] },
};

/** The business rows a scenario left, in the short form EXPECTED uses. */
export function rowsOf(result: ScenarioResult): string[] {
  return [
    ...result.bookings.map((b) => `${b.bookingId} ${b.roomId} ${b.requesterId}${b.cancelledAt ? ' cancelled' : ''}`),
    ...result.refunds.map((r) => `${r.refundId} ${r.orderId} ${(r.amountCents / 100).toFixed(2)}`),
  ];
}

export const scenarios: Record<ScenarioName, (env: ScenarioEnv) => Promise<ScenarioResult>> = {
  normal: (env: ScenarioEnv) =>
    runBooking(
      env,
      { name: 'normal', title: 'Normal booking', expectation: 'R7 is free and gets booked as B204' },
      () => {},
    ),

  conflict: (env: ScenarioEnv) =>
    runBooking(
      env,
      {
        name: 'conflict',
        title: 'Taken between read and write',
        expectation: 'E42 books R7 after our search: conflict, search again, R9 booked as B205',
      },
      (service) => {
        service.faults.rivalBeforeReserve = { roomId: 'R7', requesterId: 'E42' };
      },
    ),

  searchTimeout: (env: ScenarioEnv) =>
    runBooking(
      env,
      {
        name: 'searchTimeout',
        title: 'Room search times out',
        expectation:
          'the search hangs twice (one bounded retry): availability unknown, stop with "could not verify", nothing written',
      },
      (service) => {
        service.faults.hangingSearches = 2;
      },
    ),

  guessedWrite: (env: ScenarioEnv) =>
    runBooking(
      env,
      {
        name: 'guessedWrite',
        title: 'A write on unverified facts',
        expectation:
          'the search hangs; the model books R7 on a guessed version: refused, unverified; the search hangs again, it guesses R9: stopped with "could not verify", nothing written',
      },
      (service) => {
        // Two searches, each one attempt and one bounded retry: every one of them hangs.
        service.faults.hangingSearches = 4;
      },
      [
        reply.call('find_available_rooms', { ...MEETING }),
        // A timeout is "unknown", not "none": the model guesses anyway, and the host refuses to write on it.
        reply.call('reserve_room', {
          room_id: 'R7',
          start_at: MEETING.start_at,
          end_at: MEETING.end_at,
          attendees: 3,
          expected_version: 17,
        }),
        reply.call('find_available_rooms', { ...MEETING }),
        reply.call('reserve_room', {
          room_id: 'R9',
          start_at: MEETING.start_at,
          end_at: MEETING.end_at,
          attendees: 3,
          expected_version: 6,
        }),
        reply.answer('Booked R9.'),
      ],
    ),

  lostResponse: (env: ScenarioEnv) =>
    runBooking(
      env,
      {
        name: 'lostResponse',
        title: 'Write succeeds, response lost',
        expectation:
          'B204 is created but the reply never arrives: looked up by idempotency key, B204 reported, one booking',
      },
      (service) => {
        service.faults.loseNextReserveResponse = true;
      },
    ),

  refused: (env: ScenarioEnv) =>
    runBooking(
      env,
      {
        name: 'refused',
        title: 'Refused by the host',
        expectation:
          'an executive room (no scope) and six people in a room for four: both refused by the host, nothing written',
      },
      () => {},
      [
        reply.call('reserve_room', {
          room_id: 'R1',
          start_at: MEETING.start_at,
          end_at: MEETING.end_at,
          attendees: 3,
          expected_version: 3,
        }),
        // Six people in a room for four: the slot is the one asked for, the business rules refuse it.
        reply.call('reserve_room', {
          room_id: 'R7',
          start_at: MEETING.start_at,
          end_at: MEETING.end_at,
          attendees: 6,
          expected_version: 17,
        }),
        reply.answer('I could not book a room: the host refused both requests.'),
      ],
    ),

  noProjector: (env: ScenarioEnv) =>
    runBooking(
      env,
      {
        name: 'noProjector',
        title: 'A room without a projector',
        expectation:
          'two people need a projector; the model picks R3 (seats 2, no projector): the business check against the mandate refuses it; R7 is found and booked as B204',
      },
      () => {},
      [
        // The projector is a fact of the room, not of the arguments: validate checks it against the mandate.
        reply.call('reserve_room', {
          room_id: 'R3',
          start_at: MEETING.start_at,
          end_at: MEETING.end_at,
          attendees: 2,
          expected_version: 11,
        }),
        reply.call('find_available_rooms', { ...MEETING, attendees: 2 }),
        reply.call('reserve_room', {
          room_id: 'R7',
          start_at: MEETING.start_at,
          end_at: MEETING.end_at,
          attendees: 2,
          expected_version: 17,
        }),
        reply.answer('Booked R7 on 2026-09-28 14:00-15:00 for 2 people with a projector: booking B204.'),
      ],
      {
        goal: 'Book a meeting room on 2026-09-28 from 14:00 to 15:00 (+08:00) for 2 people with a projector.',
        mandate: bookingMandate.of({
          start_at: MEETING.start_at,
          end_at: MEETING.end_at,
          min_attendees: 2,
          needs_projector: true,
        }),
      },
    ),

  wrongDate: (env: ScenarioEnv) =>
    runBooking(
      env,
      {
        name: 'wrongDate',
        title: 'Outside what the user asked',
        expectation:
          'the model books 2026-10-05 instead of 2026-09-28: refused by the mandate, proposed again, stopped, nothing written',
      },
      () => {},
      [
        reply.call('find_available_rooms', { ...MEETING }),
        // The model mixes up the date (the search said nothing about it): the mandate says the 28th.
        reply.call('reserve_room', { ...WRONG_DATE, room_id: 'R7', attendees: 3, expected_version: 17 }),
        reply.call('reserve_room', { ...WRONG_DATE, room_id: 'R7', attendees: 3, expected_version: 17 }),
        reply.answer('Booked R7.'),
      ],
    ),

  refund: runRefund,
  compensated: runSaga,
  planned: runPlanned,
  workflow: runWorkflow,
  delegated: runDelegated,
  long: (env: ScenarioEnv) => runLong(env),
};

/** The slot a week later than asked: the wrong date the model proposes in `wrongDate`. */
const WRONG_DATE = { start_at: '2026-10-05T14:00:00+08:00', end_at: '2026-10-05T15:00:00+08:00' } as const;
