/**
 * Writes the persisted-task fixtures of the current machine version into `test/fixtures/envelopes/<version>/`:
 * a finished booking, a task stopped in the middle of a write, one waiting for a confirmation, (agent/3 to agent/5)
 * one stopped while a tool's business validation ran, (agent/4 and agent/5) one stopped while a write was re-checked,
 * (from agent/4) one waiting for a reviewer and one waiting out a model outage, (from agent/7) one undoing a write,
 * a plan waiting for approval, a finished booking whose audit records the chart's transitions, and a parent waiting
 * for its sub-task with that child waiting for a confirmation. Each is the envelope and journals exactly as a store
 * held them.
 *
 * Run once per machine version (`npx tsx scripts/fixtures.ts`); the files are immutable afterwards (a run adds only
 * the files that are missing): a change that cannot restore them needs a new machine version and a migration, never
 * an edit of the files.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AGENT_MACHINE_VERSION } from '../machines/agentMachine.js';
import { BookingService, DEMO_NOW } from '../examples/booking/bookingService.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { CateringDesk } from '../examples/booking/cateringService.js';
import { SAGA_GOAL, SAGA_SUCCESS, sagaScript, sagaTools } from '../examples/booking/sagaScenario.js';
import { plannedRefundScript } from '../examples/booking/planScenario.js';
import { DELEGATED_SUCCESS, delegateRefund, delegatedScript } from '../examples/booking/subtaskScenario.js';
import {
  BOOKING_GOAL,
  BOOKING_MANDATE,
  BOOKING_SUCCESS,
  E17,
  E17_SUPPORT,
  REFUND_GOAL,
  REFUND_MANDATE,
  REFUND_SUCCESS,
  bookingScript,
  refundScript,
} from '../examples/booking/scenarios.js';
import { bookingMandate, refundMandate } from '../tools/mandates.js';
import { findAvailableRooms } from '../tools/findAvailableRooms.js';
import { getOrder } from '../tools/getOrder.js';
import { refundOrder } from '../tools/refundOrder.js';
import { reserveRoom } from '../tools/reserveRoom.js';
import { type AgentModel, TransientModelError, type Tool, createOrchestrator } from '../src/index.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { ManualClock, scriptedModel, shiftedClock } from '../src/testing/index.js';

const OUT = join(import.meta.dirname, '..', 'test', 'fixtures', 'envelopes', AGENT_MACHINE_VERSION.replace('/', '-'));

interface StoredRow {
  envelope: string;
  audit: string[];
  transcript: string[];
}

/** The stored form of one task, as the fixture files hold it. */
function dump(store: MemoryStore, taskId: string) {
  const row = (store as unknown as { rows: Map<string, StoredRow> }).rows.get(taskId)!;
  const envelope = JSON.parse(row.envelope) as { journal: { audit: number; transcript: number } };
  return {
    envelope,
    audit: row.audit.slice(0, envelope.journal.audit).map((e) => JSON.parse(e) as unknown),
    transcript: row.transcript.slice(0, envelope.journal.transcript).map((e) => JSON.parse(e) as unknown),
  };
}

/** Runs until `stop` holds for the stored task, then stops the orchestrator without saving more. */
async function capture(
  tools: Tool[],
  script: Parameters<typeof scriptedModel>[0] | AgentModel,
  start: Parameters<ReturnType<typeof createOrchestrator>['start']>[0],
  stop: (state: string) => boolean,
  /** Real time from the demo's "now" when the task sleeps (backoff of lookups and model retries); else frozen. */
  moving = false,
  policy: Parameters<typeof createOrchestrator>[0]['policy'] = undefined,
) {
  const store = new MemoryStore();
  const model = Array.isArray(script) ? scriptedModel(script) : script;
  const orchestrator = createOrchestrator({
    tools,
    model,
    store,
    clock: moving ? shiftedClock(DEMO_NOW) : new ManualClock(DEMO_NOW),
    backoff: { baseDelayMs: 1, maxDelayMs: 2 },
    expirySweepMs: 0,
    mandates: [bookingMandate, refundMandate],
    limits: { money: 19_900 },
    ...(policy ? { policy } : {}),
  });
  const taskId = start.taskId!;
  const reached = new Promise<void>((resolve) =>
    orchestrator.onSaved((summary) => stop(summary.stateValue) && resolve()),
  );
  await orchestrator.start(start);
  await reached;
  const fixture = dump(store, taskId);
  await orchestrator.close();
  return fixture;
}

