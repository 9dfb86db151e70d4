/**
 * A closed world for exploring the agent machine: a fixed task (small budgets, a three-tool catalog), moves that
 * depend on the current state (see `agentMoves.ts`: model outputs, vetting verdicts, tool and lookup outcomes,
 * confirmations good and forged, cancels, restarts), and a *shadow*: what the harness itself delivered (protocol
 * validity, verdicts, genuine confirmations, unknown write outcomes), kept apart from the machine's context so the
 * safety properties check the machine against facts it did not compute.
 *
 * A world is an ActorLogic over `{ machine, shadow }` snapshots, so `xstate/graph` can traverse it; the state
 * identity is (state value, context without the constant task fields, shadow).
 */
import { type ActorLogic, type AnyActorScope, type SnapshotFrom, createActor } from 'xstate';
import { type AgentMachine, agentMachine } from '../../machines/agentMachine.js';
import { type AnyAgentEvent, eventTime } from '../../machines/agentEventsInternal.js';
import type { AgentContext, AgentInput, CallState, Catalog } from '../../machines/agentTypes.js';

export type AgentSnapshot = SnapshotFrom<AgentMachine>;

export const T0 = 1_700_000_000_000;
export const USER = 'E17';
export const INTRUDER = 'mallory';

export const CATALOG: Catalog = {
  search_rooms: { effect: 'read', sameKeyRetrySafe: false },
  book_room: { effect: 'write', sameKeyRetrySafe: true },
  send_payment: { effect: 'write', sameKeyRetrySafe: false },
};

export const INPUT: AgentInput = {
  taskId: 'task-1',
  goal: 'book room A for Monday',
  principal: { userId: USER, tenantId: 'acme', scopes: ['rooms:read', 'rooms:book', 'payments:send'] },
  catalog: CATALOG,
  policy: {
    version: 'policy-v1',
    maxCallsPerBatch: 2,
    maxArgumentBytes: 256,
    maxRejectedTurns: 1,
    maxInvalidOutputs: 1,
    confirmationTtlMs: 60_000,
    maxConfirmationRequests: 2,
    maxReconcileAttempts: 2,
    observationCapBytes: 512,
  },
  limits: { modelTurns: 3, toolCalls: 3, writes: 1, retries: 2, tokens: 10_000, costMicros: 10_000, wallClockMs: 3_600_000 },
  modelReservation: { tokens: 100, costMicros: 10 },
  success: { tool: 'book_room', require: ['bookingId'], description: 'a booking with an id' },
  startedAt: T0,
};

// --- the shadow -------------------------------------------------------------------------------------------

export interface ShadowCall {
  callId: string;
  tool: string;
  /** The harness built this proposal to pass the protocol gate. */
  protocolOk: boolean;
  /** The verdict the harness's vetting gave. */
  vetted: { gatesOk: boolean; argsHash: string; needsConfirmation: boolean } | null;
  /** A confirmation the harness delivered that is genuine: right id, user, policy, unexpired, vetted arguments. */
  grant: { confirmationId: string; argsHash: string } | null;
  /** Executions the machine started (observed on the edges). */
  starts: number;
  /** The last write attempt ended with an unknown outcome (timeout, executor error, restart). */
  unknown: boolean;
}

export interface Shadow {
  /** Harness clock: the latest `at` delivered. */
  now: number;
  calls: ShadowCall[];
}

export interface World {
  status: 'active';
  output: undefined;
  error: undefined;
  /** The chart under test: the agent machine, or a deliberately broken variant of it. */
  chart: AgentMachine;
  machine: AgentSnapshot;
  shadow: Shadow;
}

export type ProtocolExpectation = 'accepted' | 'rejected' | 'unpairable';

/** One move of the harness: a machine event (or a restart), with what the harness knows about it. */
export interface Move {
  /** Readable and unique per state; also the traversal's event type. */
  type: string;
  /** Delivered to the machine; for a restart, delivered after restoring (the executor's `interrupted`). */
  event: AnyAgentEvent | null;
  restart?: boolean;
  /** For proposals: what the protocol gate must decide. */
  protocol?: ProtocolExpectation;
  /** For outcomes whose data claims an approval: the same outcome with neutral data. */
  benign?: AnyAgentEvent;
  /** Human input that must be refused or ignored: it may not change the machine at all. */
  inert?: boolean;
}

// --- reading snapshots ------------------------------------------------------------------------------------

export function valueOf(snapshot: AgentSnapshot): string {
  const flat = (value: unknown): string =>
    typeof value === 'string'
      ? value
      : Object.entries(value as Record<string, unknown>)
          .map(([key, inner]) => `${key}.${flat(inner)}`)
          .join(',');
  return flat(snapshot.value);
}

export const FINAL_STATES = new Set(['done', 'failed', 'budgetExhausted', 'cancelled', 'reviewRequired']);
export const WAITING_STATES = new Set(['executing.awaitingConfirmation', 'awaitingUser']);
/** Stable states where the machine waits on one of its invoked actors, with the invoke id. */
export const INVOKING_STATES: Record<string, string> = {
  thinking: 'model',
  vetting: 'vet',
  'executing.reading': 'reads',
  'executing.writing': 'write',
  'executing.reconciling': 'lookup',
};

/** The context fields that change; the rest are the task's constants and are checked separately. */
export function variableContext(context: AgentContext) {
  const { taskId: _t, goal: _g, principal: _p, catalog: _c, policy: _o, modelReservation: _m, success: _s, startedAt: _a, ...rest } =
    context;
  return rest;
}

