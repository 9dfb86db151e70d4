/**
 * The fold's one step: how an audit entry moves the replayed task (its state, budgets, pending confirmation, results
 * and decisions). The state is read off the entries the chart's steps emit, passing through the transient states the
 * chart requires; see `replayAudit.ts`.
 */
import type { FinalStatus } from '../../machines/context.js';
import { WRITE_OUTCOME_UNKNOWN } from '../../machines/failures.js';
import type { AuditEntry } from '../../machines/journal.js';
import type { ReplayedCall, ReplayedDecision, ReplayedTask } from './replayedTask.js';

const FINAL_STATE: Record<FinalStatus, string> = {
  done: 'done',
  answered: 'answered',
  failed: 'failed',
  budget_exhausted: 'budgetExhausted',
  cancelled: 'cancelled',
};

/** Applies `entry` to `task` (a fresh copy owned by the fold). */
export function apply(task: ReplayedTask, entry: AuditEntry, seq: number, previous: AuditEntry | null): void {
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
    const direct =
      task.state === 'executing.selecting' || (task.state === 'executing.reconciling' && sub === 'writing');
    if (!direct) enter('executing.selecting');
    enter(target);
  };
  /** A refusal by the re-check of a write's arguments (`rechecking.arguments`, entered from `selecting`). */
  const refusedAtRecheck = () => {
    if (task.state !== 'executing.rechecking.hooks' && task.state !== 'executing.resending') {
      enterExecuting('selecting');
      enter('executing.rechecking.arguments');
    }
    enter('executing.selecting');
  };
  /**
   * Where a stop was decided. From vetting: a loop is found in `choosing`; a denied call proposed again in
   * `checkingMandate`; a cancel or a failed check leaves the state it happened in; every other stop of a batch is
   * decided in `selecting`.
   */
  const stoppedAt = (code: string) => {
    if (previous?.kind === 'write_lookup' && previous.result === 'inconclusive') used.retries -= 1;
    if (inVetting() && code === 'loop_detected') enter('vetting.choosing');
    else if (inVetting() && (code === 'permission_denied' || code === 'outside_mandate'))
      enter('vetting.checkingMandate');
    else if (inVetting() && code !== 'cancelled' && code !== 'internal_error') enterExecuting('selecting');
  };
  const decide = (d: Omit<ReplayedDecision, 'seq' | 'turn' | 'at'>) =>
    task.decisions.push({ seq, turn: entry.turn, at: entry.at, ...d });
  const call = (callId: string, tool: string): ReplayedCall => {
    let found = task.lastResults.find((c) => c.callId === callId);
    if (!found) {
      found = {
        callId,
        tool,
        effect: null,
        args: null,
        argsHash: null,
        idempotencyKey: null,
        result: null,
        gate: null,
        attempts: 0,
        durationMs: null,
      };
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
      decide({
        kind: 'gate',
        name: entry.gate,
        decision: entry.decision,
        code: entry.code,
        summary: entry.summary,
        tool: entry.tool,
        callId: entry.callId,
      });
      if (entry.gate === 'protocol' && entry.decision === 'pass') enter('vetting.choosing');
      else if (entry.gate === 'protocol' && entry.decision === 'reject') {
        // The whole batch was refused before vetting: every call gets its rejection, then the batch closes.
        if (task.state === 'thinking') enterExecuting('selecting');
      } else if (inExecuting() && entry.decision === 'reject' && entry.gate !== 'loop') {
        // Before a write: refused by the re-check of its arguments, or of its hooks.
        refusedAtRecheck();
      } else if (entry.gate === 'schema') {
        enterVetting('checkingSchema');
        enter(entry.decision === 'reject' ? 'vetting.choosing' : 'vetting.checkingMandate');
      } else if (entry.gate === 'mandate' || (entry.gate === 'permission' && entry.decision === 'stop')) {
        // A mandate refusal goes back to `choosing`; a denied call proposed again stops the task from here.
        enterVetting('checkingMandate');
        if (entry.decision === 'reject') enter('vetting.choosing');
      } else if (entry.gate === 'business') {
        enter(entry.decision === 'pass' ? 'vetting.checkingPermission' : 'vetting.choosing');
      } else if (entry.gate === 'permission') {
        if (task.state === 'vetting.checkingSchema' || task.state === 'vetting.checkingMandate')
          enter('vetting.checkingPermission');
        enter('vetting.choosing');
      } else if (entry.gate === 'loop' && entry.decision === 'reject') {
        // A write whose intent already succeeded: refused in `selecting`, which then chooses again.
        enterExecuting('selecting');
        enter('executing.selecting', true);
      }
      if (
        entry.callId !== null &&
        entry.gate !== 'budget' &&
        (entry.gate !== 'confirmation' || entry.decision === 'reject')
      ) {
        const c = call(entry.callId, entry.tool ?? '');
        c.argsHash ??= entry.argsHash;
        if (entry.decision === 'reject') Object.assign(c, { result: entry.code, gate: entry.gate });
      }
      break;
    case 'check_started':
      decide({
        kind: 'check',
        name: entry.gate,
        decision: 'asked',
        code: null,
        summary: null,
        tool: entry.tool,
        callId: entry.callId,
      });
      if (entry.gate === 'recheck' && (task.state === 'executing.reconciling' || task.state === 'reviewRequired')) {
        // A write about to be sent again with its key: after a lookup found nothing, or as a reviewer asked.
        enter('executing.resending');
      } else if (entry.gate === 'recheck') {
        enterExecuting('selecting');
        enter('executing.rechecking.arguments');
        enter('executing.rechecking.hooks');
      } else enterVetting(entry.gate === 'business' ? 'validating' : 'authorizing');
      break;
    case 'tool_started': {
      const c = call(entry.callId, entry.tool);
      Object.assign(c, {
        effect: entry.effect,
        args: entry.args,
        argsHash: entry.argsHash,
        idempotencyKey: entry.idempotencyKey,
        result: null,
      });
      c.attempts = entry.attempt;
      decide({
        kind: 'tool',
        name: `${entry.effect} started`,
        decision: entry.attempt > 1 ? `attempt ${entry.attempt}` : 'started',
        code: null,
        summary: null,
        tool: entry.tool,
        callId: entry.callId,
      });
      if (entry.effect === 'read') {
        enterExecuting('reading');
        used.toolCalls += 1;
      } else if (entry.attempt > 1) {
        // A same-key retry, once its re-check passed (after a lookup found nothing, or as a reviewer asked).
        if (task.state === 'executing.resending') enter('executing.writing');
        else enterExecuting('writing');
        used.retries += 1;
      } else {
        if (task.state === 'executing.rechecking.hooks') enter('executing.writing');
        else enterExecuting('writing');
        used.toolCalls += 1;
        used.writes += 1;
        used.money += entry.money ?? 0;
        task.pendingConfirmation = null;
      }
      break;
    }
    case 'tool_finished': {
      const c = call(entry.callId, entry.tool);
      c.result = entry.code;
      c.durationMs = entry.durationMs;
      c.attempts = entry.attempts;
      decide({
        kind: 'tool',
        name: 'finished',
        decision: entry.code,
        code: entry.code === 'ok' ? null : entry.code,
        summary: null,
        tool: entry.tool,
        callId: entry.callId,
      });
      if (c.effect === 'write') {
        // A write the tool found inconsistent is held for review (the `review` entry that follows).
        if (entry.code !== 'needs_review')
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
      decide({
        kind: 'lookup',
        name: 'lookup',
        decision: entry.result,
        code: null,
        summary: null,
        tool: entry.tool,
        callId: entry.callId,
      });
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
      decide({
        kind: 'confirmation',
        name: entry.action,
        decision: entry.action,
        code: entry.code,
        summary: null,
        tool: entry.tool,
        callId: entry.callId,
      });
      // Recorded after the stop when the tool's policy cancels the task on it.
      if (task.outcome) break;
      const previousAction = [...task.decisions]
        .reverse()
        .find((d, i) => i > 0 && d.kind === 'confirmation' && d.callId === entry.callId)?.name;
      if (entry.action === 'requested' && previousAction === 'granted') {
        // Granted before, asked again by the re-check: the tool's rule now wants other decisions.
        enterExecuting('selecting');
        enter('executing.rechecking.arguments');
      }
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
        Object.assign(call(entry.callId, entry.tool), {
          result: entry.code ?? 'confirmation_rejected',
          gate: 'confirmation',
        });
        enter('executing.selecting');
      }
      // refused: the request stands; expired: asked again (a `requested` follows) or given up (the batch goes on).
      break;
    }
    case 'user_answered':
      decide({
        kind: 'user',
        name: 'answered',
        decision: 'answered',
        code: null,
        summary: null,
        tool: null,
        callId: null,
      });
      task.waitingForAnswer = false;
      enter('deciding');
      break;
    case 'cancel_requested':
      decide({
        kind: 'cancel',
        name: 'cancel',
        decision: entry.deferred ? 'deferred' : 'requested',
        code: null,
        summary: entry.reason || null,
        tool: null,
        callId: null,
      });
      task.cancelRequested = { by: entry.by, reason: entry.reason };
      break;
    case 'review':
      decide({
        kind: 'review',
        name: entry.action,
        decision: entry.code,
        code: entry.code,
        summary: entry.summary,
        tool: entry.tool,
        callId: entry.callId,
      });
      if (entry.action === 'held') {
        // Held after an inconclusive last lookup: that lookup was not followed by another.
        if (previous?.kind === 'write_lookup' && previous.result === 'inconclusive') used.retries -= 1;
        enter('reviewRequired');
      } else if (entry.action === 'resolved' && entry.code !== 'retry') {
        call(entry.callId, entry.tool).result = entry.code === 'happened' ? 'ok' : 'not_executed';
        enter('executing.selecting');
      }
      break;
    case 'model_outage':
      decide({
        kind: 'outage',
        name: entry.action,
        decision: entry.action,
        code: null,
        summary: entry.error,
        tool: null,
        callId: null,
      });
      if (entry.action === 'waiting') enter('waitingForModel');
      else if (entry.action === 'retrying') enter('thinking');
      break;
    case 'question_expired':
      decide({
        kind: 'user',
        name: 'no answer',
        decision: 'expired',
        code: null,
        summary: entry.question,
        tool: null,
        callId: null,
      });
      task.waitingForAnswer = false;
      enter('deciding');
      break;
    case 'presence':
      if (entry.action === 'paused') {
        // Before a write of an open batch, or before the next model turn once the batch is done.
        const open = task.lastResults.some((r) => r.result === null);
        if (open && inExecuting()) enterExecuting('pausedBeforeWrite');
        else {
          enter('deciding');
          enter('paused');
        }
      }
      if (entry.action === 'resumed')
        enter(task.state === 'executing.pausedBeforeWrite' ? 'executing.selecting' : 'deciding');
      decide({
        kind: 'user',
        name: `user ${entry.action}`,
        decision: entry.action,
        code: null,
        summary: null,
        tool: null,
        callId: null,
      });
      break;
    case 'compensation_started':
      stoppedAt(entry.reason.code);
      decide({
        kind: 'compensation',
        name: 'started',
        decision: entry.status,
        code: entry.reason.code,
        summary: `${entry.reason.message}; undoing ${entry.compensations.length} write(s) first`,
        tool: null,
        callId: null,
      });
      enter('stopping');
      // The compensating calls are vetted and run like a batch of proposals.
      task.lastResults = [];
      enter('vetting.choosing');
      break;
    case 'compensation_finished':
      enterExecuting('selecting');
      for (const c of entry.compensations) {
        decide({
          kind: 'compensation',
          name: c.result,
          decision: c.result,
          code: c.code,
          summary: c.summary,
          tool: c.undoTool,
          callId: c.callId,
        });
      }
      break;
    case 'task_stopped':
      stoppedAt(entry.reason.code);
      decide({
        kind: 'stop',
        name: entry.status,
        decision: entry.status,
        code: entry.reason.code,
        summary: entry.reason.message,
        tool: null,
        callId: null,
      });
      task.outcome = { status: entry.status, reason: entry.reason };
      task.pendingConfirmation = null;
      task.waitingForAnswer = false;
      // Every stop but a met goal or an answer passes through `stopping` (where compensations would start).
      if (entry.status !== 'done' && entry.status !== 'answered') enter('stopping');
      enter(FINAL_STATE[entry.status]);
      break;
  }
}
