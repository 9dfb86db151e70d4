/**
 * A local, offline inspection stream: XState inspection events of task actors turned into small JSON messages,
 * one per actor registration, event and snapshot, for a sink (JSON lines, a local WebSocket, a test array).
 *
 * Snapshots hold actor refs, Errors and arbitrarily large tool outputs, so nothing is ever serialized raw: every
 * message is built from picked fields, and free-form values (events, outputs) go through `toSafeJson`, which
 * bounds depth, keys, array items and string length and replaces refs, functions and cycles by markers.
 *
 * A task's actor is replaced whenever the task is unloaded (waiting for a human) and reloaded, and XState's session
 * ids (`x:0`, `x:1`...) say nothing about tasks: each message also carries the task id, read from the root actor's
 * context (or its `xstate.init` input) and shared by its children through their actor system.
 */
import type { AnyActorRef, InspectionEvent } from 'xstate';
import { actionName, describeGuard } from '../visualize/describeChart.js';
import { DEFAULT_LIMITS, type SafeJsonLimits, toSafeJson, truncate } from './safeJson.js';

export { toSafeJson, type SafeJsonLimits } from './safeJson.js';

export type InspectionMessageType =
  '@xstate.actor' | '@xstate.event' | '@xstate.snapshot' | '@xstate.action' | '@xstate.microstep';

/** The state of an actor after a step, reduced to what a viewer needs. */
export interface SnapshotSummary {
  /** Machine state value (`"thinking"`, `{ "executing": "writing" }`); null for non-machine actors. */
  value: unknown;
  status: string;
  /** The agent context's headline (turn, mandate, budgets used, pending confirmation, review, outage, outcome), or a bounded copy. */
  context?: unknown;
  /** Output of a finished child actor (bounded). */
  output?: unknown;
}

export interface InspectionMessage {
  type: InspectionMessageType;
  /** Per stream, from 1: the order the events happened in. */
  seq: number;
  /** The task the actor belongs to, when known. */
  taskId: string | null;
  /** The actor's id: the invoke id for children (`model`, `vet`, `write`...); the session id for the root. */
  actorId: string;
  sessionId: string;
  /** True for the task's root actor (the agent machine). */
  root: boolean;
  parentId: string | null;
  /** `@xstate.event`: the event received; `@xstate.snapshot`: the event that produced it. */
  event?: { type: string; [field: string]: unknown };
  /** `@xstate.event`: the sender's session id, when another actor sent it. */
  sourceId?: string | null;
  snapshot?: SnapshotSummary;
  /** `@xstate.action`: the action executed. */
  action?: { type: string; params?: unknown };
  /**
   * `@xstate.microstep`: the transitions taken (source → targets), with the guard that allowed each (as the chart
   * spells it, e.g. `not hasScopesForTool`) and its actions: a refusal shows up by the name of the gate that made it.
   */
  transitions?: { event: string; source: string; targets: string[]; guard: string | null; actions: string[] }[];
  /** Milliseconds since the epoch, when the stream saw the event. */
  at: number;
}

export interface InspectionStreamOptions {
  /** Include `@xstate.action` events (default false: one per assign/emit, mostly noise). */
  actions?: boolean;
  /** Include `@xstate.microstep` events (default false: the following snapshot shows where the step ended). */
  microsteps?: boolean;
  /** Bounds for free-form values (events, outputs, non-agent contexts). */
  limits?: Partial<SafeJsonLimits>;
  now?: () => number;
}

/** Where messages go; `write` must not throw (a failing sink must not break a task). */
export interface InspectionSink {
  write(message: InspectionMessage): void;
  close(): Promise<void>;
}

type RefView = Partial<Pick<AnyActorRef, 'id' | 'sessionId' | 'system' | '_parent' | 'getSnapshot'>>;

/**
 * Returns an `inspect` callback for `createOrchestrator({ inspect })` (or `createActor`) that writes one message
 * per inspection event to `sink`. Messages of one task keep their order; a task's first messages are held back
 * until its id is known (within the same synchronous start).
 *
 * @example
 * const sink = jsonLinesSink(createWriteStream('inspect.jsonl'));
 * const orchestrator = createOrchestrator({ tools, model, inspect: createInspectionStream(sink) });
 */
