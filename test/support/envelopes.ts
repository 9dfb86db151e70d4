/**
 * Valid task envelopes for store tests. The base snapshot comes from actually starting the agent machine (with a
 * model that never answers), so it has the shape XState persists, an in-flight invocation included; other states
 * are derived from it by setting the fields the summary reads. Every envelope passes `parseEnvelope`.
 */
import { DEFAULT_PLANNING } from '../../machines/plans.js';
import { createActor, fromPromise } from 'xstate';
import { agentMachine, AGENT_MACHINE_VERSION } from '../../machines/agentMachine.js';
import type { AgentContext, AgentInput, CallState, FinalStatus } from '../../machines/context.js';
import type { StopCode } from '../../machines/failures.js';
import { tagsAt } from '../../machines/tags.js';
import { ENVELOPE_SCHEMA_VERSION, type PersistedAgentSnapshot, type TaskEnvelope } from '../../src/store/envelope.js';
import { type TaskState, summarize } from '../../src/store/summary.js';
import type { SaveRequest } from '../../src/store/taskStore.js';

/** The time tasks start at unless a test says otherwise. */
export const T0 = 1_700_000_000_000;

/** A plausible task input for `taskId`. */
export function taskInput(taskId: string, overrides: Partial<AgentInput> = {}): AgentInput {
  return {
    taskId,
    goal: 'Book a meeting room for Friday 10:00',
    principal: { userId: 'E17', tenantId: 'acme', scopes: ['rooms:read', 'rooms:book'] },
    mandate: null,
    catalog: {
      find_rooms: { effect: 'read', sameKeyRetrySafe: true },
      book_room: { effect: 'write', sameKeyRetrySafe: true },
    },
    provenance: { model: { id: 'scripted', version: null }, prompt: null },
    policy: {
      version: 'policy/1',
      maxCallsPerBatch: 4,
      maxArgumentBytes: 4096,
      maxRejectedTurns: 3,
      maxInvalidOutputs: 2,
      confirmationTtlMs: 600_000,
      maxConfirmationRequests: 2,
      maxReconcileAttempts: 3,
      observationCapBytes: 8192,
      onRepeatedDenial: 'stop',
      reviewScope: 'tasks:review',
      answerTtlMs: 3_600_000,
      onAnswerExpiry: 'stop',
      modelOutageMs: 600_000,
      modelWakeMs: { first: 1_000, longest: 60_000 },
      unconfirmedMoneyUpTo: 0,
      highRiskApproval: null,
      ruleOfTwo: 'confirm',
      maxUnknownReads: 2,
      compensateOn: ['failed', 'budget_exhausted', 'cancelled'],
      awayTtlMs: 86_400_000,
      planning: { ...DEFAULT_PLANNING },
      loosened: [],
    },
    limits: {
      modelTurns: 8,
      toolCalls: 16,
      writes: 2,
      retries: 4,
      tokens: 100_000,
      costMicros: 1_000_000,
      money: 0,
      wallClockMs: 600_000,
    },
    modelReservation: { tokens: 1000, costMicros: 1000 },
    success: { tool: 'book_room', match: { status: 'confirmed' }, require: ['bookingId'] },
    startedAt: T0,
    ...overrides,
  };
}

/** Plain JSON copy: what any store gives back. */
export function jsonCopy<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/**
 * Starts the real agent machine and returns its persisted snapshot (waiting on its first model turn) and the
 * journal entries it emitted, as LiveTask would save them.
 */
export function startedTask(input: AgentInput): {
  snapshot: PersistedAgentSnapshot;
  audit: unknown[];
  transcript: unknown[];
} {
  const model = fromPromise(() => new Promise<never>(() => {}));
  const actor = createActor(agentMachine.provide({ actors: { model } as never }), { input });
  const audit: unknown[] = [];
  const transcript: unknown[] = [];
  actor.on('audit', (event) => audit.push(event.entry));
  actor.on('transcript', (event) => transcript.push(event.entry));
  actor.start();
  const snapshot = jsonCopy(actor.getPersistedSnapshot()) as unknown as PersistedAgentSnapshot;
  actor.stop();
  return { snapshot, audit: jsonCopy(audit), transcript: jsonCopy(transcript) };
}

/** A stop code each final status can end with. */
const STOP_CODE: Record<FinalStatus, StopCode> = {
  done: 'goal_met',
  answered: 'answered_without_criterion',
  failed: 'goal_not_met',
  budget_exhausted: 'budget_exhausted',
  cancelled: 'cancelled',
};

