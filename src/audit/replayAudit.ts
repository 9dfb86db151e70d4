/**
 * Time travel over a task's audit journal: a pure fold that reconstructs what the task looked like after its first
 * N entries, without running the machine, the tools or the store. The state is what the runtime recorded: each entry
 * carries the chart's transitions it saw (`moves`, numbered in the chart's own definition, `chartMoves.ts`), so the
 * fold reads the state the actor was in, the transitions it took, their events and guards, from the chart itself.
 * The budgets, decisions, calls and pending confirmation are folded from what the entries say (`replayFold.ts`). The
 * status comes from the tags the chart gives the state.
 *
 * Entries written before transitions were recorded carry none: their state is unknown (null, `recorded: false`),
 * and the journal's last step takes the task's current state when the caller gives it (`current`).
 *
 * What the journal does not hold is not invented: the question's text and the confirmation's summary live in the
 * transcript and the snapshot, and retries spent by model transport retries are not audited (tool retries are).
 */
import { agentMachine } from '../../machines/agentMachine.js';
import type { AuditEntry } from '../../machines/journal.js';
import { TAGS, tagsAt, taskStateOf } from '../../machines/tags.js';
import { pastChart } from './chartHistory.js';
import { type ChartMoves, chartMoves, readMoves } from './chartMoves.js';
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
  recorded: false,
  chart: null,
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
 * The task after its first `upTo` audit entries (default: all of them). `current`: the task's state now (its
 * snapshot's `stateValue`), taken for the journal's last step when the journal does not record it (a task stored
 * before transitions were recorded).
 *
 * @example
 * const at3 = replayAudit(await orchestrator.audit(taskId), 3);
 * console.log(at3.state, at3.budget.used.modelTurns);
 */
export function replayAudit(entries: readonly AuditEntry[], upTo = entries.length, current?: string): ReplayedTask {
  const n = Math.max(0, Math.min(upTo, entries.length));
  let task = EMPTY_REPLAY;
  for (let seq = 0; seq < n; seq++) task = foldAuditEntry(task, entries[seq]!, seq);
  return n === entries.length && n > 0 && current !== undefined ? atCurrentState(task, current) : task;
}

/**
 * `task` at the end of a journal that does not record its state (written before transitions were recorded), put in
 * `current`: the task's state now, the only one known. A task whose state is recorded is returned as it is.
 */
export function atCurrentState(task: ReplayedTask, current: string): ReplayedTask {
  if (task.state !== null) return task;
  return {
    ...task,
    state: current,
    visited: [...task.visited, current],
    status: statusOf(current, task.outcome),
  };
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
  applyMoves(next, entry, seq);
  next.status = statusOf(next.state, next.outcome);
  return next;
}

let agentChart: ChartMoves | null = null;

/** The state after the transitions `entry` recorded (see the module's doc). */
function applyMoves(task: ReplayedTask, entry: AuditEntry, seq: number): void {
  const read = entry.moves === undefined ? null : readMoves(entry.moves);
  if (read?.chart) task.chart = read.chart;
  agentChart ??= chartMoves(agentMachine);
  // Recorded by this chart, or by an earlier one whose table a release kept (`chartHistory.ts`).
  const chart = task.chart === agentChart.fingerprint ? agentChart : task.chart === null ? null : pastChart(task.chart);
  if (!read || !chart) {
    // Not recorded (an older entry), or recorded by a chart with no table here: no numbering to read it with.
    task.state = null;
    task.recorded = false;
    return;
  }
  if (entry.kind === 'task_started') {
    task.state = chart.initial;
    task.visited.push(chart.initial);
  }
  for (const index of read.indexes) {
    const move = chart.moves[index];
    if (!move) {
      task.state = null;
      task.recorded = false;
      return;
    }
    // A targetless transition runs actions and leaves the state as it is.
    if (move.target === null) continue;
    if (task.state !== null) {
      task.transitions.push({
        from: task.state,
        to: move.target,
        seq,
        event: move.event,
        guard: move.guard,
        edge: chart === agentChart ? index + 1 : null,
      });
    }
    task.visited.push(move.target);
    task.state = move.target;
  }
  task.recorded = task.state !== null;
}

function statusOf(state: string | null, outcome: ReplayedTask['outcome']): ReplayStatus {
  if (state === null) return outcome?.status ?? 'running';
  const value = state.split('.').reduceRight<unknown>((inner, key) => (inner === null ? key : { [key]: inner }), null);
  const tags = tagsAt(agentMachine.root, value);
  // A final state before its stop entry (a journal cut or reordered by hand): still running as far as it tells.
  if (tags.has(TAGS.terminal) && !outcome) return 'running';
  return taskStateOf(tags, outcome?.status ?? null);
}
