/**
 * A closed world for exploring the agent machine: a fixed task (small budgets, a four-tool catalog with the host's
 * rules for each), moves that depend on the current state (see `agentMoves.ts`: model outputs, business and
 * authorization verdicts, tool and lookup outcomes, confirmations good and forged, cancels, restarts), and a
 * *shadow*: what the harness itself knows and delivered (which proposals are well-formed and schema-valid, which
 * scopes the principal holds, the hook verdicts it gave, genuine confirmations, unknown write outcomes), kept apart
 * from the machine's context so the safety properties check the machine against facts it did not compute.
 *
 * A world is an ActorLogic over `{ machine, shadow }` snapshots, so `xstate/graph` can traverse it; the state
 * identity is (state value, context without the constant task fields, shadow).
 */
import { type ActorLogic, type AnyActorScope, type SnapshotFrom, createActor } from 'xstate';
import { z } from 'zod';
import { type AgentMachine, createAgentMachine } from '../../machines/agentMachine.js';
import { type MachineEvent, eventTime } from '../../machines/actors.js';
import type { AgentContext, AgentInput, CallState, Catalog } from '../../machines/context.js';
import type { ToolRules, Toolkit } from '../../machines/toolkit.js';
import { hashArguments, sha256Hex } from '../../src/hashing.js';

export type AgentSnapshot = SnapshotFrom<AgentMachine>;

export const T0 = 1_700_000_000_000;
export const USER = 'E17';
export const INTRUDER = 'mallory';

export const CATALOG: Catalog = {
  search_rooms: { effect: 'read', sameKeyRetrySafe: false },
  book_room: { effect: 'write', sameKeyRetrySafe: true },
  send_payment: { effect: 'write', sameKeyRetrySafe: false },
  close_rooms: { effect: 'write', sameKeyRetrySafe: true },
};

/**
 * The host's rules of the world's tools. A read on Sundays needs confirmation; a booking goes through business
 * validation and a resource permission check; a payment through business validation and always a confirmation;
 * closing rooms needs a scope the task's principal lacks.
 */
export const RULES: Record<string, ToolRules> = {
  search_rooms: {
    name: 'search_rooms',
    effect: 'read',
    input: z.strictObject({ day: z.string() }),
    scopes: ['rooms:read'],
    validates: false,
    authorizes: false,
    confirm: (args: { day: string }) => args.day === 'sun',
  },
  book_room: { name: 'book_room', effect: 'write', input: z.strictObject({ room: z.string() }), scopes: ['rooms:book'], validates: true, authorizes: true },
  send_payment: {
    name: 'send_payment',
    effect: 'write',
    input: z.strictObject({ amount: z.number() }),
    scopes: ['payments:send'],
    validates: true,
    authorizes: false,
    confirm: 'always',
  },
  close_rooms: { name: 'close_rooms', effect: 'write', input: z.strictObject({}), scopes: ['rooms:admin'], validates: false, authorizes: false },
};

export const TOOLKIT: Toolkit = { rules: (name) => RULES[name], sha256: sha256Hex };

/** The chart under exploration, with the world's tools. */
export const CHART: AgentMachine = createAgentMachine(TOOLKIT);

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

/** What the harness knows of one proposed call, from its own reading of the host's rules. */
export interface CallFacts {
  callId: string;
  /** The proposal built this call to pass the schema gate. */
  schemaOk: boolean;
}

/** A hook verdict the harness delivered: `n/a` when the tool has no such hook, null while none was given yet. */
export type Verdict = 'pass' | 'reject' | 'n/a' | null;

export interface ShadowCall {
  callId: string;
  tool: string;
  /** The harness built this proposal to pass the protocol gate. */
  protocolOk: boolean;
  schemaOk: boolean;
  /** The principal holds every scope the tool requires. */
  scopeOk: boolean;
  business: Verdict;
  authorize: Verdict;
  /** The host's rule asks a human for these arguments. */
  needsConfirmation: boolean;
  /** Hash of the arguments as proposed (parsed), when they are a JSON object. */
  argsHash: string | null;
  /** A confirmation the harness delivered that is genuine: right id, user, policy, unexpired, the proposed arguments. */
  grant: { confirmationId: string; argsHash: string } | null;
  /** Executions the machine started (observed on the edges). */
  starts: number;
  /** The last write attempt ended with an unknown outcome (timeout, executor error, restart). */
  unknown: boolean;
}

/** Every gate passed by the harness's own account: protocol, schema, business, scope and resource permission. */
export function gatesOk(call: ShadowCall | undefined): boolean {
  if (!call) return false;
  const done = (v: Verdict) => v === 'pass' || v === 'n/a';
  return call.protocolOk && call.schemaOk && call.scopeOk && done(call.business) && done(call.authorize);
}

