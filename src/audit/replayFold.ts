/**
 * The fold's one step: what an audit entry says about the replayed task's data (budgets, pending confirmation,
 * results and decisions). Pure data: the state the task was in is read from the transitions the runtime recorded
 * (`replayAudit.ts`), not from here. How a task pauses and ends is in `replayEndings.ts`.
 */
import type { AuditEntry } from '../../machines/journal.js';
import { ENDING_KINDS, applyEnding } from './replayEndings.js';
import { foldHelpers } from './replayFoldHelpers.js';
import { PLAN_TOOL } from '../../machines/plans.js';
import { foldPlan, foldPlanApproval, foldWorkflow, requested } from './replayFoldPlans.js';
import type { ReplayedTask } from './replayedTask.js';
import { foldSubtask } from './replayFoldSubtask.js';

/** Applies `entry` to `task` (a fresh copy owned by the fold). */
export function apply(task: ReplayedTask, entry: AuditEntry, seq: number, previous: AuditEntry | null): void {
  const helpers = foldHelpers(task, entry, seq, previous);
  if (ENDING_KINDS.has(entry.kind)) {
    applyEnding(task, entry as Parameters<typeof applyEnding>[1], helpers);
    return;
  }
  const { used, decide, call } = helpers;
  switch (entry.kind) {
    case 'task_started':
      task.budget.limits = entry.limits;
      break;
    case 'model_requested':
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
      if (entry.output === 'model.askedUser') task.waitingForAnswer = true;
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
        used.toolCalls += 1;
      } else if (entry.attempt > 1) {
        // A same-key retry, once its re-check passed (after a lookup found nothing, or as a reviewer asked).
        used.retries += 1;
      } else {
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
      // Read retries happen inside the read executor: attempts beyond the first are the retries it spent.
      if (c.effect !== 'write') used.retries += Math.max(0, entry.attempts - 1);
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
      if (entry.result === 'found') c.result = 'ok';
      // Looked up again (a retry), unless the task stops or is held right after: undone there.
      else if (entry.result === 'inconclusive') used.retries += 1;
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
        foldPlanApproval(task, entry);
        break;
      }
      if (entry.action === 'requested') {
        task.pendingConfirmation = requested(task, entry);
      } else if (entry.action === 'granted') {
        task.pendingConfirmation = null;
      } else if (entry.action === 'rejected') {
        task.pendingConfirmation = null;
        Object.assign(call(entry.callId, entry.tool), {
          result: entry.code ?? 'confirmation_rejected',
          gate: 'confirmation',
        });
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
      // Held after an inconclusive last lookup: that lookup was not followed by another.
      if (entry.action === 'held') helpers.undoLookupRetry();
      else if (entry.action === 'resolved' && entry.code !== 'retry')
        call(entry.callId, entry.tool).result = entry.code === 'happened' ? 'ok' : 'not_executed';
      break;
    case 'model_outage':
      decide({
        kind: 'outage',
        name: entry.action,
        decision: entry.action,
        code: entry.code ?? null,
        summary: entry.error,
        tool: null,
        callId: null,
      });
      // Nothing is reserved while the task waits out an outage; the retry reserves the turn again.
      if (entry.action === 'waiting') helpers.holdReservation(false);
      else if (entry.action === 'retrying') helpers.holdReservation(true);
      // An operator's early retry is charged as one more model turn.
      if (entry.action === 'retrying' && entry.by !== undefined) used.modelTurns += 1;
      break;
    case 'compaction_started':
      // A turn the provider refused as too long reported no usage: it is charged nothing.
      if (entry.reason === 'context_too_long') helpers.holdReservation(false);
      task.compactionReserve = entry.reserved;
      used.tokens += entry.reserved?.tokens ?? 0;
      used.costMicros += entry.reserved?.costMicros ?? 0;
      break;
    case 'compaction': {
      // A model summariser's call settles to what it reported.
      const reserved = task.compactionReserve ?? { tokens: 0, costMicros: 0 };
      const usage = entry.usage ?? { inputTokens: 0, outputTokens: 0, costMicros: 0 };
      used.tokens += usage.inputTokens + usage.outputTokens - reserved.tokens;
      used.costMicros += usage.costMicros - reserved.costMicros;
      task.compactionReserve = null;
      break;
    }
    case 'plan':
      foldPlan(entry, helpers);
      break;
    case 'workflow':
      foldWorkflow(task, entry, helpers);
      break;
    case 'subtask':
      foldSubtask(entry, helpers);
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
      break;
  }
}
