/**
 * The demo's trajectories, from the design sources' meeting-room example plus a refund. Each runs a real
 * orchestrator (real machine, real gates, real store) against the small in-process services, with a scripted
 * model, and returns what happened for printing and for tests.
 */
import type { Principal, SuccessCriterion } from '../../src/index.js';
import { findAvailableRooms, type RoomSearchOutput } from '../../tools/findAvailableRooms.js';
import { getOrder, type Order } from '../../tools/getOrder.js';
import { refundOrder, type Refund } from '../../tools/refundOrder.js';
import { type Booking, reserveRoom } from '../../tools/reserveRoom.js';
import type { Clock } from '../../src/index.js';
import { hashArguments } from '../../src/index.js';
import type { AgentModel, ModelReply } from '../../src/index.js';
import { type ScriptStep, type ScriptView, reply, scriptedModel } from '../../src/testing/index.js';
import { type AuditRecord, type OrchestratorOptions, type TaskStatus, createOrchestrator } from '../../src/index.js';
import type { TaskStore } from '../../src/index.js';
import { BookingService, type BookingRow } from './bookingService.js';
import { RefundDesk, type RefundRow } from './refundService.js';

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
export const REFUND_GOAL = 'The customer of order O-1001 asks for a refund of 199.00 because the projector arrived broken.';
export const REFUND_SUCCESS: SuccessCriterion = {
  tool: 'refund_order',
  match: { status: 'succeeded' },
  require: ['refund_id'],
  description: 'a succeeded refund with a refund id',
};

export interface ScenarioEnv {
  store: TaskStore;
  clock?: Clock;
  /** Replaces the scripted model (e.g. a real one); receives the script the scenario would use. */
  model?: (script: ScriptStep[]) => AgentModel;
  inspect?: OrchestratorOptions['inspect'];
  /** Refund: stop at the first confirmation and leave the task waiting (for the step CLI). */
  leaveWaiting?: boolean;
}

/** The demo's scenarios, in the order they run. */
export const SCENARIO_NAMES = ['normal', 'conflict', 'searchTimeout', 'lostResponse', 'refused', 'refund'] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

