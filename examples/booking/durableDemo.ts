/**
 * The demo wired for several processes: the demo's tools over the Redis-backed services, and one scripted model
 * that plays the booking or the refund script according to the task's goal. A process that takes over a task
 * (the tasks CLI's `recover`, the crash tests' second worker) builds the same tools and model and continues.
 */
import { approvalRefundScript } from './approvalRefund.js';
import { plannedRefundScript } from './planScenario.js';
import { findAvailableRooms } from '../../tools/findAvailableRooms.js';
import { getOrder } from '../../tools/getOrder.js';
import { refundOrder } from '../../tools/refundOrder.js';
import { reserveRoom } from '../../tools/reserveRoom.js';
import type { AgentModel } from '../../src/index.js';
import { scriptedModel } from '../../src/testing/index.js';
import type { Tool } from '../../src/index.js';
import type { RedisBookingService } from './redisBookingService.js';
import {
  BOOKING_GOAL,
  BOOKING_SUCCESS,
  E17,
  E17_SUPPORT,
  APPROVAL_REFUND_GOAL,
  REFUND_GOAL,
  REFUND_SUCCESS,
  bookingScript,
  refundScript,
} from './scenarios.js';

export interface DemoToolTimeouts {
  /** Per search attempt (default 2 s). */
  search?: number;
  /** Per reservation (default 3 s). */
  reserve?: number;
  /** Per refund (default 5 s). */
  refund?: number;
}

/** The four demo tools over the durable services. */
export function durableDemoTools(services: RedisBookingService, timeouts: DemoToolTimeouts = {}): Tool[] {
  return [
    findAvailableRooms(services, {
      timeoutMs: timeouts.search ?? 2_000,
      retry: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 200 },
    }),
    reserveRoom(services, { timeoutMs: timeouts.reserve ?? 3_000 }),
    getOrder(services),
    refundOrder(services.refundService(), { confirmAboveCents: 10_000, timeoutMs: timeouts.refund ?? 5_000 }),
  ];
}

/**
 * The scripted demo model for tasks of every demo flow: the refund script for the refund goal, the four-eyes refund
 * script for its goal, the booking script otherwise. Steps are chosen by turn, so any process can continue a task another one started.
 */
export function demoModel(turns = 8): AgentModel {
  const booking = scriptedModel(bookingScript(turns), { name: 'scripted-demo' });
  const refund = scriptedModel(refundScript(turns), { name: 'scripted-demo' });
  const planned = scriptedModel(plannedRefundScript(turns), { name: 'scripted-demo' });
  const approval = scriptedModel(approvalRefundScript(turns), { name: 'scripted-demo' });
  return {
    name: 'scripted-demo',
    reservation: booking.reservation,
    // The plan-and-execute demo task (`planned-1`) plays the planning refund assistant.
    decide: (request) =>
      (request.taskId.startsWith('planned')
        ? planned
        : request.goal === REFUND_GOAL
          ? refund
          : request.goal === APPROVAL_REFUND_GOAL
            ? approval
            : booking
      ).decide(request),
  };
}

/** The start request of each demo flow. */
export const DEMO_FLOWS = {
  booking: { principal: E17, goal: BOOKING_GOAL, success: BOOKING_SUCCESS },
  refund: { principal: E17_SUPPORT, goal: REFUND_GOAL, success: REFUND_SUCCESS },
} as const;

export type DemoFlow = keyof typeof DEMO_FLOWS;
