/** Builds an orchestrator around the demo booking/refund services for tests. */
import type { InspectionEvent } from 'xstate';
import type { BudgetLimits, Policy, Principal } from '../../machines/context.js';
import type { AuditEntry } from '../../machines/journal.js';
import { findAvailableRooms } from '../../tools/findAvailableRooms.js';
import { getOrder } from '../../tools/getOrder.js';
import { type RefundOrderOptions, refundDeskAuthority, refundOrder } from '../../tools/refundOrder.js';
import { bookingMandate, refundMandate } from '../../tools/mandates.js';
import { reserveRoom } from '../../tools/reserveRoom.js';
import type { Clock } from '../../src/clock.js';
import { BookingService } from '../../examples/booking/bookingService.js';
import { RefundDesk } from '../../examples/booking/refundService.js';
import {
  BOOKING_GOAL,
  BOOKING_MANDATE,
  BOOKING_SUCCESS,
  E17,
  MEETING,
  REFUND_GOAL,
  REFUND_MANDATE,
  REFUND_SUCCESS,
} from '../../examples/booking/scenarios.js';
import type { AgentModel } from '../../src/model/agentModel.js';
import { type ScriptStep, scriptedModel } from '../../src/testing/scriptedModel.js';
import { type OrchestratorOptions, createOrchestrator } from '../../src/orchestrator/orchestrator.js';
import { MemoryStore } from '../../src/store/memoryStore.js';
import type { TaskStore } from '../../src/store/taskStore.js';
import type { Tool } from '../../src/tool.js';
import { scaled } from './timeScale.js';

export { E17, MEETING, BOOKING_GOAL, BOOKING_MANDATE, BOOKING_SUCCESS, REFUND_GOAL, REFUND_MANDATE, REFUND_SUCCESS };

export interface HarnessOptions {
  script?: ScriptStep[];
  model?: AgentModel;
  store?: TaskStore;
  clock?: Clock;
  policy?: Partial<Policy>;
  limits?: Partial<BudgetLimits>;
  extraTools?: Tool[];
  bookings?: BookingService;
  refunds?: RefundDesk;
  timeouts?: { search?: number; reserve?: number };
  inspect?: (event: InspectionEvent) => void;
  random?: () => number;
  /** Per model call (the orchestrator's modelTimeoutMs; default 60 s). */
  modelTimeoutMs?: number;
  /** Retries of a save the store could not take (the orchestrator's saveRetries). */
  saveRetries?: number;
  /** Mandate kinds tasks may start with (default: the demo's booking and refund mandates). */
  mandates?: OrchestratorOptions['mandates'];
  refreshPrincipal?: OrchestratorOptions['refreshPrincipal'];
  rateLimits?: OrchestratorOptions['rateLimits'];
  /** Options of the demo's refund tool (thresholds, approvers, cancel on reject). */
  refundOptions?: RefundOrderOptions;
  /** The orchestrator's expiry sweep (default 5 s; 0 disables it). */
  expirySweepMs?: number;
  hooks?: OrchestratorOptions['hooks'];
  tracing?: OrchestratorOptions['tracing'];
  logger?: OrchestratorOptions['logger'];
  privacy?: OrchestratorOptions['privacy'];
  capacity?: OrchestratorOptions['capacity'];
  dispatch?: OrchestratorOptions['dispatch'];
  lease?: OrchestratorOptions['lease'];
  /** The orchestrator's adminScope (operators); default none. */
  adminScope?: string;
  /** Safe defaults loosened (default: the refund desk's authority up to 100.00, as the demo host does; null: none). */
  loosen?: OrchestratorOptions['loosen'] | null;
}

export function harness(options: HarnessOptions = {}) {
  const bookings = options.bookings ?? new BookingService();
  const refunds = options.refunds ?? new RefundDesk();
  const store = options.store ?? new MemoryStore();
  const model = options.model ?? scriptedModel(options.script ?? []);
  const tools: Tool[] = [
    findAvailableRooms(bookings, {
      timeoutMs: options.timeouts?.search ?? 200,
      retry: { maxAttempts: 2, baseDelayMs: 10, maxDelayMs: 40 },
    }),
    reserveRoom(bookings, { timeoutMs: options.timeouts?.reserve ?? 200 }),
    getOrder(refunds),
    refundOrder(refunds, options.refundOptions),
    ...(options.extraTools ?? []),
  ];
  const orchestrator = createOrchestrator({
    tools,
    model,
    store,
    clock: options.clock,
    policy: options.policy,
    ...(options.loosen === null ? {} : { loosen: options.loosen ?? refundDeskAuthority }),
    // The refund tool declares the money it moves: the tests' tasks may move up to 10,000.00 unless they say less.
    limits: { money: 1_000_000, ...options.limits },
    inspect: options.inspect,
    random: options.random ?? (() => 0.5),
    backoff: { baseDelayMs: 5, maxDelayMs: 20 },
    modelTimeoutMs: options.modelTimeoutMs,
    saveRetries: options.saveRetries,
    mandates: options.mandates ?? [bookingMandate, refundMandate],
    refreshPrincipal: options.refreshPrincipal,
    rateLimits: options.rateLimits,
    expirySweepMs: options.expirySweepMs,
    hooks: options.hooks,
    tracing: options.tracing,
    logger: options.logger,
    privacy: options.privacy,
    capacity: options.capacity,
    dispatch: options.dispatch,
    lease: options.lease,
    ...(options.adminScope ? { adminScope: options.adminScope } : {}),
  });
  return { orchestrator, bookings, refunds, store, model, tools };
}

export const SUPPORT: Principal = { userId: 'E17', tenantId: 'acme', scopes: ['orders:read', 'refunds:write'] };

export function reserveArgs(overrides: Record<string, unknown> = {}) {
  return {
    room_id: 'R7',
    start_at: MEETING.start_at,
    end_at: MEETING.end_at,
    attendees: 3,
    expected_version: 17,
    ...overrides,
  };
}

export function byKind<K extends AuditEntry['kind']>(audit: readonly AuditEntry[], kind: K) {
  return audit.filter((e): e is Extract<AuditEntry, { kind: K }> => e.kind === kind);
}

/** Waits until `predicate` holds (polling), for states reached in the background; `timeoutMs` is scaled. */
export async function until(predicate: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + scaled(timeoutMs);
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