/**
 * State identity for the traversal. A closed batch is kept only as its turn: once closed, no guard or step reads its
 * calls again (the next proposal replaces it, stops leave a closed batch as it is), and every closed batch was
 * checked when it was reached. Without this the graph would multiply by every past batch's details.
 */
export function serializeWorld(world: World): string {
  const context = variableContext(world.machine.context);
  const closed = context.batch?.closed === true;
  return JSON.stringify([
    valueOf(world.machine),
    closed ? { ...context, batch: { turn: context.batch!.turn, closed } } : context,
    closed ? { now: world.shadow.now } : world.shadow,
  ]);
}

/** Calls whose execution starts on the edge prev → next (a read run, a first write, or a same-key retry). */
export function startedCalls(prev: AgentSnapshot, next: AgentSnapshot): CallState[] {
  const value = valueOf(next);
  if (value !== 'executing.reading' && value !== 'executing.writing') return [];
  const before = (callId: string) => prev.context.batch?.calls.find((c) => c.callId === callId);
  return (next.context.batch?.calls ?? []).filter((call) => {
    if (call.phase !== 'running') return false;
    const old = before(call.callId);
    return !old || old.phase !== 'running' || old.writeAttempts !== call.writeAttempts || valueOf(prev) !== value;
  });
}

// --- the world as actor logic -----------------------------------------------------------------------------

/** Restores a snapshot the way the runtime does after a crash: persist, JSON round trip, restore (not started). */
export function restore(snapshot: AgentSnapshot, chart: AgentMachine = agentMachine): AgentSnapshot {
  const persisted = JSON.parse(JSON.stringify(chart.getPersistedSnapshot(snapshot)));
  return createActor(chart, { snapshot: persisted, input: INPUT }).getSnapshot();
}

export function applyMove(world: World, move: Move, scope: AnyActorScope): World {
  const prev = world.machine;
  let next = move.restart ? restore(prev, world.chart) : prev;
  if (move.event) next = world.chart.transition(next, move.event as never, scope);
  return { ...world, machine: next, shadow: advanceShadow(world.shadow, prev, move, next) };
}

function advanceShadow(shadow: Shadow, prev: AgentSnapshot, move: Move, next: AgentSnapshot): Shadow {
  const event = move.event;
  const now = event ? Math.max(shadow.now, eventTime(event, shadow.now)) : shadow.now;
  let calls = shadow.calls;
  const update = (callId: string, patch: Partial<ShadowCall>) => {
    calls = calls.map((c) => (c.callId === callId ? { ...c, ...patch } : c));
  };
  if (event?.type === 'xstate.done.actor.model' && event.output.type === 'model.toolsProposed' && move.protocol !== 'unpairable') {
    calls = event.output.calls.map((c) => ({
      callId: c.callId!.trim(),
      tool: c.name,
      protocolOk: move.protocol === 'accepted',
      vetted: null,
      grant: null,
      starts: 0,
      unknown: false,
    }));
  }
  if (event?.type === 'xstate.done.actor.vet') {
    for (const v of event.output.verdicts) {
      update(v.callId, {
        vetted: { gatesOk: v.gates.every((g) => g.ok), argsHash: v.argsHash, needsConfirmation: v.needsConfirmation },
      });
    }
  }
  const pending = prev.context.pendingConfirmation;
  if (event?.type === 'user.confirmed' && pending && valueOf(prev) === 'executing.awaitingConfirmation') {
    const vetted = calls.find((c) => c.callId === pending.callId)?.vetted;
    const genuine =
      event.confirmationId === pending.id &&
      event.userId === USER &&
      event.at < pending.expiresAt &&
      event.policyVersion === INPUT.policy.version &&
      vetted !== null &&
      vetted !== undefined &&
      event.argsHash === vetted.argsHash;
    if (genuine) update(pending.callId, { grant: { confirmationId: event.confirmationId, argsHash: event.argsHash } });
  }
  const writing = prev.context.batch?.calls.find((c) => c.phase === 'running');
  if (writing && valueOf(prev) === 'executing.writing') {
    if (event?.type === 'xstate.done.actor.write') update(writing.callId, { unknown: event.output.outcome.kind === 'unknown' });
    if (event?.type === 'xstate.error.actor.write') update(writing.callId, { unknown: true });
  }
  for (const call of startedCalls(prev, next)) {
    const starts = calls.find((c) => c.callId === call.callId)?.starts ?? 0;
    update(call.callId, { starts: starts + 1, unknown: false });
  }
  return { now, calls };
}

export function initialWorld(scope: AnyActorScope, input: AgentInput = INPUT, chart: AgentMachine = agentMachine): World {
  return {
    status: 'active',
    output: undefined,
    error: undefined,
    chart,
    machine: chart.getInitialSnapshot(scope, input),
    shadow: { now: input.startedAt, calls: [] },
  };
}

/** The world of a task with `input` as actor logic, for `xstate/graph`. */
export function worldLogic(input: AgentInput = INPUT): ActorLogic<World, Move, undefined> {
  return {
    transition: (world, move, scope) => applyMove(world, move, scope as unknown as AnyActorScope),
    getInitialSnapshot: (scope) => initialWorld(scope as unknown as AnyActorScope, input),
    getPersistedSnapshot: (world) => world,
  };
}

/** The same task with other limits. */
export function withLimits(limits: Partial<AgentInput['limits']>): AgentInput {
  return { ...INPUT, limits: { ...INPUT.limits, ...limits } };
}
