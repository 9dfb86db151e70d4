/**
 * The fold's one step: how an audit entry moves the replayed task (its state, budgets, pending confirmation, results
 * and decisions). The state is read off the entries the chart's steps emit, passing through the transient states the
 * chart requires; see `replayAudit.ts`. How a task pauses and ends is in `replayEndings.ts`.
 */
import { WRITE_OUTCOME_UNKNOWN } from '../../machines/failures.js';
import type { AuditEntry } from '../../machines/journal.js';
import { ENDING_KINDS, applyEnding } from './replayEndings.js';
import { foldMoves } from './replayFoldMoves.js';
import { PLAN_TOOL } from '../../machines/plans.js';
import { foldPlan, foldPlanApproval, foldWorkflow, requested } from './replayFoldPlans.js';
import type { ReplayedTask } from './replayedTask.js';
import { foldSubtask } from './replayFoldSubtask.js';

/** Applies `entry` to `task` (a fresh copy owned by the fold). */
export function apply(task: ReplayedTask, entry: AuditEntry, seq: number, previous: AuditEntry | null): void {
  const moves = foldMoves(task, entry, seq, previous);
  if (ENDING_KINDS.has(entry.kind)) {
    applyEnding(task, entry as Parameters<typeof applyEnding>[1], moves);
    return;
  }
  const { used, enter, inVetting, inExecuting, enterVetting, enterExecuting, refusedAtRecheck, decide, call } = moves;
  switch (entry.kind) {
    case 'task_started':
      task.budget.limits = entry.limits;
      task.following = entry.workflow !== undefined;
      enter('deciding');
      break;
    case 'model_requested':
      // A closed batch leaves `executing` from `selecting`; vetting always hands over to `executing`.
      if (inExecuting() || inVetting()) enterExecuting('selecting');
      enter('deciding');
      // A workflow's decision turn starts from `following`.
      if (task.following) enter('following');
      enter('thinking');
      task.waitingForAnswer = false;
      task.turnReservation = entry.reservation;
      task.reservationHeld = true;
      used.modelTurns += 1;
      used.tokens += entry.reservation.tokens;
      used.costMicros += entry.reservation.costMicros;
      break;
    case 'model_output': {
      const reservation = task.turnReservation ?? { tokens: 0, costMicros: 0 };
      used.tokens += entry.usage.inputTokens + entry.usage.outputTokens - reservation.tokens;
      used.costMicros += entry.usage.costMicros - reservation.costMicros;
      task.turnReservation = null;
      task.reservationHeld = false;
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
      if (entry.tool === PLAN_TOOL) {
        foldPlanApproval(task, entry, enter);
        break;
      }
      const previousAction = [...task.decisions]
        .reverse()
        .find((d, i) => i > 0 && d.kind === 'confirmation' && d.callId === entry.callId)?.name;
      if (entry.action === 'requested' && previousAction === 'granted') {
        // Granted before, asked again by the re-check: the tool's rule now wants other decisions.
        enterExecuting('selecting');
        enter('executing.rechecking.arguments');
      }
      if (entry.action === 'requested') {
        task.pendingConfirmation = requested(task, entry);
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
      // Nothing is reserved while the task waits out an outage; the retry reserves the turn again.
      if (entry.action === 'waiting') {
        enter('waitingForModel');
        moves.holdReservation(false);
      } else if (entry.action === 'retrying') {
        enter('thinking');
        moves.holdReservation(true);
      }
      break;
    case 'plan':
      foldPlan(task, entry, moves);
      break;
    case 'workflow':
      foldWorkflow(task, entry, moves);
      break;
    case 'subtask':
      foldSubtask(entry, moves);
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
  }
}