const FINAL_STATE_NODES: Record<FinalStatus, string> = {
  done: 'done',
  answered: 'answered',
  failed: 'failed',
  budget_exhausted: 'budgetExhausted',
  cancelled: 'cancelled',
};

function modelChild(taskId: string, turn: number) {
  return {
    snapshot: { status: 'active', input: { taskId, turn, observations: [], retryAllowance: 4 } },
    src: 'model',
    syncSnapshot: false,
  };
}

/** A copy of `snapshot` moved into the machine state that `summarize` reports as `state`. */
export function snapshotIn(
  snapshot: PersistedAgentSnapshot,
  state: TaskState,
  options: { at?: number; wakeAt?: number } = {},
): PersistedAgentSnapshot {
  const next = jsonCopy(snapshot);
  const { context } = next;
  const at = options.at ?? context.startedAt;
  if (state === 'running') {
    if (next.value === 'thinking') return next;
    // Back to a model turn in flight, as the machine persists it.
    Object.assign(next, {
      status: 'active',
      value: 'thinking',
      children: { model: modelChild(context.taskId, context.turn) },
    });
    Object.assign(context, {
      batch: null,
      pendingConfirmation: null,
      question: null,
      waitingSince: null,
      outcome: null,
    });
    return next;
  }
  next.children = {};
  if (state === 'waiting_for_confirmation') {
    const callId = 'call_1';
    const args = { roomId: 'R-4.12', start: '2024-05-10T10:00' };
    next.value = { executing: 'awaitingConfirmation' };
    context.batch = bookRoomBatch(context.turn, {
      confirmation: {
        approverScope: null,
        approvals: 1,
        onReject: 'replan',
        onExpiry: 'ask_again',
        reasons: ['tool_rule'],
        risk: 'writable',
      },
      confirmationSummary: 'Book R-4.12 on Friday 10:00',
      confirmationRequests: 1,
      phase: 'awaitingConfirmation',
    });
    context.pendingConfirmation = {
      id: 'conf_1',
      taskId: context.taskId,
      callId,
      tool: 'book_room',
      argsHash: 'sha256:abc',
      args,
      summary: 'Book R-4.12 on Friday 10:00',
      userId: context.principal.userId,
      approverScope: null,
      approvalsRequired: 1,
      approvals: [],
      reasons: ['tool_rule'],
      risk: 'writable',
      policyVersion: context.policy.version,
      requestedAt: at,
      expiresAt: options.wakeAt ?? at + context.policy.confirmationTtlMs,
      request: 1,
    };
    context.waitingSince = at;
  } else if (state === 'waiting_for_user') {
    next.value = 'awaitingUser';
    context.question = 'Which building?';
    context.questionExpiresAt = options.wakeAt ?? at + context.policy.answerTtlMs;
    context.waitingSince = at;
  } else if (state === 'waiting_for_model') {
    next.value = 'waitingForModel';
    context.outage = {
      since: at,
      attempts: 1,
      wakeAt: options.wakeAt ?? at + context.policy.modelWakeMs.first,
      lastError: 'connection refused',
    };
    context.waitingSince = at;
  } else if (state === 'paused') {
    // The user went away after the last batch: the task rests before its next model turn.
    next.value = 'paused';
    context.away = { since: at, expiresAt: options.wakeAt ?? at + context.policy.awayTtlMs };
    context.waitingSince = at;
  } else if (state === 'waiting_for_subtask') {
    // A sub-task tool's call started a child task: the parent rests until the child's outcome comes back.
    next.value = { executing: 'awaitingSubtask' };
    context.batch = bookRoomBatch(context.turn, { phase: 'awaitingSubtask', writeAttempts: 1 });
    const share = { modelTurns: 2, toolCalls: 2, writes: 1, retries: 0, tokens: 2000, costMicros: 0, money: 0 };
    context.subtasks = [
      {
        callId: 'call_1',
        tool: 'book_room',
        childTaskId: `sub_${context.taskId}`,
        goal: 'book the room',
        tools: ['book_room'],
        mandate: null,
        success: null,
        share,
        deadlineAt: context.budget.deadlineAt,
        status: 'running',
        startedAt: at,
        outcome: null,
      },
    ];
  } else if (state === 'review_required') {
    const callId = 'call_1';
    next.value = 'reviewRequired';
    context.batch = bookRoomBatch(context.turn, { phase: 'awaitingReview', writeAttempts: 1, lookups: 3 });
    context.review = {
      callId,
      tool: 'book_room',
      idempotencyKey: 'idem_abc',
      reason: 'write_outcome_unknown',
      summary: 'lookups timed out',
      since: at,
    };
    context.waitingSince = at;
  } else {
    const final = state as FinalStatus;
    next.status = 'done';
    next.value = FINAL_STATE_NODES[final];
    context.outcome = {
      status: final,
      reason: { code: STOP_CODE[final], message: `The task ended: ${state}.` },
      answer: state === 'done' ? 'Booked R-4.12.' : null,
      evidence: [],
    };
  }
  return next;
}

