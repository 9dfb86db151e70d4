/**
 * Plan-and-execute: the model proposes a whole plan first (a call of the host's `propose_plan`); the plan gate checks
 * it (well formed, acyclic, installed tools the user may use, within the mandate and the budget); a plan with a write
 * is approved by the task's user first, bound to its hash; then only the ready steps' tools are offered, and each
 * step's status changes only from a tool result, with the time it was observed.
 */
import { describe, expect, it } from 'vitest';
import { agentMachine } from '../machines/agentMachine.js';
import type { Policy } from '../machines/context.js';
import { BookingService } from '../examples/booking/bookingService.js';
import { BOOKING_SUCCESS, BOOKING_TERMS, E17, MEETING } from '../examples/booking/requests.js';
import { replayAudit } from '../src/audit/replayAudit.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { type ScriptStep, reply, scriptedModel } from '../src/testing/scriptedModel.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { describeChart } from '../src/visualize/describeChart.js';
import { findAvailableRooms } from '../tools/findAvailableRooms.js';
import { bookingMandate } from '../tools/mandates.js';
import { reserveRoom } from '../tools/reserveRoom.js';
import { byKind, reserveArgs } from './support/harness.js';
import { ToolDefinitionError } from '../src/errors.js';
import { buildMessages } from '../src/model/openai/openaiMessages.js';
import type { AnyActorScope } from 'xstate';
import type { MachineEvent, ReadResult } from '../machines/actors.js';
import type { ModelEvent } from '../machines/events.js';
import type { TranscriptEntry } from '../machines/journal.js';
import { type AgentSnapshot, CHART, T0, USER, withLimits, withPolicy } from './support/agentWorld.js';
import { inertScope } from './support/explore.js';

const SEARCH_THEN_BOOK = [
  { id: 's1', tool: 'find_available_rooms', purpose: 'find a free room with a projector' },
  { id: 's2', tool: 'reserve_room', purpose: 'book the room found', depends_on: ['s1'] },
];

interface Setup {
  script: ScriptStep[];
  planning?: Partial<Policy['planning']>;
  store?: TaskStore;
  bookings?: BookingService;
  /** The host policy version (default: the policy default). */
  version?: string;
}

function setup(options: Setup) {
  const bookings = options.bookings ?? new BookingService();
  const model = scriptedModel(options.script);
  const orchestrator = createOrchestrator({
    tools: [findAvailableRooms(bookings), reserveRoom(bookings)],
    mandates: [bookingMandate],
    model,
    store: options.store ?? new MemoryStore(),
    policy: {
      planning: { mode: 'plan_first', ...options.planning },
      ...(options.version ? { version: options.version } : {}),
    },
    expirySweepMs: 0,
  });
  return { bookings, model, orchestrator };
}

const start = (s: ReturnType<typeof setup>, taskId: string) =>
  s.orchestrator.start({
    principal: E17,
    goal: 'Book a room for Monday 14:00 for 3 with a projector',
    success: BOOKING_SUCCESS,
    mandate: bookingMandate.of(BOOKING_TERMS),
    taskId,
  });

/** Confirms whatever the task waits on, as E17. */
async function confirmPending(s: ReturnType<typeof setup>, taskId: string) {
  const status = await s.orchestrator.settled(taskId);
  expect(status.state).toBe('waiting_for_confirmation');
  const result = await s.orchestrator.confirm(taskId, E17, status.pendingConfirmation!);
  expect(result.accepted).toBe(true);
  return status.pendingConfirmation!;
}

