/**
 * Time travel over a task's audit journal: a pure fold that reconstructs what the task looked like after its
 * first N entries, without running the machine, the tools or the store. The state is read off the entries the
 * chart's steps emit (model_requested → thinking, a gate decision or check → the vetting state that makes it,
 * tool_started read/write → reading/writing, an unknown write outcome → reconciling, a confirmation request →
 * awaitingConfirmation, a question → awaitingUser, task_stopped → its final state), passing through the transient
 * states the chart requires (deciding before every model turn, vetting.choosing between calls,
 * executing.selecting between steps of a batch). The status comes from the tags the chart gives that state.
 *
 * What the journal does not hold is not invented: the question's text and the confirmation's summary live in the
 * transcript and the snapshot, and retries spent by model transport retries are not audited (tool retries are).
 */
import { agentMachine } from '../../machines/agentMachine.js';
import type { BudgetCounters, BudgetLimits, FinalStatus, GateName, Json, ModelReservation, StopReason } from '../../machines/context.js';
import { WRITE_OUTCOME_UNKNOWN } from '../../machines/failures.js';
import type { AuditEntry } from '../../machines/journal.js';
import { type TaskState, tagsAt, taskStateOf } from '../../machines/tags.js';

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
  kind: 'gate' | 'check' | 'confirmation' | 'tool' | 'lookup' | 'stop' | 'cancel' | 'user';
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

const FINAL_STATE: Record<FinalStatus, string> = {
  done: 'done',
  failed: 'failed',
  budget_exhausted: 'budgetExhausted',
  cancelled: 'cancelled',
  review_required: 'reviewRequired',
};

