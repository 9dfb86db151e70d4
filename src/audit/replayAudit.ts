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
import type { AuditEntry } from '../../machines/journal.js';
import { tagsAt, taskStateOf } from '../../machines/tags.js';
import { apply } from './replayFold.js';
import type { ReplayedTask, ReplayStatus } from './replayedTask.js';

export type {
  ReplayedCall,
  ReplayedConfirmation,
  ReplayedDecision,
  ReplayedTask,
  ReplayedTransition,
  ReplayStatus,
} from './replayedTask.js';

export const EMPTY_REPLAY: ReplayedTask = Object.freeze({
  step: 0,
  state: null,
  status: 'running',
  turn: 0,
  visited: [],
  transitions: [],
  budget: {
    limits: null,
    used: { modelTurns: 0, toolCalls: 0, writes: 0, retries: 0, tokens: 0, costMicros: 0, money: 0 },
  },
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