export function createInspectionStream(
  sink: Pick<InspectionSink, 'write'> | ((message: InspectionMessage) => void),
  options: InspectionStreamOptions = {},
): (event: InspectionEvent) => void {
  const write = typeof sink === 'function' ? sink : (message: InspectionMessage) => sink.write(message);
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const now = options.now ?? Date.now;
  const taskIds = new WeakMap<object, string>();
  const held = new Map<object, InspectionMessage[]>();
  let seq = 0;

  const deliver = (message: InspectionMessage) => {
    try {
      write(message);
    } catch {
      // A sink failure must not reach the task's actor.
    }
  };
  const flush = (system: object, taskId: string | null) => {
    const messages = held.get(system);
    if (!messages) return;
    held.delete(system);
    for (const message of messages) deliver({ ...message, taskId });
  };

  return (event) => {
    if (event.type === '@xstate.action' && !options.actions) return;
    if (event.type === '@xstate.microstep' && !options.microsteps) return;
    if (event.type === '@xstate.transition') return;
    const ref = event.actorRef as RefView;
    const system = (ref.system ?? ref) as object;
    const isRoot = ref.sessionId === event.rootId;
    if (isRoot && !taskIds.has(system)) {
      const found = taskIdOf(event);
      if (found) taskIds.set(system, found);
    }
    const message = toMessage(event, ref, isRoot, ++seq, now(), limits);
    const taskId = taskIds.get(system) ?? null;
    if (taskId !== null) {
      flush(system, taskId);
      deliver({ ...message, taskId });
      return;
    }
    const pending = held.get(system);
    if (pending) {
      pending.push(message);
      return;
    }
    held.set(system, [message]);
    // Fallback: an actor whose task id never shows (not an agent machine) is streamed without one.
    queueMicrotask(() => flush(system, taskIds.get(system) ?? null));
  };
}

function taskIdOf(event: InspectionEvent): string | null {
  if (event.type === '@xstate.snapshot' || event.type === '@xstate.microstep') {
    const context = (event.snapshot as { context?: { taskId?: unknown } }).context;
    if (typeof context?.taskId === 'string') return context.taskId;
  }
  if (event.type === '@xstate.event' && event.event.type === 'xstate.init') {
    const input = (event.event as { input?: { taskId?: unknown } }).input;
    if (typeof input?.taskId === 'string') return input.taskId;
  }
  return null;
}

function toMessage(
  event: InspectionEvent,
  ref: RefView,
  root: boolean,
  seq: number,
  at: number,
  limits: SafeJsonLimits,
): InspectionMessage {
  const base = {
    type: event.type as InspectionMessageType,
    seq,
    taskId: null,
    actorId: String(ref.id ?? ref.sessionId ?? '?'),
    sessionId: String(ref.sessionId ?? '?'),
    root,
    parentId: ref._parent?.sessionId ?? null,
    at,
  };
  switch (event.type) {
    case '@xstate.actor':
      return base;
    case '@xstate.event':
      return { ...base, event: summarizeEvent(event.event, limits), sourceId: event.sourceRef?.sessionId ?? null };
    case '@xstate.snapshot':
      return {
        ...base,
        event: summarizeEvent(event.event, limits),
        snapshot: summarizeSnapshot(event.snapshot, limits),
      };
    case '@xstate.action':
      return { ...base, action: { type: event.action.type, params: toSafeJson(event.action.params, limits) } };
    case '@xstate.microstep':
      return {
        ...base,
        event: summarizeEvent(event.event, limits),
        snapshot: summarizeSnapshot(event.snapshot, limits),
        transitions: event._transitions.map((t) => ({
          event: String(t.eventType),
          source: String(t.source?.id ?? ''),
          targets: (t.target ?? []).map((node) => String(node.id)),
          guard: describeGuard(t.guard as never).text || null,
          actions: (t.actions ?? []).map(actionName),
        })),
      };
    default:
      return base;
  }
}