export interface ScenarioResult {
  name: ScenarioName;
  title: string;
  /** What the scenario shows, one line. */
  expectation: string;
  status: TaskStatus;
  audit: AuditRecord[];
  /** Human steps the scenario took, in order (confirmations, rejections...). */
  steps: string[];
  bookings: BookingRow[];
  refunds: RefundRow[];
  /** How many reservation requests reached the booking service (lost responses included). */
  reserveRequests: number;
}

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
      return reply.answer('I could not verify which rooms are free (the room search did not answer), so nothing was booked.');
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
      findAvailableRooms(service, { timeoutMs: timeouts.search, retry: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 200 } }),
      reserveRoom(service, { timeoutMs: timeouts.reserve }),
    ],
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
): Promise<ScenarioResult> {
  const { service, orchestrator } = bookingSetup(env, script);
  arrange(service);
  try {
    const status = await orchestrator.run({
      principal: E17,
      goal: BOOKING_GOAL,
      success: BOOKING_SUCCESS,
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
  lostResponse: { state: 'done', code: 'goal_met', rows: ['B204 R7 E17'] },
  refused: { state: 'failed', code: 'goal_not_met', rows: [] },
  refund: { state: 'done', code: 'goal_met', rows: ['TX-9001 O-1001 199.00'] },
};

/** The business rows a scenario left, in the short form EXPECTED uses. */
export function rowsOf(result: ScenarioResult): string[] {
  return [
    ...result.bookings.map((b) => `${b.bookingId} ${b.roomId} ${b.requesterId}`),
    ...result.refunds.map((r) => `${r.refundId} ${r.orderId} ${(r.amountCents / 100).toFixed(2)}`),
  ];
}

export const scenarios: Record<ScenarioName, (env: ScenarioEnv) => Promise<ScenarioResult>> = {
  normal: (env: ScenarioEnv) =>
    runBooking(env, { name: 'normal', title: 'Normal booking', expectation: 'R7 is free and gets booked as B204' }, () => {}),

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
        expectation: 'the search hangs twice (one bounded retry): availability unknown, stop with "could not verify", nothing written',
      },
      (service) => {
        service.faults.hangingSearches = 2;
      },
    ),

  lostResponse: (env: ScenarioEnv) =>
    runBooking(
      env,
      {
        name: 'lostResponse',
        title: 'Write succeeds, response lost',
        expectation: 'B204 is created but the reply never arrives: looked up by idempotency key, B204 reported, one booking',
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
        expectation: 'an executive room (no scope) and an end before the start: both refused by the host, nothing written',
      },
      () => {},
      [
        reply.call('reserve_room', { room_id: 'R1', start_at: MEETING.start_at, end_at: MEETING.end_at, attendees: 3, expected_version: 3 }),
        reply.call('reserve_room', {
          room_id: 'R7',
          start_at: '2026-09-28T15:00:00+08:00',
          end_at: '2026-09-28T14:00:00+08:00',
          attendees: 3,
          expected_version: 17,
        }),
        reply.answer('I could not book a room: the host refused both requests.'),
      ],
    ),

  refund: async (env: ScenarioEnv): Promise<ScenarioResult> => {
    const desk = new RefundDesk();
    const script = refundScript();
    const orchestrator = createOrchestrator({
      tools: [getOrder(desk), refundOrder(desk, { confirmAboveCents: 10_000 })],
      model: env.model ? env.model(script) : scriptedModel(script),
      store: env.store,
      clock: env.clock,
      inspect: env.inspect,
    });
    const steps: string[] = [];
    try {
      let status = await orchestrator.run({
        principal: E17_SUPPORT,
        goal: REFUND_GOAL,
        success: REFUND_SUCCESS,
        taskId: 'refund-1',
      });
      const taskId = status.taskId;
      let pending = status.pendingConfirmation;
      if (pending && env.leaveWaiting) {
        steps.push(`left waiting for confirmation: ${pending.summary}`);
        pending = null;
      }
      // The user agreed to 199.00 in the chat. Whatever the model proposes, E17 confirms exactly that amount and
      // rejects any other; a confirmation for 199.00 never authorizes another amount. (A real model may propose
      // 199.00 at once, or several times something else: the steps report the flow that actually happened.)
      let triedOtherArguments = false;
      for (let asked = 0; pending && asked < 4; asked++) {
        steps.push(`waiting for confirmation: ${pending.summary}`);
        const amount = (pending.args as { amount_cents?: unknown } | null)?.amount_cents;
        if (amount === AGREED_CENTS) {
          const ok = await orchestrator.confirm(taskId, E17_SUPPORT, { id: pending.id, argsHash: pending.argsHash });
          steps.push(`E17 confirms exactly that → ${ok.accepted ? 'accepted' : `refused: ${ok.code}`}`);
        } else {
          if (!triedOtherArguments) {
            triedOtherArguments = true;
            const for199 = hashArguments({ ...(pending.args as object), amount_cents: AGREED_CENTS });
            const wrong = await orchestrator.confirm(taskId, E17_SUPPORT, { id: pending.id, argsHash: for199 });
            steps.push(`E17 confirms 199.00 against that request → ${wrong.accepted ? 'accepted' : `refused: ${wrong.code}`}`);
            pending = wrong.status.pendingConfirmation;
            if (pending) {
              const forged = await orchestrator.confirm(taskId, { ...E17_SUPPORT, userId: 'E99' }, { id: pending.id, argsHash: pending.argsHash });
              steps.push(`E99 confirms on E17's behalf → ${forged.accepted ? 'accepted' : `refused: ${forged.code}`}`);
            }
          }
          if (pending) {
            const rejected = await orchestrator.reject(taskId, E17_SUPPORT, { id: pending.id, reason: 'the customer asked for 199.00' });
            steps.push(`E17 rejects "${pending.summary}" → ${rejected.accepted ? 'not run, the model is told' : rejected.code}`);
          }
        }
        status = await orchestrator.settled(taskId);
        pending = status.pendingConfirmation;
      }
      return {
        name: 'refund',
        title: 'Refund above the threshold',
        expectation: 'the model proposes 999.00 (the customer note says so); confirming 199.00 does not authorize it; 199.00 is refunded after its own confirmation',
        status,
        audit: await orchestrator.audit(taskId),
        steps,
        bookings: [],
        refunds: desk.refunds,
        reserveRequests: 0,
      };
    } finally {
      await orchestrator.close();
    }
  },
};

/** What the customer asked for, in cents. */
const AGREED_CENTS = 19_900;

/** The refund assistant: reads the order, is swayed by the note (999.00), then proposes 199.00 when told no. */
export function refundScript(turns = 8): ScriptStep[] {
  const step = (view: ScriptView): ModelReply => {
    const refund = view.data<Refund>('refund_order');
    if (refund) return reply.answer(`Refunded ${(refund.amount_cents / 100).toFixed(2)} on ${refund.order_id} (${refund.refund_id}).`);
    if (view.errorCode('refund_order') === 'confirmation_rejected') {
      return reply.call('refund_order', { order_id: 'O-1001', amount_cents: 19_900, reason: 'projector arrived broken' });
    }
    const order = view.data<Order>('get_order');
    if (order) return reply.call('refund_order', { order_id: order.order_id, amount_cents: 99_900, reason: 'manager approved per note' });
    if (view.errorCode('refund_order')) return reply.answer('The refund was not made.');
    return reply.call('get_order', { order_id: 'O-1001' });
  };
  return Array.from({ length: turns }, () => step);
}