function bookingTools(bookings: BookingService): Tool[] {
  return [findAvailableRooms(bookings, { timeoutMs: 60_000 }), reserveRoom(bookings, { timeoutMs: 60_000 })];
}

/**
 * A booking service whose next reservation never answers; whose room lookups (for validation) never answer; whose
 * room lookups never answer after the first vetting of a reservation (so its re-check hangs); or whose reservations
 * and lookups fail (so the write's outcome stays unknown).
 */
function stalled(what: 'reserve' | 'validation' | 'recheck' | 'unknown'): BookingService {
  const bookings = new BookingService();
  const never = () => new Promise<never>(() => {});
  if (what === 'reserve') bookings.reserve = never;
  else if (what === 'validation') bookings.room = never;
  else if (what === 'recheck') {
    const room = bookings.room.bind(bookings);
    let lookups = 0;
    // The reservation's validation and authorization each look the room up once; the re-check's lookup hangs.
    bookings.room = (id) => (++lookups > 2 ? never() : room(id));
  } else {
    bookings.reserve = async () => {
      throw new Error('connection reset');
    };
    bookings.findByIdempotencyKey = async () => {
      throw new Error('lookup down');
    };
  }
  return bookings;
}

/** A model that never answers: its transport fails transiently every time. */
const unreachable: AgentModel = {
  name: 'unreachable',
  decide: async () => {
    throw new TransientModelError('connection refused');
  },
};

/** The saga's tools: catering refused, and a cancellation (the booking's undo) that never answers. */
function undoTools(): Tool[] {
  const bookings = new BookingService();
  bookings.cancel = () => new Promise<never>(() => {});
  const kitchen = new CateringDesk();
  kitchen.closed = 'the kitchen is closed on Mondays';
  return sagaTools(bookings, kitchen).map((tool) => ({ ...tool, timeoutMs: 60_000 }) as Tool);
}

/** True from the `n`th time a task is saved about to write. */
function writes(n: number): (state: string) => boolean {
  let seen = 0;
  return (state) => state === 'executing.writing' && ++seen >= n;
}

/**
 * A parent that delegated the refund (`delegate_refund`), waiting for its child, and the child waiting for E17 to
 * confirm its refund: both tasks, as the store held them once both came to rest.
 */
