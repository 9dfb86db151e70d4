/** How a task ends: every stop records its reason, and every proposed call still gets its paired result. */
import type { MachineEvent } from '../actors.js';
import { outputOf } from '../actors.js';
import type { AgentContext, FinalStatus, Json, StopReason } from '../context.js';
import { UNVERIFIED } from '../failures.js';
import { callKey, nextCall, nextStep, skipUnfinished } from '../lib/batch.js';
import { blockingReads, unsupportedIdentifiers } from '../lib/observedFacts.js';
import { isJsonObject } from '../lib/strictJson.js';
import { debit, describeShortfall, modelTurnNeed, releaseTurn, shortfall } from '../lib/budget.js';
import { safeErrorText } from '../lib/text.js';
import type { AuditEntry, TranscriptEntry } from '../journal.js';
import { auditEntry, gateEntry, timeOf } from '../journal.js';
import { nextStepNeed } from '../guards/budget.js';
import { type Step, type StepResult, describeFields, endWait, retriesWithin } from './step.js';
import { compensationResults, describeCompensations, willCompensate } from './compensate.js';
import { finalPlan, unapprovedPlanResult, withResults } from '../lib/plan.js';

/** Ends the task with `status`: unfinished calls get a "not run" result (`skipCode`), results go to the transcript. */
export function stop(
  context: AgentContext,
  event: MachineEvent,
  status: FinalStatus,
  reason: StopReason,
  extra: { answer?: string; skipCode?: string; unsupportedIds?: string[] } = {},
): StepResult {
  const batch =
    context.batch && extra.skipCode ? skipUnfinished(context.batch, extra.skipCode, reason.message) : context.batch;
  const transcript: TranscriptEntry[] = [];
  const complete = batch !== null && batch.calls.every((c) => c.phase === 'finished');
  // A compensation batch is the host's, not the model's: its results never go to the model's transcript.
  const unwinding = context.unwinding !== null && !context.unwinding.finished ? context.unwinding : null;
  if (batch && !batch.closed && complete && !unwinding) {
    // Keep the trajectory: every proposed call still gets its paired result.
    for (const call of batch.calls) {
      transcript.push({ kind: 'result', at: timeOf(context, event), turn: batch.turn, observation: call.observation! });
    }
  }
  // Stopped again while undoing writes: the compensations not yet run stay not run, and the outcome says so.
  const compensations = unwinding ? compensationResults({ ...context, batch }) : undefined;
  const said = unwinding
    ? {
        ...reason,
        message: `${reason.message} (while undoing the writes of an earlier stop, ${unwinding.stop.reason.code}); ${describeCompensations(compensations!)}`,
      }
    : reason;
  // The plan as the results left it: those of the batch stopped in, too, if it is still open (a closed batch's were
  // settled as it closed, and may be older than the plan). Only real results count, never the stop's own "not run"
  // (so the batch before the skip); what did not run is skipped.
  const open = context.batch !== null && !context.batch.closed ? context.batch : null;
  const planned =
    context.plan && open ? withResults(context.plan, open.calls, timeOf(context, event)).planning : context.plan;
  const plan = planned?.current ? finalPlan(planned.current) : null;
  // A plan still waiting for approval: its propose_plan call gets its result too.
  const unapproved = context.plan ? unapprovedPlanResult(context.plan, extra.skipCode ?? reason.code) : null;
  if (unapproved)
    transcript.push({ kind: 'result', at: timeOf(context, event), turn: context.turn, observation: unapproved });
  const outcome = {
    status,
    reason: said,
    answer: extra.answer ?? null,
    evidence: context.evidence,
    unsupportedIds: extra.unsupportedIds ?? [],
    ...(compensations ? { compensations } : {}),
    ...(plan ? { plan } : {}),
  };
  return {
    context: {
      batch: batch && { ...batch, closed: complete || unwinding !== null },
      pendingConfirmation: null,
      outcome,
      ...(unwinding ? { unwinding: { ...unwinding, compensations: compensations!, finished: true } } : {}),
    },
    // A stop whose writes are undone first is audited when the compensations start (`compensation_started`).
    audit: willCompensate(context, status)
      ? []
      : [auditEntry(context, event, { kind: 'task_stopped', status, reason: said })],
    transcript,
  };
}

function withFirst(result: StepResult, ...entries: AuditEntry[]): StepResult {
  return { ...result, audit: [...entries, ...(result.audit ?? [])] };
}