/** An event as `{ type, ...bounded fields }`. */
export function summarizeEvent(
  event: { type: string },
  limits: SafeJsonLimits = DEFAULT_LIMITS,
): { type: string; [field: string]: unknown } {
  const fields = toSafeJson(event, limits);
  return {
    ...(fields && typeof fields === 'object' && !Array.isArray(fields) ? fields : {}),
    type: String(event.type),
  };
}

/** Picks value, status, output and a context summary: never the snapshot object itself (it holds actor refs). */
export function summarizeSnapshot(snapshot: unknown, limits: SafeJsonLimits = DEFAULT_LIMITS): SnapshotSummary {
  const s = (snapshot ?? {}) as { value?: unknown; status?: unknown; context?: unknown; output?: unknown };
  const summary: SnapshotSummary = {
    value: s.value === undefined ? null : toSafeJson(s.value, limits),
    status: typeof s.status === 'string' ? s.status : 'unknown',
  };
  if (s.context !== undefined) summary.context = summarizeContext(s.context, limits);
  if (s.output !== undefined) summary.output = toSafeJson(s.output, limits);
  return summary;
}

/** The agent context's headline; any other context as a bounded copy. */
export function summarizeContext(context: unknown, limits: SafeJsonLimits = DEFAULT_LIMITS): unknown {
  const c = context as Record<string, unknown> | null;
  if (!c || typeof c !== 'object' || typeof c.taskId !== 'string' || typeof c.budget !== 'object')
    return toSafeJson(context, limits);
  const budget = c.budget as { used?: unknown };
  const pending = c.pendingConfirmation as {
    id?: unknown;
    tool?: unknown;
    argsHash?: unknown;
    expiresAt?: unknown;
  } | null;
  const batch = c.batch as {
    turn?: unknown;
    current?: unknown;
    calls?: {
      callId: string;
      tool: string;
      phase: string;
      observation: { ok: boolean; code?: string; gate?: string } | null;
    }[];
  } | null;
  const outcome = c.outcome as { status?: unknown; reason?: { code?: unknown } } | null;
  const review = c.review as { callId?: unknown; tool?: unknown; reason?: unknown } | null;
  const outage = c.outage as { attempts?: unknown; wakeAt?: unknown } | null;
  const approvals =
    (pending as { approvals?: unknown[]; approvalsRequired?: unknown; approverScope?: unknown } | null) ?? null;
  return {
    taskId: c.taskId,
    turn: c.turn ?? null,
    mandate: c.mandate ? toSafeJson(c.mandate, limits) : null,
    budgetUsed: toSafeJson(budget.used, limits),
    pendingConfirmation: pending
      ? {
          id: pending.id,
          tool: pending.tool,
          argsHash: pending.argsHash,
          expiresAt: pending.expiresAt,
          approverScope: approvals?.approverScope ?? null,
          approvals: Array.isArray(approvals?.approvals) ? approvals.approvals.length : 0,
          approvalsRequired: approvals?.approvalsRequired ?? 1,
        }
      : null,
    review: review ? { callId: review.callId, tool: review.tool, reason: review.reason } : null,
    outage: outage ? { attempts: outage.attempts, wakeAt: outage.wakeAt } : null,
    question: typeof c.question === 'string' ? truncate(c.question, limits.maxString) : null,
    batch: batch
      ? {
          turn: batch.turn ?? null,
          current: typeof batch.current === 'string' ? batch.current : null,
          calls: (batch.calls ?? []).slice(0, limits.maxItems).map((call) => ({
            callId: call.callId,
            tool: call.tool,
            phase: call.phase,
            result: call.observation ? (call.observation.ok ? 'ok' : (call.observation.code ?? 'error')) : null,
            gate: call.observation && !call.observation.ok ? (call.observation.gate ?? null) : null,
          })),
        }
      : null,
    outcome: outcome ? { status: outcome.status, code: outcome.reason?.code ?? null } : null,
  };
}