export const EMPTY_REPLAY: ReplayedTask = Object.freeze({
  step: 0,
  state: null,
  status: 'running',
  turn: 0,
  visited: [],
  transitions: [],
  budget: { limits: null, used: { modelTurns: 0, toolCalls: 0, writes: 0, retries: 0, tokens: 0, costMicros: 0 } },
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

/** Applies `entry` to `task` (a fresh copy owned by the fold). */
function apply(task: ReplayedTask, entry: AuditEntry, seq: number, previous: AuditEntry | null): void {
  const used = task.budget.used;
  const enter = (state: string, reenter = false) => {
    if (task.state === state && !reenter) return;
    if (task.state !== null) task.transitions.push({ from: task.state, to: state, seq });
    task.visited.push(state);
    task.state = state;
  };
  const inVetting = () => task.state?.startsWith('vetting.') === true;
  const inExecuting = () => task.state?.startsWith('executing.') === true;
  /** Into a substate of `vetting`: each call starts from `choosing`. */
  const enterVetting = (sub: string) => {
    if (!inVetting()) enter('vetting.choosing');
    enter(`vetting.${sub}`);
  };
  /**
   * Into a substate of `executing`. Every step of a batch is chosen in `selecting` (also the state entered from
   * outside, after vetting), except a same-key retry, which goes from `reconciling` straight back to `writing`.
   */
  const enterExecuting = (sub: string) => {
    const target = `executing.${sub}`;
    if (task.state === target) return;
    if (inVetting()) enter('vetting.choosing');
    const direct = task.state === 'executing.selecting' || (task.state === 'executing.reconciling' && sub === 'writing');
    if (!direct) enter('executing.selecting');
    enter(target);
  };
  const decide = (d: Omit<ReplayedDecision, 'seq' | 'turn' | 'at'>) => task.decisions.push({ seq, turn: entry.turn, at: entry.at, ...d });
  const call = (callId: string, tool: string): ReplayedCall => {
    let found = task.lastResults.find((c) => c.callId === callId);
    if (!found) {
      found = { callId, tool, effect: null, args: null, argsHash: null, idempotencyKey: null, result: null, gate: null, attempts: 0, durationMs: null };
      task.lastResults.push(found);
    }
    return found;
  };

  switch (entry.kind) {
    case 'task_started':
      task.budget.limits = entry.limits;
      enter('deciding');
      break;
    case 'model_requested':
      // A closed batch leaves `executing` from `selecting`; vetting always hands over to `executing`.
      if (inExecuting() || inVetting()) enterExecuting('selecting');
      enter('deciding');
      enter('thinking');
      task.waitingForAnswer = false;
      task.turnReservation = entry.reservation;
      used.modelTurns += 1;
      used.tokens += entry.reservation.tokens;
      used.costMicros += entry.reservation.costMicros;
      break;
    case 'model_output': {
      const reservation = task.turnReservation ?? { tokens: 0, costMicros: 0 };
      used.tokens += entry.usage.inputTokens + entry.usage.outputTokens - reservation.tokens;
      used.costMicros += entry.usage.costMicros - reservation.costMicros;
      task.turnReservation = null;
      if (entry.output === 'model.toolsProposed') task.lastResults = [];
      if (entry.output === 'model.askedUser') {
        task.waitingForAnswer = true;
        enter('awaitingUser');
      }
      if (entry.output === 'model.invalidOutput') enter('reasking');
      break;
    }
    case 'gate':
      decide({ kind: 'gate', name: entry.gate, decision: entry.decision, code: entry.code, summary: entry.summary, tool: entry.tool, callId: entry.callId });
      if (entry.gate === 'protocol' && entry.decision === 'pass') enter('vetting.choosing');
      else if (entry.gate === 'protocol' && entry.decision === 'reject') {
        // The whole batch was refused before vetting: every call gets its rejection, then the batch closes.
        if (task.state === 'thinking') enterExecuting('selecting');
      } else if (entry.gate === 'schema') {
        enterVetting('checkingSchema');
        if (entry.decision === 'reject') enter('vetting.choosing');
      } else if (entry.gate === 'business') {
        enter(entry.decision === 'pass' ? 'vetting.checkingPermission' : 'vetting.choosing');
      } else if (entry.gate === 'permission') {
        if (task.state === 'vetting.checkingSchema') enter('vetting.checkingPermission');
        enter('vetting.choosing');
      } else if (entry.gate === 'loop' && entry.decision === 'reject') {
        // A write whose intent already succeeded: refused in `selecting`, which then chooses again.
        enterExecuting('selecting');
        enter('executing.selecting', true);
      }
      if (entry.callId !== null && entry.gate !== 'budget' && entry.gate !== 'confirmation') {
        const c = call(entry.callId, entry.tool ?? '');
        c.argsHash ??= entry.argsHash;
        if (entry.decision === 'reject') Object.assign(c, { result: entry.code, gate: entry.gate });
      }
      break;
    case 'check_started':
      decide({ kind: 'check', name: entry.gate, decision: 'asked', code: null, summary: null, tool: entry.tool, callId: entry.callId });
      enterVetting(entry.gate === 'business' ? 'validating' : 'authorizing');
      break;
    case 'tool_started': {
      const c = call(entry.callId, entry.tool);
      Object.assign(c, { effect: entry.effect, args: entry.args, argsHash: entry.argsHash, idempotencyKey: entry.idempotencyKey, result: null });
      c.attempts = entry.attempt;
      decide({ kind: 'tool', name: `${entry.effect} started`, decision: entry.attempt > 1 ? `attempt ${entry.attempt}` : 'started', code: null, summary: null, tool: entry.tool, callId: entry.callId });
      if (entry.effect === 'read') {
        enterExecuting('reading');
        used.toolCalls += 1;
      } else if (entry.attempt > 1) {
        enterExecuting('writing');
        used.retries += 1;
      } else {
        enterExecuting('writing');
        used.toolCalls += 1;
        used.writes += 1;
        task.pendingConfirmation = null;
      }
      break;
    }
    case 'tool_finished': {
      const c = call(entry.callId, entry.tool);
      c.result = entry.code;
      c.durationMs = entry.durationMs;
      c.attempts = entry.attempts;
      decide({ kind: 'tool', name: 'finished', decision: entry.code, code: entry.code === 'ok' ? null : entry.code, summary: null, tool: entry.tool, callId: entry.callId });
      if (c.effect === 'write') {
        enter(WRITE_OUTCOME_UNKNOWN.has(entry.code) ? 'executing.reconciling' : 'executing.selecting');
      } else {
        // Read retries happen inside the read executor: attempts beyond the first are the retries it spent.
        used.retries += Math.max(0, entry.attempts - 1);
        if (task.lastResults.every((r) => r.effect !== 'read' || r.result !== null)) enter('executing.selecting');
      }
      break;
    }
    case 'write_lookup': {
      const c = call(entry.callId, entry.tool);
      decide({ kind: 'lookup', name: 'lookup', decision: entry.result, code: null, summary: null, tool: entry.tool, callId: entry.callId });
      if (entry.result === 'found') {
        c.result = 'ok';
        enter('executing.selecting');
      } else if (entry.result === 'inconclusive') {
        // Looked up again (a retry), unless the task stops right after: undone at task_stopped.
        used.retries += 1;
        enter('executing.reconciling', true);
      }
      break;
    }
    case 'confirmation': {
      decide({ kind: 'confirmation', name: entry.action, decision: entry.action, code: entry.code, summary: null, tool: entry.tool, callId: entry.callId });
      if (entry.action === 'requested') {
        task.pendingConfirmation = {
          id: entry.confirmationId,
          callId: entry.callId,
          tool: entry.tool,
          argsHash: entry.argsHash,
          requestedAt: entry.at,
          expiresAt: entry.expiresAt,
          request: (task.pendingConfirmation?.callId === entry.callId ? task.pendingConfirmation.request : 0) + 1,
        };
        enterExecuting('awaitingConfirmation');
      } else if (entry.action === 'granted') {
        task.pendingConfirmation = null;
        enter('executing.selecting');
      } else if (entry.action === 'rejected') {
        task.pendingConfirmation = null;
        Object.assign(call(entry.callId, entry.tool), { result: entry.code ?? 'confirmation_rejected', gate: 'confirmation' });
        enter('executing.selecting');
      }
      // refused: the request stands; expired: asked again (a `requested` follows) or given up (the batch goes on).
      break;
    }
    case 'user_answered':
      decide({ kind: 'user', name: 'answered', decision: 'answered', code: null, summary: null, tool: null, callId: null });
      task.waitingForAnswer = false;
      enter('deciding');
      break;
    case 'cancel_requested':
      decide({ kind: 'cancel', name: 'cancel', decision: entry.deferred ? 'deferred' : 'requested', code: null, summary: entry.reason || null, tool: null, callId: null });
      task.cancelRequested = { by: entry.by, reason: entry.reason };
      break;
    case 'task_stopped':
      if (previous?.kind === 'write_lookup' && previous.result === 'inconclusive') used.retries -= 1;
      // From vetting: a loop is found in `choosing`; a cancel or a failed check leaves the state it happened in;
      // every other stop of a batch is decided in `executing.selecting`.
      if (inVetting() && entry.reason.code === 'loop_detected') enter('vetting.choosing');
      else if (inVetting() && entry.reason.code !== 'cancelled' && entry.reason.code !== 'internal_error') enterExecuting('selecting');
      decide({ kind: 'stop', name: entry.status, decision: entry.status, code: entry.reason.code, summary: entry.reason.message, tool: null, callId: null });
      task.outcome = { status: entry.status, reason: entry.reason };
      task.pendingConfirmation = null;
      task.waitingForAnswer = false;
      enter(FINAL_STATE[entry.status]);
      break;
  }
}

function statusOf(state: string | null, outcome: ReplayedTask['outcome']): ReplayStatus {
  if (state === null) return 'running';
  const value = state.split('.').reduceRight<unknown>((inner, key) => (inner === null ? key : { [key]: inner }), null);
  return taskStateOf(tagsAt(agentMachine.root, value), outcome?.status ?? null);
}
