/**
 * Time travel over a task's audit journal: a pure fold that reconstructs what the task looked like after its
 * first N entries, without running the machine, the tools or the store. The state is read off the entries the
 * chart's steps emit (model_requested → thinking, a gate decision or check → the vetting state that makes it,
 * the re-check before a write → executing.rechecking, tool_started read/write → reading/writing, an unknown write
 * outcome → reconciling, a held write → reviewRequired, a confirmation request → awaitingConfirmation, a question →
 * awaitingUser, an outage → waitingForModel, task_stopped → its final state), passing through the transient states
 * the chart requires (deciding before every model turn, vetting.choosing between calls, executing.selecting between
 * steps of a batch). The status comes from the tags the chart gives that state.
 *
 * What the journal does not hold is not invented: the question's text and the confirmation's summary live in the
 * transcript and the snapshot, and retries spent by model transport retries are not audited (tool retries are).
 */
import { agentMachine } from '../../machines/agentMachine.js';
import type { BudgetCounters, BudgetLimits, FinalStatus, GateName, Json, ModelReservation, StopReason } from '../../machines/context.js';
import type { AuditEntry } from '../../machines/journal.js';
import { type TaskState, tagsAt, taskStateOf } from '../../machines/tags.js';
import { apply } from './replayFold.js';

export type ReplayStatus = TaskState;

/** A tool call of the latest batch, as far as the journal tells. */
export interface ReplayedCall {
  callId: string;
  tool: string;
  effect: 'read' | 'write' | null;
  args: Json | null;
  argsHash: string | null;
  idempotencyKey: string | null;
  /** `ok`, a failure code, a gate's rejection code, or null while it waits or runs. */
  result: string | null;
  /** The gate that rejected it, if one did. */
  gate: GateName | null;
  attempts: number;
  durationMs: number | null;
}

export interface ReplayedConfirmation {
  id: string;
  callId: string;
  tool: string;
  argsHash: string;
  requestedAt: number;
  expiresAt: number | null;
  /** 1 for the first request of this call, 2 after it was asked again, ... */
  request: number;
}

/** One decision of the host, in journal order. */
export interface ReplayedDecision {
  seq: number;
  turn: number;
  at: number;
  /** `check`: a gate asked one of the tool's hooks (its decision follows as a `gate`). */
  kind: 'gate' | 'check' | 'confirmation' | 'tool' | 'lookup' | 'review' | 'outage' | 'stop' | 'cancel' | 'user';
  /** Gate name, confirmation action, tool name... */
  name: string;
  /** pass / reject / stop for gates; ok or a code for tools; found / not_found / inconclusive for lookups. */
  decision: string;
  code: string | null;
  summary: string | null;
  tool: string | null;
  callId: string | null;
}

export interface ReplayedTransition {
  from: string;
  to: string;
  /** The audit entry that showed it (its index in the journal). */
  seq: number;
}

export interface ReplayedTask {
  /** Entries folded so far. */
  step: number;
  /** The machine state as a dotted path (`executing.awaitingConfirmation`); null before `task_started`. */
  state: string | null;
  status: ReplayStatus;
  turn: number;
  /** Every state entered, in order (a state entered twice appears twice). */
  visited: string[];
  transitions: ReplayedTransition[];
  budget: { limits: BudgetLimits | null; used: BudgetCounters };
  pendingConfirmation: ReplayedConfirmation | null;
  /** The calls of the latest batch. */
  lastResults: ReplayedCall[];
  decisions: ReplayedDecision[];
  /** The model asked the user something and no answer came yet (the text is in the transcript). */
  waitingForAnswer: boolean;
  cancelRequested: { by: string; reason: string } | null;
  outcome: { status: FinalStatus; reason: StopReason } | null;
  /** The last entry folded. */
  last: AuditEntry | null;
  /** The reservation of the model turn in progress (settled to the actual usage by its model_output). */
  turnReservation: ModelReservation | null;
}

export const EMPTY_REPLAY: ReplayedTask = Object.freeze({
  step: 0,
  state: null,
  status: 'running',
  turn: 0,
  visited: [],
  transitions: [],
  budget: { limits: null, used: { modelTurns: 0, toolCalls: 0, writes: 0, retries: 0, tokens: 0, costMicros: 0, money: 0 } },
  pendingConfirmation: null,
  lastResults: [],
  decisions: [],
  waitingForAnswer: false,
  cancelRequested: null,
  outcome: null,
  last: null,
  turnReservation: null,
}) as ReplayedTask;

/**
 * The task after its first `upTo` audit entries (default: all of them).
 *
 * @example
 * const at3 = replayAudit(await orchestrator.audit(taskId), 3);
 * console.log(at3.state, at3.budget.used.modelTurns);
 */
export function replayAudit(entries: readonly AuditEntry[], upTo = entries.length): ReplayedTask {
  const n = Math.max(0, Math.min(upTo, entries.length));
  let task = EMPTY_REPLAY;
  for (let seq = 0; seq < n; seq++) task = foldAuditEntry(task, entries[seq]!, seq);
  return task;
}

/** One step of the fold: the task after `entry` (the journal's entry number `seq`). Pure. */
export function foldAuditEntry(task: ReplayedTask, entry: AuditEntry, seq: number): ReplayedTask {
  const next: ReplayedTask = {
    ...task,
    step: task.step + 1,
    turn: Math.max(task.turn, entry.turn),
    visited: [...task.visited],
    transitions: [...task.transitions],
    budget: { limits: task.budget.limits, used: { ...task.budget.used } },
    lastResults: task.lastResults.map((c) => ({ ...c })),
    decisions: [...task.decisions],
    last: entry,
  };
  apply(next, entry, seq, task.last);
  next.status = statusOf(next.state, next.outcome);
  return next;
}

function statusOf(state: string | null, outcome: ReplayedTask['outcome']): ReplayStatus {
  if (state === null) return 'running';
  const value = state.split('.').reduceRight<unknown>((inner, key) => (inner === null ? key : { [key]: inner }), null);
  return taskStateOf(tagsAt(agentMachine.root, value), outcome?.status ?? null);
}