describe('plan-and-execute', () => {
  it('has the plan approved, offers only ready steps, and settles each step from its tool result', async () => {
    const s = setup({
      script: [
        reply.plan(SEARCH_THEN_BOOK),
        // The model jumps ahead: reserve_room is not ready (s1 has not succeeded), so it is not offered.
        reply.call('reserve_room', reserveArgs()),
        reply.call('find_available_rooms', { ...MEETING }),
        reply.call('reserve_room', reserveArgs()),
        reply.answer('Booked R7.'),
      ],
    });
    await start(s, 'plan');
    const approval = await confirmPending(s, 'plan');
    expect(approval).toMatchObject({
      tool: 'propose_plan',
      reasons: ['plan'],
      argsHash: expect.stringMatching(/^sha256:/),
    });
    expect(approval.summary).toMatch(
      /^Approve plan-1: s1 find_available_rooms, s2 reserve_room \(writes: reserve_room/,
    );
    // The booking itself runs by its own confirmation rule (reserve_room waives it in writing): the plan named a
    // tool, not its arguments.
    const status = await s.orchestrator.settled('plan');

    expect(status.state).toBe('done');
    expect(s.bookings.reserveRequests).toHaveLength(1);
    expect(s.model.requests.map((r) => r.tools)).toEqual([
      ['propose_plan'],
      ['find_available_rooms'],
      ['find_available_rooms'],
      ['reserve_room'],
      [],
    ]);
    const plan = status.outcome?.plan;
    expect(plan).toMatchObject({ id: 'plan-1', status: 'adopted', approvedBy: [{ userId: 'E17', as: 'requester' }] });
    expect(plan?.steps.map((step) => [step.id, step.status])).toEqual([
      ['s1', 'succeeded'],
      ['s2', 'succeeded'],
    ]);
    expect(plan?.steps[1]).toMatchObject({ callId: 'call_4_1', evidence: expect.arrayContaining(['B204']) });
    expect(plan?.steps[1]?.observedAt).toEqual(expect.any(Number));

    const audit = await s.orchestrator.audit('plan');
    expect(byKind(audit, 'plan').map((e) => (e.action === 'step' ? `step ${e.step?.id}` : e.action))).toEqual([
      'proposed',
      'adopted',
      'step s1',
      'step s2',
    ]);
    const refused = byKind(audit, 'gate').find((g) => g.code === 'not_offered');
    expect(refused).toMatchObject({ tool: 'reserve_room', decision: 'reject' });
    // The model is shown the plan's state as facts, after the step's results.
    const transcript = await s.orchestrator.transcript('plan');
    const progress = transcript.filter((e) => e.kind === 'plan_progress');
    expect(progress).toHaveLength(2);
    // Sent to the model as the host's note, after the results (never inside a tool result).
    const messages = buildMessages(transcript, E17, { maxToolResultBytes: 8_192 });
    const notes = messages.filter((m) => m.role === 'user' && String(m.content).includes("The plan's state"));
    expect(notes).toHaveLength(2);
    expect(progress[1]).toMatchObject({
      text: expect.stringMatching(/s2 reserve_room: succeeded \(call call_4_1, observed at .*B204/),
    });

    // The audit replays along the chart's own states, through the approval.
    const replayed = replayAudit(audit);
    const states = new Set(describeChart(agentMachine).states.map((state) => state.path));
    for (const state of replayed.visited) expect(states, state).toContain(state);
    expect(replayed.visited).toContain('awaitingPlanApproval');
    expect(replayed.state).toBe('done');
  });

  it('refuses plans that cannot run, each with its own code, and the model may propose again', async () => {
    const s = setup({
      planning: { maxProposals: 6 },
      script: [
        reply.plan([{ id: 's1', tool: 'teleport' }]),
        reply.plan([
          { id: 'a', tool: 'find_available_rooms', depends_on: ['b'] },
          { id: 'b', tool: 'reserve_room', depends_on: ['a'] },
        ]),
        reply.plan([{ id: 'a', tool: 'find_available_rooms', depends_on: ['zz'] }]),
        { type: 'tool_calls', calls: [{ name: 'propose_plan', arguments: '{"steps": [' }] },
        reply.plan([{ id: 's1', tool: 'find_available_rooms' }]),
        reply.answer('Nothing to book.'),
      ],
    });
    await start(s, 'refused');
    const status = await s.orchestrator.settled('refused');
    expect(status.state).toBe('failed');
    const audit = await s.orchestrator.audit('refused');
    expect(byKind(audit, 'plan').map((e) => `${e.action}:${e.code ?? ''}`)).toEqual([
      'refused:unknown_tool',
      'refused:plan_cycle',
      'refused:plan_malformed',
      'refused:plan_malformed',
      // A read-only plan needs no approval by default.
      'adopted:',
    ]);
    const results = (await s.orchestrator.transcript('refused')).filter(
      (e) => e.kind === 'result' && e.observation.tool === 'propose_plan',
    );
    expect(results.map((e) => (e.kind === 'result' && !e.observation.ok ? e.observation.gate : 'ok'))).toEqual([
      'plan',
      'plan',
      'plan',
      'plan',
      'ok',
    ]);
  });

  it('refuses a plan whose tools the user may not use, or that the budget cannot pay for', async () => {
    const s = setup({
      planning: { maxProposals: 4 },
      script: [
        reply.plan(
          Array.from({ length: 12 }, (_, i) => ({
            id: `r${i}`,
            tool: 'find_available_rooms',
            depends_on: i ? [`r${i - 1}`] : [],
          })),
        ),
        reply.answer('Too long.'),
      ],
    });
    await start(s, 'budget');
    await s.orchestrator.settled('budget');
    const audit = await s.orchestrator.audit('budget');
    expect(byKind(audit, 'plan')[0]).toMatchObject({ action: 'refused', code: 'over_budget' });
    expect(byKind(audit, 'plan')[0]?.summary).toMatch(/needs about 13 modelTurns/);

    const reader = setup({ script: [reply.plan(SEARCH_THEN_BOOK), reply.answer('I may not book.')] });
    await reader.orchestrator.start({
      principal: { ...E17, scopes: ['rooms:read'] },
      goal: 'Book a room',
      taskId: 'reader',
    });
    await reader.orchestrator.settled('reader');
    const refused = byKind(await reader.orchestrator.audit('reader'), 'plan')[0];
    expect(refused).toMatchObject({ action: 'refused', code: 'permission_denied' });
  });

  it('asks a plan approval again under a new host policy, as a call confirmation is', async () => {
    const store = new MemoryStore();
    const first = setup({ store, script: [reply.plan(SEARCH_THEN_BOOK)] });
    await start(first, 'pv');
    const pending = (await first.orchestrator.settled('pv')).pendingConfirmation!;
    await first.orchestrator.close();
    const second = setup({ store, version: '2', script: [reply.plan(SEARCH_THEN_BOOK)] });
    const stale = await second.orchestrator.confirm('pv', E17, pending);
    expect(stale).toMatchObject({ accepted: false, code: 'policy_changed' });
    const fresh = stale.status.pendingConfirmation!;
    expect(fresh).toMatchObject({ request: 2, policyVersion: '2', argsHash: pending.argsHash });
    expect(fresh.id).not.toBe(pending.id);
    expect((await second.orchestrator.confirm('pv', E17, fresh)).accepted).toBe(true);
    await second.orchestrator.close();
  });

  it('tells the model a rejected plan did not run, and stops at the policy limit of proposals', async () => {
    const s = setup({
      planning: { maxProposals: 2 },
      script: [reply.plan(SEARCH_THEN_BOOK), reply.plan(SEARCH_THEN_BOOK), reply.plan(SEARCH_THEN_BOOK)],
    });
    await start(s, 'limit');
    let status = await s.orchestrator.settled('limit');
    const pending = status.pendingConfirmation!;
    // A confirmation for another plan hash is refused and changes nothing.
    const wrong = await s.orchestrator.confirm('limit', E17, { id: pending.id, argsHash: 'sha256:other' });
    expect(wrong).toMatchObject({ accepted: false, code: 'arguments_changed' });
    const rejected = await s.orchestrator.reject('limit', E17, { id: pending.id, reason: 'not this room' });
    expect(rejected.accepted).toBe(true);
    status = await s.orchestrator.settled('limit');
    expect(status.state).toBe('waiting_for_confirmation');
    await s.orchestrator.reject('limit', E17, { id: status.pendingConfirmation!.id });
    status = await s.orchestrator.settled('limit');
    expect(status.state).toBe('failed');
    expect(status.outcome?.reason.code).toBe('plan_limit');
    expect(s.bookings.searches).toBe(0);
    const told = (await s.orchestrator.transcript('limit')).filter(
      (e) => e.kind === 'result' && !e.observation.ok && e.observation.code === 'plan_rejected',
    );
    expect(told).toHaveLength(2);
  });

  it('lets the model re-plan after a step fails, keeping what succeeded as facts', async () => {
    const bookings = new BookingService();
    bookings.faults.rivalBeforeReserve = { roomId: 'R7', requesterId: 'E99' };
    const s = setup({
      bookings,
      planning: { approval: 'never' },
      script: [
        reply.plan(SEARCH_THEN_BOOK),
        reply.call('find_available_rooms', { ...MEETING }),
        reply.call('reserve_room', reserveArgs()),
        reply.plan([{ id: 's3', tool: 'reserve_room', purpose: 'book R9 instead', depends_on: ['s1'] }]),
        reply.call('reserve_room', reserveArgs({ room_id: 'R9', expected_version: 6 })),
        reply.answer('Booked.'),
      ],
    });
    await start(s, 'replan');
    const status = await s.orchestrator.settled('replan');
    const offered = s.model.requests.map((r) => r.tools);
    // After s2 failed, the model may only re-plan (or answer).
    expect(offered[3]).toEqual(['propose_plan']);
    expect(status.outcome?.plan?.id).toBe('plan-2');
    expect(status.outcome?.plan?.steps.map((step) => step.status)).toEqual(['succeeded']);
  });

  it('survives a restart while the plan waits for approval', async () => {
    const store = new MemoryStore();
    const bookings = new BookingService();
    const script = [
      reply.plan(SEARCH_THEN_BOOK),
      reply.call('find_available_rooms', { ...MEETING }),
      reply.call('reserve_room', reserveArgs()),
      reply.answer('Booked R7.'),
    ];
    const first = setup({ store, bookings, script });
    await start(first, 'restart');
    const waiting = await first.orchestrator.settled('restart');
    await first.orchestrator.close();

    const second = setup({ store, bookings, script });
    await second.orchestrator.recover();
    expect((await second.orchestrator.status('restart')).pendingConfirmation).toEqual(waiting.pendingConfirmation);
    await second.orchestrator.confirm('restart', E17, waiting.pendingConfirmation!);
    const status = await second.orchestrator.settled('restart');
    expect(status.state).toBe('done');
    expect(bookings.reserveRequests).toHaveLength(1);
    expect(status.outcome?.plan?.steps.every((step) => step.status === 'succeeded')).toBe(true);
  });

  it('refuses a plan when planning is off, and never offers propose_plan', async () => {
    const s = setup({
      planning: { mode: 'off' },
      script: [reply.plan(SEARCH_THEN_BOOK), reply.answer('No plan then.')],
    });
    await start(s, 'off');
    await s.orchestrator.settled('off');
    expect(s.model.requests[0]?.tools).not.toContain('propose_plan');
    expect(byKind(await s.orchestrator.audit('off'), 'plan')[0]).toMatchObject({ code: 'planning_off' });
  });

  it('takes a plan proposed with other calls as unusable output', async () => {
    const s = setup({
      script: [
        reply.calls(
          {
            name: 'propose_plan',
            args: { steps: [{ id: 's1', tool: 'find_available_rooms', purpose: 'x', depends_on: [] }] },
          },
          { name: 'find_available_rooms', args: { ...MEETING } },
        ),
        reply.answer('Sorry.'),
      ],
    });
    await start(s, 'mixed');
    await s.orchestrator.settled('mixed');
    const output = byKind(await s.orchestrator.audit('mixed'), 'model_output')[0];
    expect(output).toMatchObject({
      output: 'model.invalidOutput',
      detail: expect.stringMatching(/propose a plan alone/),
    });
    expect(s.bookings.searches).toBe(0);
  });

  it('refuses a tool named propose_plan', () => {
    const tool = { ...findAvailableRooms(new BookingService()), name: 'propose_plan' };
    expect(() => createOrchestrator({ tools: [tool], model: scriptedModel([]) })).toThrow(ToolDefinitionError);
  });
});

describe('a plan through the HTTP service', () => {
  it('shows the plan in the task status and is approved through the same confirm door as a call', async () => {
    const { default: Fastify } = await import('fastify');
    const { agentService } = await import('../src/http/index.js');
    const s = setup({
      script: [
        reply.plan(SEARCH_THEN_BOOK),
        reply.call('find_available_rooms', { ...MEETING }),
        reply.call('reserve_room', reserveArgs()),
        reply.answer('Booked R7.'),
      ],
    });
    const app = Fastify();
    await app.register(agentService, {
      orchestrator: s.orchestrator,
      authenticate: (request) => (request.headers['x-user'] === 'E17' ? E17 : null),
      startRequest: () => {
        throw new Error('this test starts its task through the library');
      },
      pages: false,
    });
    try {
      await start(s, 'http-plan');
      await s.orchestrator.settled('http-plan');
      const shown = await app.inject({ method: 'GET', url: '/api/tasks/http-plan', headers: { 'x-user': 'E17' } });
      const status = shown.json().status ?? shown.json();
      expect(status.plan).toMatchObject({ id: 'plan-1', status: 'awaiting_approval' });
      expect(status.pendingConfirmation).toMatchObject({ tool: 'propose_plan' });
      const confirm = (argsHash: string) =>
        app.inject({
          method: 'POST',
          url: '/api/tasks/http-plan/confirm',
          headers: { 'x-user': 'E17' },
          payload: { confirmationId: status.pendingConfirmation.id, argsHash },
        });
      expect((await confirm('sha256:not-the-plan')).statusCode).toBe(409);
      expect((await confirm(status.pendingConfirmation.argsHash)).statusCode).toBe(200);
      const done = await s.orchestrator.settled('http-plan');
      expect(done.state).toBe('done');
      expect(done.plan?.steps.map((step) => step.status)).toEqual(['succeeded', 'succeeded']);
    } finally {
      await app.close();
      await s.orchestrator.close();
    }
  });
});

describe('plan-and-execute, when the task stops or a result is lost mid-plan', () => {
  const input = withPolicy(
    { planning: { mode: 'plan_first', approval: 'writes', approverScope: null, maxProposals: 3, maxSteps: 4 } },
    withLimits({ modelTurns: 5, toolCalls: 4 }),
  );
  const usage = { inputTokens: 1, outputTokens: 1, costMicros: 1 };
  /** Runs `events` through the world's chart, collecting the transcript entries it emits. */
  function run(events: ((snapshot: AgentSnapshot) => MachineEvent)[]) {
    const transcript: TranscriptEntry[] = [];
    const scope = {
      ...inertScope(),
      defer: (fn: () => void) => fn(),
      emit: (e: { type: string; entry?: TranscriptEntry }) => e.type === 'transcript' && transcript.push(e.entry!),
      actionExecutor: (a: { type: string; info: unknown; params: unknown; exec?: (i: unknown, p: unknown) => void }) =>
        a.type === 'xstate.emit' && a.exec?.(a.info, a.params),
    } as unknown as AnyActorScope;
    let snapshot = CHART.getInitialSnapshot(scope, input);
    for (const next of events) snapshot = CHART.transition(snapshot, next(snapshot) as never, scope);
    return { snapshot, transcript };
  }
  const model = (event: ModelEvent): MachineEvent => ({
    type: 'xstate.done.actor.model',
    output: { kind: 'replied', at: T0, retriesUsed: 0, event },
  });
  const plan = (callId: string, steps: unknown[]) => () =>
    model({ type: 'model.planProposed', at: T0, callId, arguments: JSON.stringify({ steps }), text: null, usage });
  const search = () =>
    model({
      type: 'model.toolsProposed',
      at: T0,
      calls: [{ callId: 'c1', name: 'search_rooms', arguments: '{"day":"mon"}' }],
      text: null,
      usage,
    });
  const reads = (results: ReadResult[]) => (): MachineEvent => ({
    type: 'xstate.done.actor.reads',
    output: { at: T0, results, retriesUsed: 0 },
  });
  const cancel = (): MachineEvent => ({ type: 'task.cancelled', at: T0, reason: 'no', by: USER });
  const look = [{ id: 'look', tool: 'search_rooms', purpose: 'see which rooms are free' }];

  it('gives the propose_plan call of a plan cancelled while it waits for approval its result', () => {
    const steps = [...look, { id: 'book', tool: 'book_room', purpose: 'book it', depends_on: ['look'] }];
    const { snapshot, transcript } = run([plan('p1', steps), cancel]);
    expect(snapshot.value).toBe('cancelled');
    const results = transcript.filter((e) => e.kind === 'result' && e.observation.callId === 'p1');
    expect(results).toEqual([
      expect.objectContaining({ observation: expect.objectContaining({ ok: false, code: 'cancelled', gate: 'plan' }) }),
    ]);
  });

  it('skips, rather than fails, a step whose call a stop left unrun', () => {
    const { snapshot } = run([plan('p1', look), search, cancel]);
    expect(snapshot.value).toBe('cancelled');
    expect(snapshot.context.outcome?.plan?.steps[0]).toMatchObject({ id: 'look', status: 'skipped', failure: null });
  });

  it('keeps a step pending when the host lost its result', () => {
    const { snapshot } = run([plan('p1', look), search, reads([])]);
    expect(snapshot.context.plan?.current?.steps[0]).toMatchObject({ id: 'look', status: 'pending' });
  });

  it("never settles a later plan's step from a result that came before it", () => {
    // The search fails (the tool's own failure): p1 is stuck, so a new plan may replace it.
    const failed: ReadResult = {
      callId: 'c1',
      outcome: { kind: 'error', code: 'tool_error', summary: 'search broke', retryable: false },
      attempts: 1,
      durationMs: 1,
    };
    const again = [{ id: 'again', tool: 'search_rooms', purpose: 'look again' }];
    const { snapshot } = run([plan('p1', look), search, reads([failed]), plan('p2', again), cancel]);
    expect(snapshot.context.plan?.current?.steps[0]).toMatchObject({ id: 'again', status: 'pending' });
    expect(snapshot.context.outcome?.plan?.steps[0]).toMatchObject({ id: 'again', status: 'skipped', callId: null });
  });
});