async function captureSubtask() {
  const store = new MemoryStore();
  const orchestrator = createOrchestrator({
    tools: [...refundTools(), delegateRefund],
    model: scriptedModel(delegatedScript()),
    store,
    clock: new ManualClock(DEMO_NOW),
    expirySweepMs: 0,
    mandates: [refundMandate],
    limits: { money: 19_900 },
  });
  const parentId = 'delegated-1';
  await orchestrator.start({
    principal: E17_SUPPORT,
    goal: REFUND_GOAL,
    success: DELEGATED_SUCCESS,
    mandate: { ...REFUND_MANDATE, id: 'fixture-subtask-mandate' },
    taskId: parentId,
  });
  for (let i = 0; i < 500; i++) {
    const parent = await store.load(parentId);
    const childId = parent?.snapshot.context.subtasks[0]?.childTaskId;
    const child = childId ? await store.load(childId) : null;
    if (parent?.summary.state === 'waiting_for_subtask' && child?.summary.state === 'waiting_for_confirmation') {
      const fixtures = { parent: dump(store, parentId), child: dump(store, childId!) };
      await orchestrator.close();
      return fixtures;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('the delegated refund did not come to rest');
}

function refundTools(): Tool[] {
  const desk = new RefundDesk();
  return [getOrder(desk), refundOrder(desk, { confirmAboveCents: 10_000 })];
}

async function main() {
  // Fixtures are immutable once written: an existing file is never rewritten; a new kind of fixture of the current
  // (unreleased) version is added next to them.
  mkdirSync(OUT, { recursive: true });
  // Fixed mandate ids, so that fixtures made again come out the same.
  const booking = {
    principal: E17,
    goal: BOOKING_GOAL,
    success: BOOKING_SUCCESS,
    mandate: { ...BOOKING_MANDATE, id: 'fixture-booking-mandate' },
  };
  // A task is saved at its barriers and when it comes to rest, so it is never stored while a hook validates a call
  // or re-checks a write (it restores from the save before): agent/3 to agent/5 stored those states, their fixtures
  // stay; from agent/6 on there is nothing of them to capture.
  const fixtures = {
    'done-booking': await capture(
      bookingTools(new BookingService()),
      bookingScript(),
      { ...booking, taskId: 'normal-1' },
      (s) => s === 'done',
    ),
    // Written once the runtime recorded the chart's transitions in the audit (`moves`): replayed with this chart.
    'recorded-booking': await capture(
      bookingTools(new BookingService()),
      bookingScript(),
      { ...booking, taskId: 'recorded-1' },
      (s) => s === 'done',
    ),
    'mid-write': await capture(
      bookingTools(stalled('reserve')),
      bookingScript(),
      { ...booking, taskId: 'writing-1' },
      (s) => s === 'executing.writing',
    ),
    'waiting-for-confirmation': await capture(
      refundTools(),
      refundScript(),
      {
        principal: E17_SUPPORT,
        goal: REFUND_GOAL,
        success: REFUND_SUCCESS,
        mandate: { ...REFUND_MANDATE, id: 'fixture-refund-mandate' },
        taskId: 'refund-1',
      },
      (s) => s === 'executing.awaitingConfirmation',
    ),
    'review-required': await capture(
      bookingTools(stalled('unknown')),
      bookingScript(),
      { ...booking, taskId: 'review-1' },
      (s) => s === 'reviewRequired',
      true,
    ),
    // From agent/7: a task undoing its booking (the kitchen refused the catering), stopped with the undo in flight.
    'mid-undo': await capture(
      undoTools(),
      sagaScript(),
      {
        principal: E17,
        goal: SAGA_GOAL,
        success: SAGA_SUCCESS,
        mandate: { ...BOOKING_MANDATE, id: 'fixture-saga-mandate' },
        taskId: 'undo-1',
      },
      // The booking, the catering, then the undo: the third write is the one in flight.
      writes(3),
    ),
    // From agent/7: a plan-and-execute refund whose plan waits for the user's approval.
    'awaiting-plan-approval': await capture(
      refundTools(),
      plannedRefundScript(),
      {
        principal: E17_SUPPORT,
        goal: REFUND_GOAL,
        success: REFUND_SUCCESS,
        mandate: { ...REFUND_MANDATE, id: 'fixture-plan-mandate' },
        taskId: 'planned-1',
      },
      (s) => s === 'awaitingPlanApproval',
      false,
      { planning: { mode: 'plan_first' } },
    ),
    // From agent/7 (sub-tasks): the parent waiting for its child, and the child waiting for a confirmation.
    ...(await captureSubtask().then(({ parent, child }) => ({ 'awaiting-subtask': parent, 'subtask-child': child }))),
    'waiting-for-model': await capture(
      bookingTools(new BookingService()),
      unreachable,
      { ...booking, taskId: 'outage-1' },
      (s) => s === 'waitingForModel',
      true,
    ),
  };
  for (const [name, fixture] of Object.entries(fixtures)) {
    if (existsSync(join(OUT, `${name}.json`))) {
      console.log(`kept ${join(OUT, `${name}.json`)} (immutable)`);
      continue;
    }
    writeFileSync(join(OUT, `${name}.json`), `${JSON.stringify(fixture, null, 2)}\n`);
    console.log(`wrote ${join(OUT, `${name}.json`)}`);
  }
}

await main();