export const stopForBudget: Step = (context, event, toolkit) => {
  const step = nextStep(context.batch);
  const inBatch = step !== null && context.batch !== null && !context.batch.closed;
  const need = inBatch
    ? (nextStepNeed(context, toolkit) ?? {})
    : modelTurnNeed(context.modelReservation, context.budget);
  const dimension = shortfall(context.budget, need, timeOf(context, event)) ?? 'wallClock';
  const unknownAmount = dimension === 'money' && need.money === Number.POSITIVE_INFINITY;
  const why = unknownAmount
    ? 'the money this write moves could not be determined (its amount rule failed)'
    : describeShortfall(context.budget, dimension);
  const message = `stopped before the next ${inBatch ? 'tool call' : 'model turn'}: ${why}`;
  const result = stop(
    context,
    event,
    'budget_exhausted',
    { code: 'budget_exhausted', message, detail: { dimension } },
    { skipCode: 'budget_exhausted' },
  );
  return withFirst(
    result,
    gateEntry(context, event, { gate: 'budget', decision: 'stop', code: 'budget_exhausted', summary: message }),
  );
};

export const stopCancelled: Step = (context, event) => {
  const request =
    event.type === 'task.cancelled'
      ? { by: event.by, reason: event.reason }
      : (context.cancelRequested ?? { by: 'host', reason: '' });
  const message = `cancelled by ${request.by}${request.reason ? `: ${request.reason}` : ''}`;
  return {
    ...stop(context, event, 'cancelled', { code: 'cancelled', message }, { skipCode: 'cancelled' }),
    reply: { accepted: true, code: null, message: 'cancelled' },
  };
};

/** A cancel while a write is in flight: it applies once the write is reconciled. */
export const deferCancel: Step = (context, event) => {
  if (event.type !== 'task.cancelled') return {};
  return {
    context: { cancelRequested: { by: event.by, reason: event.reason, at: event.at } },
    audit: [
      auditEntry(context, event, { kind: 'cancel_requested', by: event.by, reason: event.reason, deferred: true }),
    ],
    reply: {
      accepted: true,
      code: 'cancel_deferred',
      message: 'cancel requested; it applies once the write in flight is reconciled',
    },
  };
};

export const stopForModelFailure: Step = (context, event) => {
  const output = outputOf(event, 'model');
  if (output.kind !== 'failed') return {};
  const { outage } = context;
  const at = timeOf(context, event);
  // Refused (a 401, a context overflow): say so, never "could not be reached".
  const message = !output.failure.transient
    ? `the model request failed: ${output.failure.message}`
    : outage
      ? `the model stayed unreachable for ${at - outage.since} ms (${outage.attempts + 1} attempts; the limit is ${context.policy.modelOutageMs} ms): ${output.failure.message}`
      : `the model could not be reached: ${output.failure.message}`;
  const result = stop(context, event, 'failed', { code: output.failure.code, message });
  const retries = retriesWithin(context, output.retriesUsed);
  // The turn got no reply and reported no usage: its token and cost reservation is given back.
  const budget = releaseTurn(endWait(context, event).budget, context.modelReservation);
  result.context!.budget = retries > 0 ? debit(budget, { retries }) : budget;
  result.context!.waitingSince = null;
  if (outage) {
    const gaveUp = auditEntry(context, event, {
      kind: 'model_outage',
      action: 'gave_up',
      attempts: outage.attempts + 1,
      wakeAt: null,
      error: output.failure.message,
    });
    result.audit = [gaveUp, ...(result.audit ?? [])];
  }
  return result;
};

export const stopForInternalError: Step = (context, event) =>
  stop(
    context,
    event,
    'failed',
    {
      code: 'internal_error',
      message: `a host step failed: ${'error' in event ? safeErrorText(event.error) : event.type}`,
    },
    { skipCode: 'internal_error' },
  );

export const stopForProtocolError: Step = (context, event) =>
  stop(context, event, 'failed', {
    code: 'protocol_error',
    message: `the model produced ${context.invalidOutputs} unusable outputs; the limit is ${context.policy.maxInvalidOutputs}`,
  });

export const stopForRejections: Step = (context, event) => {
  const turns = context.rejectedTurns + 1;
  const reason: StopReason = {
    code: 'too_many_rejections',
    message: `calls were rejected by the host in ${turns} turns; the limit is ${context.policy.maxRejectedTurns}`,
  };
  const failed = context.batch?.calls.findLast((c) => c.observation?.ok === false)?.observation;
  if (failed && !failed.ok) reason.detail = { lastFailure: { tool: failed.tool, code: failed.code } };
  return stop(context, event, 'failed', reason);
};

/** The model proposed a call it proposed before, and nothing new was observed since: it would go round forever. */
export const stopForLoop: Step = (context, event) => {
  const call = context.batch?.calls.find(
    (c) => c.argsHash !== null && context.proposedSinceNew.includes(callKey(c.tool, c.argsHash)),
  );
  const message = `the model proposed ${call?.tool ?? 'a call'} again with the same arguments and nothing new was observed`;
  const result = stop(context, event, 'failed', { code: 'loop_detected', message }, { skipCode: 'loop_detected' });
  return withFirst(
    result,
    gateEntry(context, event, { gate: 'loop', decision: 'stop', call, code: 'loop_detected', summary: message }),
  );
};

