/**
 * Compensation: a write whose tool names the write that undoes it (reserve_room → cancel_booking) is undone when the
 * task stops without meeting its goal, newest first, each undo a call through the gates with its own idempotency key,
 * reconciled by lookup when its outcome is unknown, across restarts, and never twice.
 */
import { describe, expect, it } from 'vitest';
import { agentMachine } from '../machines/agentMachine.js';
import type { Policy } from '../machines/context.js';
import { BookingService } from '../examples/booking/bookingService.js';
import { CateringDesk } from '../examples/booking/cateringService.js';
import { replayAudit } from '../src/audit/replayAudit.js';
import { describeChart } from '../src/visualize/describeChart.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { ManualClock } from '../src/testing/manualClock.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { type ScriptStep, reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { type Tool, defineTool } from '../src/tool.js';
import { ToolDefinitionError } from '../src/errors.js';
import { cancelBooking } from '../tools/cancelBooking.js';
import { findAvailableRooms } from '../tools/findAvailableRooms.js';
import { bookingMandate } from '../tools/mandates.js';
import { orderCatering } from '../tools/orderCatering.js';
import { type Booking, reserveRoom } from '../tools/reserveRoom.js';
import { BOOKING_TERMS, E17 } from '../examples/booking/scenarios.js';
import { byKind, reserveArgs, until } from './support/harness.js';

const CATERING_SUCCESS = {
  tool: 'order_catering',
  match: { status: 'ordered' },
  require: ['order_id'],
  description: 'catering ordered for the booked room',
};

interface Setup {
  store?: TaskStore;
  bookings?: BookingService;
  kitchen?: CateringDesk;
  script?: ScriptStep[];
  policy?: Partial<Policy>;
  /** Replaces the cancel tool (a variant that asks for confirmation...). */
  cancelTool?: (bookings: BookingService) => Tool;
  cancelOnStop?: boolean;
  reserveTimeoutMs?: number;
  cancelTimeoutMs?: number;
  clock?: ManualClock;
}

/** The saga's script: book R7, order catering for it, then answer (truthfully) with what happened. */
const sagaScript = (): ScriptStep[] => [
  reply.call('reserve_room', reserveArgs()),
  (view) => reply.call('order_catering', { booking_id: view.data<Booking>('reserve_room')!.booking_id, people: 3 }),
  reply.answer('The room is booked but the kitchen refused the catering.'),
];

function setup(options: Setup = {}) {
  const store = options.store ?? new MemoryStore();
  const bookings = options.bookings ?? new BookingService();
  const kitchen = options.kitchen ?? new CateringDesk();
  const orchestrator = createOrchestrator({
    tools: [
      findAvailableRooms(bookings),
      reserveRoom(bookings, { cancelOnStop: options.cancelOnStop ?? true, timeoutMs: options.reserveTimeoutMs }),
      options.cancelTool
        ? options.cancelTool(bookings)
        : cancelBooking(bookings, { timeoutMs: options.cancelTimeoutMs }),
      orderCatering(kitchen),
    ],
    mandates: [bookingMandate],
    model: scriptedModel(options.script ?? sagaScript()),
    store,
    policy: options.policy,
    clock: options.clock,
    expirySweepMs: 0,
  });
  return { store, bookings, kitchen, orchestrator };
}

const start = (o: ReturnType<typeof setup>['orchestrator'], taskId: string) =>
  o.start({
    principal: E17,
    goal: 'Book a room for Monday 14:00 and order catering for 3',
    success: CATERING_SUCCESS,
    mandate: bookingMandate.of(BOOKING_TERMS),
    taskId,
  });

describe('the saga: a room booked, the catering refused, the booking undone', () => {
  it('cancels the booking once, through the gates, and says so in the outcome and the audit', async () => {
    const s = setup();
    s.kitchen.closed = 'the kitchen is closed on Mondays';
    await start(s.orchestrator, 'saga');
    const status = await s.orchestrator.settled('saga');

    expect(status.state).toBe('failed');
    expect(status.outcome?.reason.code).toBe('goal_not_met');
    expect(status.outcome?.reason.message).toMatch(/undid 1 of 1 write$/);
    expect(status.outcome?.compensations).toEqual([
      {
        ofCallId: expect.any(String),
        tool: 'reserve_room',
        undoTool: 'cancel_booking',
        callId: 'undo-1',
        result: 'compensated',
        code: null,
        summary: 'the compensating write succeeded',
      },
    ]);
    expect(s.bookings.cancelRequests).toEqual([{ bookingId: 'B204', idempotencyKey: expect.any(String) }]);
    expect(s.bookings.bookings[0]?.cancelledAt).toEqual(expect.any(String));

    const audit = await s.orchestrator.audit('saga');
    const kinds = audit.map((e) => e.kind);
    // One stop, recorded when the undo starts and when it is done; every gate asked of the undo on the way.
    expect(kinds.filter((k) => k === 'task_stopped')).toHaveLength(1);
    expect(kinds.indexOf('compensation_started')).toBeLessThan(kinds.indexOf('compensation_finished'));
    expect(kinds.at(-1)).toBe('task_stopped');
    const undoGates = byKind(audit, 'gate').filter((g) => g.callId === 'undo-1');
    expect(undoGates.map((g) => `${g.gate}:${g.decision}`)).toEqual(
      expect.arrayContaining(['schema:pass', 'mandate:pass', 'permission:pass', 'budget:pass', 'confirmation:pass']),
    );
    expect(undoGates.find((g) => g.gate === 'mandate')?.summary).toMatch(/compensation/);
    // Its key is its own (task + cancel_booking + arguments), not the booking's.
    const started = byKind(audit, 'tool_started');
    expect(started.map((e) => e.tool)).toEqual(['reserve_room', 'order_catering', 'cancel_booking']);
    expect(new Set(started.map((e) => e.idempotencyKey)).size).toBe(3);
    // The model never sees the undo: its transcript ends with its answer.
    const transcript = await s.orchestrator.transcript('saga');
    expect(transcript.some((e) => e.kind === 'result' && e.observation.tool === 'cancel_booking')).toBe(false);

    // The audit replays through `stopping` and the undo along the chart's own transitions.
    const replayed = replayAudit(audit);
    expect(replayed.visited).toEqual(expect.arrayContaining(['stopping', 'executing.writing', 'failed']));
    const states = new Set(describeChart(agentMachine).states.map((state) => state.path));
    for (const state of replayed.visited) expect(states, state).toContain(state);
    expect(replayed.state).toBe('failed');
  });

  it('undoes nothing when the goal is met', async () => {
    const s = setup();
    await start(s.orchestrator, 'happy');
    const status = await s.orchestrator.settled('happy');
    expect(status.state).toBe('done');
    expect(status.outcome?.compensations).toBeUndefined();
    expect(s.bookings.cancelRequests).toEqual([]);
  });

  it('undoes nothing when the policy says so (compensateOn: [])', async () => {
    const s = setup({ policy: { compensateOn: [] } });
    s.kitchen.closed = 'closed';
    await start(s.orchestrator, 'keep');
    const status = await s.orchestrator.settled('keep');
    expect(status.state).toBe('failed');
    expect(status.outcome?.compensations).toBeUndefined();
    expect(s.bookings.cancelRequests).toEqual([]);
    expect(s.bookings.bookings[0]?.cancelledAt).toBeUndefined();
  });

  it('undoes nothing for a write whose tool names no compensation', async () => {
    const s = setup({ cancelOnStop: false });
    s.kitchen.closed = 'closed';
    await start(s.orchestrator, 'plain');
    const status = await s.orchestrator.settled('plain');
    expect(status.state).toBe('failed');
    expect(status.outcome?.compensations).toBeUndefined();
    expect(s.bookings.cancelRequests).toEqual([]);
  });

  it('undoes the booking when the write budget ran out before the catering (the undo is not refused for budget)', async () => {
    const s = setup();
    const status = await s.orchestrator.run({
      principal: E17,
      goal: 'Book a room and order catering',
      success: CATERING_SUCCESS,
      mandate: bookingMandate.of(BOOKING_TERMS),
      limits: { writes: 1 },
      taskId: 'budget',
    });
    expect(status.state).toBe('budget_exhausted');
    expect(status.outcome?.compensations?.map((c) => c.result)).toEqual(['compensated']);
    expect(s.bookings.cancelRequests).toHaveLength(1);
    expect(s.kitchen.orders).toEqual([]);
  });
});

describe('writes of several turns', () => {
  it('undoes each, newest first, though the model reused its call ids across turns', async () => {
    const s = setup({
      script: [
        reply.calls({ name: 'reserve_room', args: reserveArgs(), callId: 'call_0' }),
        reply.calls({
          name: 'reserve_room',
          args: reserveArgs({ room_id: 'R9', expected_version: 6 }),
          callId: 'call_0',
        }),
        reply.answer('Two rooms booked, no catering.'),
      ],
    });
    await start(s.orchestrator, 'two');
    const status = await s.orchestrator.settled('two');
    expect(status.state).toBe('failed');
    expect(s.bookings.cancelRequests.map((r) => r.bookingId)).toEqual(['B205', 'B204']);
    expect(status.outcome?.compensations?.map((c) => `${c.ofCallId}:${c.result}`)).toEqual([
      'call_0:compensated',
      'call_0:compensated',
    ]);
  });
});

describe('an undo after a cancel', () => {
  it('cancels the booking when the user cancels the task after it booked', async () => {
    const s = setup({
      script: [reply.call('reserve_room', reserveArgs()), reply.ask('Which menu would you like?')],
    });
    await start(s.orchestrator, 'cx');
    await until(async () => (await s.orchestrator.status('cx')).state === 'waiting_for_user');
    const result = await s.orchestrator.cancel('cx', E17, 'changed my mind');
    expect(result.accepted).toBe(true);
    const status = await s.orchestrator.settled('cx');
    expect(status.state).toBe('cancelled');
    expect(status.outcome?.reason.message).toMatch(/^cancelled by E17: changed my mind; undid 1 of 1 write/);
    expect(s.bookings.cancelRequests).toHaveLength(1);
  });

  it('waits for the confirmation an undo asks for, and a second cancel leaves the effect standing, said as not_run', async () => {
    const confirmed = (b: BookingService) => ({ ...cancelBooking(b), confirm: 'always' as const });
    const s = setup({ cancelTool: confirmed });
    s.kitchen.closed = 'closed';
    await start(s.orchestrator, 'ask');
    await until(async () => (await s.orchestrator.status('ask')).state === 'waiting_for_confirmation');
    const waiting = await s.orchestrator.status('ask');
    expect(waiting.pendingConfirmation).toMatchObject({ tool: 'cancel_booking', callId: 'undo-1' });
    expect(waiting.outcome).toBeNull();

    await s.orchestrator.cancel('ask', E17, 'leave it');
    const status = await s.orchestrator.settled('ask');
    expect(status.state).toBe('cancelled');
    expect(status.outcome?.compensations).toEqual([
      expect.objectContaining({ tool: 'reserve_room', result: 'not_run', code: 'cancelled' }),
    ]);
    expect(status.outcome?.reason.message).toMatch(/still in effect: reserve_room/);
    expect(s.bookings.cancelRequests).toEqual([]);
  });
});

describe('an undo while the user is away', () => {
  it('undoes the booking of a task cancelled because its user never came back, without waiting for them', async () => {
    const clock = new ManualClock();
    const s = setup({ clock, policy: { awayTtlMs: 60_000 } });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const reserve = s.bookings.reserve.bind(s.bookings);
    s.bookings.reserve = async (request, signal) => (await gate, reserve(request, signal));
    await start(s.orchestrator, 'gone');
    await until(async () => JSON.stringify((await s.orchestrator.status('gone')).stateValue) === '"executing.writing"');
    await s.orchestrator.userLeft('gone', E17);
    release();
    // The booking finishes (what runs, finishes); the catering turn waits for the user.
    await until(async () => (await s.orchestrator.status('gone')).state === 'paused');
    expect(s.bookings.bookings).toHaveLength(1);
    await clock.advance(60_000);
    expect(await s.orchestrator.expireDue()).toBe(1);
    const status = await s.orchestrator.settled('gone');
    expect(status.state).toBe('cancelled');
    expect(status.outcome?.reason.code).toBe('user_away');
    expect(status.outcome?.compensations?.map((c) => c.result)).toEqual(['compensated']);
    expect(s.bookings.bookings[0]?.cancelledAt).toEqual(expect.any(String));
    expect(s.kitchen.orders).toEqual([]);
  });
});

describe('an undo across restarts and lost responses', () => {
  it('is confirmed after a restart and runs once', async () => {
    const store = new MemoryStore();
    const bookings = new BookingService();
    const kitchen = new CateringDesk();
    kitchen.closed = 'closed';
    const confirmed = (b: BookingService) => ({ ...cancelBooking(b), confirm: 'always' as const });
    const first = setup({ store, bookings, kitchen, cancelTool: confirmed });
    await start(first.orchestrator, 'restart');
    await until(async () => (await first.orchestrator.status('restart')).state === 'waiting_for_confirmation');
    await first.orchestrator.close();

    const second = setup({ store, bookings, kitchen, cancelTool: confirmed, script: [] });
    const waiting = await second.orchestrator.status('restart');
    const pending = waiting.pendingConfirmation!;
    const result = await second.orchestrator.confirm('restart', E17, pending);
    expect(result.accepted).toBe(true);
    const status = await second.orchestrator.settled('restart');
    expect(status.state).toBe('failed');
    expect(status.outcome?.compensations?.map((c) => c.result)).toEqual(['compensated']);
    expect(bookings.cancelRequests).toHaveLength(1);
  });

  it('reconciles an undo whose response was lost by its key, after the process died, and never sends it twice', async () => {
    const store = new MemoryStore();
    const bookings = new BookingService();
    const kitchen = new CateringDesk();
    kitchen.closed = 'closed';
    bookings.faults.loseNextCancelResponse = true;
    const first = setup({ store, bookings, kitchen, cancelTimeoutMs: 60_000 });
    await start(first.orchestrator, 'lost');
    await until(() => bookings.cancelRequests.length === 1);
    expect((await store.load('lost'))?.summary.stateValue).toBe('executing.writing');
    await first.orchestrator.close(); // the process dies with the undo in flight

    const second = setup({ store, bookings, kitchen, script: [] });
    await second.orchestrator.resume('lost');
    const status = await second.orchestrator.settled('lost');
    expect(status.state).toBe('failed');
    expect(status.outcome?.compensations?.map((c) => c.result)).toEqual(['compensated']);
    expect(bookings.cancelRequests).toHaveLength(1);
    const audit = await second.orchestrator.audit('lost');
    expect(byKind(audit, 'write_lookup').map((e) => `${e.tool}:${e.result}`)).toEqual(['cancel_booking:found']);
  });

  it('records a failed undo as failed, with the tool code, and the effect as still standing', async () => {
    const s = setup();
    s.kitchen.closed = 'closed';
    // Someone else's hands: the booking is gone before the undo runs.
    const original = s.bookings.cancel.bind(s.bookings);
    s.bookings.cancel = async (request, signal) => {
      const answer = await original(request, signal);
      return answer.status === 'cancelled' ? { status: 'not_found', detail: 'there is no booking B204' } : answer;
    };
    await start(s.orchestrator, 'fails');
    const status = await s.orchestrator.settled('fails');
    expect(status.outcome?.compensations).toEqual([
      expect.objectContaining({ result: 'failed', code: 'not_found', summary: 'there is no booking B204' }),
    ]);
    expect(status.outcome?.reason.message).toMatch(/undid 0 of 1 write \(still in effect: reserve_room/);
  });
});

describe('declaring a compensation', () => {
  it('records a write whose compensation rule throws as not compensable, and the stop still ends', async () => {
    const bookings = new BookingService();
    const kitchen = new CateringDesk();
    kitchen.closed = 'closed';
    const reserve = reserveRoom(bookings, { cancelOnStop: true });
    const broken = {
      ...reserve,
      compensation: {
        tool: 'cancel_booking',
        args: () => {
          throw new Error('no booking id in the receipt');
        },
      },
    };
    const orchestrator = createOrchestrator({
      tools: [findAvailableRooms(bookings), broken, cancelBooking(bookings), orderCatering(kitchen)],
      mandates: [bookingMandate],
      model: scriptedModel(sagaScript()),
      store: new MemoryStore(),
    });
    await start(orchestrator, 'broken');
    const status = await orchestrator.settled('broken');
    expect(status.state).toBe('failed');
    expect(status.outcome?.compensations).toEqual([
      expect.objectContaining({
        result: 'not_compensable',
        undoTool: null,
        summary: expect.stringMatching(/compensation rule of reserve_room failed: .*no booking id/),
      }),
    ]);
    expect(bookings.cancelRequests).toEqual([]);
  });

  it('refuses a compensation that names a tool not installed, or a read, or on a read', () => {
    const bookings = new BookingService();
    const model = scriptedModel([]);
    expect(() =>
      createOrchestrator({
        tools: [findAvailableRooms(bookings), reserveRoom(bookings, { cancelOnStop: true })],
        model,
        store: new MemoryStore(),
      }),
    ).toThrow(/compensation names cancel_booking, which is not an installed write tool/);
    const searchAsUndo = {
      ...reserveRoom(bookings),
      compensation: { tool: 'find_available_rooms', args: () => ({}) },
    };
    expect(() =>
      createOrchestrator({ tools: [searchAsUndo, findAvailableRooms(bookings)], model, store: new MemoryStore() }),
    ).toThrow(ToolDefinitionError);
    expect(() =>
      defineTool({
        ...findAvailableRooms(bookings),
        compensation: { tool: 'cancel_booking', args: () => ({}) },
      } as never),
    ).toThrow(/only a write is compensated/);
    expect(() =>
      defineTool({ ...reserveRoom(bookings), compensation: { tool: 'reserve_room', args: () => ({}) } }),
    ).toThrow(/cannot compensate itself/);
  });
});