/** An envelope for `snapshot` at `revision`, with its summary derived as the runtime derives it. */
export function envelopeOf(
  snapshot: PersistedAgentSnapshot,
  meta: { revision: number; createdAt: number; updatedAt: number; journal: { audit: number; transcript: number } },
): TaskEnvelope {
  const { revision, createdAt, updatedAt, journal } = meta;
  return jsonCopy({
    schemaVersion: ENVELOPE_SCHEMA_VERSION,
    machineVersion: AGENT_MACHINE_VERSION,
    taskId: snapshot.context.taskId,
    revision,
    createdAt,
    updatedAt,
    summary: summarize(snapshot, tagsAt(agentMachine.root, snapshot.value), { revision, createdAt, updatedAt }),
    journal,
    snapshot,
  });
}

export interface CreateOptions {
  state?: TaskState;
  /** Defaults to T0. */
  createdAt?: number;
  /** Defaults to createdAt. */
  updatedAt?: number;
  /** The confirmation expiry, for waiting_for_confirmation. */
  wakeAt?: number;
  input?: Partial<AgentInput>;
}

/** The request that creates `taskId` at revision 1, with the journal entries the machine emitted on start. */
export function createRequest(taskId: string, options: CreateOptions = {}): SaveRequest {
  const createdAt = options.createdAt ?? T0;
  const started = startedTask(taskInput(taskId, { startedAt: createdAt, ...options.input }));
  const snapshot = snapshotIn(started.snapshot, options.state ?? 'running', { at: createdAt, wakeAt: options.wakeAt });
  const envelope = envelopeOf(snapshot, {
    revision: 1,
    createdAt,
    updatedAt: options.updatedAt ?? createdAt,
    journal: { audit: started.audit.length, transcript: started.transcript.length },
  });
  return { envelope, expectedRevision: 0, append: { audit: started.audit, transcript: started.transcript } };
}

export interface NextOptions {
  state?: TaskState;
  /** Defaults to the previous updatedAt + 1000. */
  updatedAt?: number;
  wakeAt?: number;
  audit?: unknown[];
  transcript?: unknown[];
}

/** The request that saves the revision after `previous`, appending the given entries. */
export function nextRequest(previous: TaskEnvelope, options: NextOptions = {}): SaveRequest {
  const audit = options.audit ?? [];
  const transcript = options.transcript ?? [];
  const updatedAt = options.updatedAt ?? previous.updatedAt + 1000;
  const snapshot = jsonCopy(previous.snapshot);
  snapshot.context.turn += 1;
  const moved = options.state
    ? snapshotIn(snapshot, options.state, { at: updatedAt, wakeAt: options.wakeAt })
    : snapshot;
  const envelope = envelopeOf(moved, {
    revision: previous.revision + 1,
    createdAt: previous.createdAt,
    updatedAt,
    journal: {
      audit: previous.journal.audit + audit.length,
      transcript: previous.journal.transcript + transcript.length,
    },
  });
  return { envelope, expectedRevision: previous.revision, append: { audit, transcript } };
}

/** A small audit-like entry with a marker, to check order. */
export function marker(n: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { kind: 'test_marker', n, ...extra };
}

/** A batch of one book_room write (call_1), with the fields a waiting state sets. */
function bookRoomBatch(turn: number, patch: Partial<CallState>): NonNullable<AgentContext['batch']> {
  const args = { roomId: 'R-4.12', start: '2024-05-10T10:00' };
  const call: CallState = {
    callId: 'call_1',
    tool: 'book_room',
    effect: 'write',
    args,
    argsHash: 'sha256:abc',
    redactedArgs: args,
    idempotencyKey: 'idem_abc',
    confirmation: null,
    confirmationSummary: null,
    confirmedBy: null,
    confirmationRequests: 0,
    phase: 'writing',
    writeAttempts: 0,
    lookups: 0,
    observation: null,
    runAs: null,
    resendAfter: null,
    ...patch,
  };
  return { turn, closed: false, current: call.callId, calls: [call] };
}