/**
 * The final answer checked against what the task trusts: identifiers it names that no trusted result returned (and
 * the user did not write) are flagged in the outcome and in the stop's audit entry, whatever the status.
 */
function answered(
  context: AgentContext,
  event: MachineEvent,
  status: FinalStatus,
  reason: StopReason,
  text: string,
): StepResult {
  const unsupportedIds = unsupportedIdentifiers(context, text);
  const flagged: StopReason = unsupportedIds.length
    ? {
        ...reason,
        message: `${reason.message}; the answer names ${unsupportedIds.join(', ')}, which no trusted result returned`,
        detail: {
          ...(isJsonObject(reason.detail ?? null) ? (reason.detail as Record<string, Json>) : {}),
          unsupportedIds,
        },
      }
    : reason;
  const result = stop(context, event, status, flagged, { answer: text, unsupportedIds });
  result.transcript!.push({ kind: 'answer', at: timeOf(context, event), turn: context.turn, text });
  return result;
}

export const finishDone: Step = (context, event) => {
  if (event.type !== 'model.answered') return {};
  // The chart comes here only with evidence (isGoalMet); a step never throws, so say so if it ever did not.
  const evidence = context.evidence.at(-1);
  const message = evidence
    ? `goal met: ${evidence.tool} returned ${describeFields(evidence.fields)}`
    : 'goal met, but no trusted result is recorded';
  return answered(context, event, 'done', { code: 'goal_met', message }, event.text);
};

/**
 * An answer to a task that declares no success criterion: an honest `answered`, never `done`. The outcome lists the
 * writes that succeeded (its evidence) and claims nothing beyond them.
 */
export const finishAnswered: Step = (context, event) => {
  if (event.type !== 'model.answered') return {};
  const { evidence, lastFailure } = context;
  const results = evidence.length
    ? `${evidence.length} write${evidence.length > 1 ? 's' : ''} succeeded (${evidence.map((e) => `${e.tool} ${describeFields(e.fields)}`).join('; ')})`
    : `no write succeeded${lastFailure ? ` (last failure: ${lastFailure.tool} ${lastFailure.code})` : ''}`;
  const message = `the model answered; the task declares no success criterion, so success is not claimed: ${results}`;
  return answered(
    context,
    event,
    'answered',
    { code: 'answered_without_criterion', message, detail: { lastFailure } },
    event.text,
  );
};

/** An answer without a trusted result: never "done", and flagged whatever the answer claims. */
export const finishUnmetGoal: Step = (context, event) => {
  if (event.type !== 'model.answered') return {};
  const failure = context.lastFailure;
  const wanted = context.success?.description ?? `a trusted result of ${context.success?.tool}`;
  const detail = { flag: 'answer_without_trusted_result', lastFailure: failure };
  const reason: StopReason =
    failure && UNVERIFIED.has(failure.code)
      ? {
          code: 'could_not_verify',
          message: `could not verify: ${failure.tool} ended with ${failure.code}; nothing shows ${wanted}`,
          detail,
        }
      : {
          code: 'goal_not_met',
          message: `the model answered, but no trusted result shows ${wanted}${failure ? ` (last failure: ${failure.tool} ${failure.code})` : ''}`,
          detail,
        };
  return answered(context, event, 'failed', reason, event.text);
};

/**
 * A write depends on facts a read could not establish, and reading again did not help: the task stops before the
 * write (a timeout means "unknown", and nothing is written on unknown facts).
 */
export const stopForUnverifiedFacts: Step = (context, event, toolkit) => {
  const call = nextCall(context.batch);
  const marks = call ? blockingReads(context, toolkit.rules(call.tool)) : [];
  const reads = marks
    .map((mark) => `${mark.tool} (${mark.code}, ${mark.times} time${mark.times > 1 ? 's' : ''} in a row)`)
    .join(', ');
  const message = `could not verify: ${reads || 'a read'} ended unknown and reading again did not help; ${call?.tool ?? 'the write'} was not run`;
  const result = stop(
    context,
    event,
    'failed',
    { code: 'could_not_verify', message, detail: { unverified: marks } },
    { skipCode: 'unverified_facts' },
  );
  return withFirst(
    result,
    gateEntry(context, event, {
      gate: 'verification',
      decision: 'stop',
      call,
      code: 'could_not_verify',
      summary: message,
    }),
  );
};

export const finishRefused: Step = (context, event) => {
  if (event.type !== 'model.refused') return {};
  const result = stop(context, event, 'failed', {
    code: 'model_refused',
    message: `the model refused: ${event.reason}`,
  });
  result.transcript!.push({ kind: 'refusal', at: event.at, turn: context.turn, text: event.reason });
  return result;
};