/** The gate that must refuse the call, by the harness's account (first in gate order), or null. */
export function refusingGate(call: ShadowCall): 'protocol' | 'schema' | 'business' | 'permission' | null {
  if (!call.protocolOk) return 'protocol';
  if (!call.schemaOk) return 'schema';
  if (call.business === 'reject') return 'business';
  if (!call.scopeOk || call.authorize === 'reject') return 'permission';
  return null;
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
  event: MachineEvent | null;
  restart?: boolean;
  /** For proposals: what the protocol gate must decide, and what the harness knows of each call. */
  protocol?: ProtocolExpectation;
  calls?: CallFacts[];
  /** For a hook's verdict: which gate, for which call, and whether it passes. */
  check?: { gate: 'business' | 'permission'; callId: string; ok: boolean };
  /** For outcomes whose data claims an approval: the same outcome with neutral data. */
  benign?: MachineEvent;
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
  'vetting.validating': 'validate',
  'vetting.authorizing': 'authorize',
  'executing.reading': 'reads',
  'executing.writing': 'write',
  'executing.reconciling': 'lookup',
};
/** The states in which a call's effect runs. */
export const RUNNING_PHASES = new Set(['reading', 'writing']);

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
    if (!RUNNING_PHASES.has(call.phase)) return false;
    const old = before(call.callId);
    return !old || !RUNNING_PHASES.has(old.phase) || old.writeAttempts !== call.writeAttempts || valueOf(prev) !== value;
  });
}

// --- the world as actor logic -----------------------------------------------------------------------------

/** Restores a snapshot the way the runtime does after a crash: persist, JSON round trip, restore (not started). */
export function restore(snapshot: AgentSnapshot, chart: AgentMachine = CHART): AgentSnapshot {
  const persisted = JSON.parse(JSON.stringify(chart.getPersistedSnapshot(snapshot)));
  return createActor(chart, { snapshot: persisted, input: INPUT }).getSnapshot();
}

export function applyMove(world: World, move: Move, scope: AnyActorScope): World {
  const prev = world.machine;
  let next = move.restart ? restore(prev, world.chart) : prev;
  if (move.event) next = world.chart.transition(next, move.event as never, scope);
  return { ...world, machine: next, shadow: advanceShadow(world.shadow, prev, move, next) };
}

function parsedArgs(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** The harness's own reading of the host's rules for one proposed call. */
function shadowOf(callId: string, tool: string, text: string, protocolOk: boolean, facts: CallFacts | undefined): ShadowCall {
  const rules = RULES[tool];
  const args = parsedArgs(text);
  const object = args !== null && typeof args === 'object' && !Array.isArray(args);
  const schemaOk = protocolOk && facts?.schemaOk === true;
  // Read independently of the rules' own code: payments always ask, a search asks on Sundays.
  const needsConfirmation = schemaOk && (tool === 'send_payment' || (tool === 'search_rooms' && (args as { day?: unknown }).day === 'sun'));
  return {
    callId,
    tool,
    protocolOk,
    schemaOk,
    scopeOk: rules !== undefined && rules.scopes.every((s) => INPUT.principal.scopes.includes(s)),
    business: rules?.validates ? null : 'n/a',
    authorize: rules?.authorizes ? null : 'n/a',
    needsConfirmation,
    argsHash: object ? hashArguments(args) : null,
    grant: null,
    starts: 0,
    unknown: false,
  };
}

function advanceShadow(shadow: Shadow, prev: AgentSnapshot, move: Move, next: AgentSnapshot): Shadow {
  const event = move.event;
  const now = event ? Math.max(shadow.now, eventTime(event, shadow.now)) : shadow.now;
  let calls = shadow.calls;
  const update = (callId: string, patch: Partial<ShadowCall>) => {
    calls = calls.map((c) => (c.callId === callId ? { ...c, ...patch } : c));
  };
  if (event?.type === 'xstate.done.actor.model' && event.output.kind === 'replied' && event.output.event.type === 'model.toolsProposed' && move.protocol !== 'unpairable') {
    calls = event.output.event.calls.map((c) => {
      const callId = c.callId!.trim();
      return shadowOf(callId, c.name, c.arguments, move.protocol === 'accepted', move.calls?.find((f) => f.callId === callId));
    });
  }
  if (move.check && (event?.type === 'xstate.done.actor.validate' || event?.type === 'xstate.done.actor.authorize')) {
    const verdict = move.check.ok ? 'pass' : 'reject';
    update(move.check.callId, move.check.gate === 'business' ? { business: verdict } : { authorize: verdict });
  }
  const pending = prev.context.pendingConfirmation;
  if (event?.type === 'user.confirmed' && pending && valueOf(prev) === 'executing.awaitingConfirmation') {
    const call = calls.find((c) => c.callId === pending.callId);
    const genuine =
      event.confirmationId === pending.id &&
      event.userId === USER &&
      event.at < pending.expiresAt &&
      event.policyVersion === INPUT.policy.version &&
      call !== undefined &&
      gatesOk(call) &&
      event.argsHash === call.argsHash;
    if (genuine) update(pending.callId, { grant: { confirmationId: event.confirmationId, argsHash: event.argsHash } });
  }
  const writing = prev.context.batch?.calls.find((c) => c.phase === 'writing');
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

export function initialWorld(scope: AnyActorScope, input: AgentInput = INPUT, chart: AgentMachine = CHART): World {
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
