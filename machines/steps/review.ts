/**
 * The review desk. A write whose outcome nobody could establish (lookups inconclusive, the executor lost), or that
 * the tool itself found inconsistent (`needs_review`), holds the task until a reviewer says what happened: it did
 * (with the result they found, which becomes the write's trusted result), it did not, or retry it with the same key.
 */
import type { MachineEvent, RecheckActorOutput } from '../actors.js';
import { outputOf } from '../actors.js';
import type { AgentContext, CallState, Json, Review } from '../context.js';
import { currentCall, finishCall, observationOf, rejection, updateCall } from '../lib/batch.js';
import { reviewedCall } from '../guards/review.js';
import { taskRef, toJson } from '../lib/arguments.js';
import type { ToolRules } from '../toolkit.js';
import type { AuditEntry } from '../journal.js';
import { auditEntry, timeOf } from '../journal.js';
import { finishedEntry, learnedFrom, written } from './execution.js';
import { lookupEntry } from './reconcile.js';
import { type Step, type StepResult, endWait } from './step.js';
import { releaseUnstarted } from '../lib/subtask.js';

function reviewEntry(
  context: AgentContext,
  event: MachineEvent,
  call: CallState,
  action: 'held' | 'resolved' | 'refused',
  code: string,
  summary: string,
): AuditEntry {
  const by = event.type === 'review.resolved' ? event : null;
  return auditEntry(context, event, {
    kind: 'review',
    action,
    callId: call.callId,
    tool: call.tool,
    idempotencyKey: call.idempotencyKey,
    userId: by?.userId ?? null,
    scope: by ? context.policy.reviewScope : null,
    code,
    summary,
  });
}

function hold(context: AgentContext, event: MachineEvent, reason: Review['reason'], summary: string): StepResult {
  const call = currentCall(context.batch)!;
  const at = timeOf(context, event);
  const review: Review = {
    callId: call.callId,
    tool: call.tool,
    idempotencyKey: call.idempotencyKey,
    reason,
    summary,
    since: at,
  };
  return {
    context: {
      batch: updateCall(context.batch!, call.callId, { phase: 'awaitingReview' }),
      review,
      waitingSince: context.waitingSince ?? at,
    },
    audit: [reviewEntry(context, event, call, 'held', reason, summary)],
  };
}

/** Lookups could not establish whether the write took effect: a human must look it up. */
export const holdForReview: Step = (context, event) => {
  const call = currentCall(context.batch)!;
  const lookedUp = event.type === 'xstate.done.actor.lookup';
  const detail = lookedUp && event.output.result.kind === 'inconclusive' ? `: ${event.output.result.summary}` : '';
  const summary = `the outcome of ${call.tool} (idempotency key ${call.idempotencyKey}) could not be established after ${call.lookups} lookup(s)${detail}; a reviewer must say whether it happened`;
  const held = hold(context, event, 'write_outcome_unknown', summary);
  return lookedUp ? { ...held, audit: [lookupEntry(context, event, call), ...held.audit!] } : held;
};

/** The tool reported the business records inconsistent (`needs_review`). */
export const holdWriteForReview: Step = (context, event) => {
  const output = outputOf(event, 'write');
  const call = currentCall(context.batch)!;
  const summary = output.outcome.kind === 'review' ? output.outcome.summary : 'the tool asked for a review';
  const held = hold(context, event, 'needs_review', `${call.tool} needs a review: ${summary}`);
  return {
    ...held,
    audit: [finishedEntry(context, event, call, 'needs_review', output.durationMs, call.writeAttempts), ...held.audit!],
  };
};

function resolved(context: AgentContext, event: MachineEvent) {
  const call = reviewedCall(context)!;
  const by = event.type === 'review.resolved' ? event : null;
  const note = by?.note ? ` (${by.note})` : '';
  return { call, by, note };
}

/**
 * The write happened: the reviewer's result, as the tool's output schema parses it (the guard checked it does), is
 * its trusted result, exactly as a tool's own output would be.
 */
export const acceptReviewedWrite: Step = (context, event, toolkit) => {
  const { call, by, note } = resolved(context, event);
  const result = parsedResult(context, toolkit.rules(call.tool), by?.result ?? null);
  const observation = observationOf(call, { kind: 'ok', value: result }, context.policy.observationCapBytes);
  return {
    context: {
      batch: finishCall(context.batch!, call.callId, observation),
      ...learnedFrom(context, call, result, timeOf(context, event), toolkit),
      writtenKeys: written(context, call),
      review: null,
      ...endWait(context, event),
    },
    audit: [
      reviewEntry(context, event, call, 'resolved', 'happened', `${by?.userId} found that the write happened${note}`),
    ],
    reply: { accepted: true, code: null, message: 'resolved: the write happened; the task continues with its result' },
  };
};

function parsedResult(context: AgentContext, rules: ToolRules | undefined, raw: Json): Json {
  try {
    const parsed = rules?.parseOutput ? rules.parseOutput(raw, taskRef(context)) : rules?.output?.safeParse(raw);
    return parsed?.success ? toJson(parsed.data) : raw;
  } catch {
    return raw;
  }
}

/** The write did not happen: the model is told, and may propose it again. */
export const closeReviewedWrite: Step = (context, event) => {
  const { call, by, note } = resolved(context, event);
  const summary = `a reviewer established that this write did not take effect${note}`;
  const waited = endWait(context, event);
  // A sub-task's start that did not happen: the child's share goes back.
  const released = releaseUnstarted({ ...context, budget: waited.budget }, event, call.callId);
  return {
    context: {
      batch: finishCall(context.batch!, call.callId, rejection(call, 'not_executed', summary, undefined, true)),
      review: null,
      ...waited,
      ...released.context,
    },
    audit: [
      reviewEntry(
        context,
        event,
        call,
        'resolved',
        'not_happened',
        `${by?.userId} found that the write did not happen${note}`,
      ),
      ...released.audit,
    ],
    reply: { accepted: true, code: null, message: 'resolved: the write did not happen; the model is told' },
  };
};

/** Retry with the same idempotency key (the tool never duplicates on one), once re-checked. */
export const prepareReviewedResend: Step = (context, event) => {
  const { call, by, note } = resolved(context, event);
  const batch = {
    ...updateCall(context.batch!, call.callId, { phase: 'rechecking', resendAfter: 'review' }),
    current: call.callId,
  };
  return {
    context: { batch, review: null, ...endWait(context, event) },
    audit: [
      reviewEntry(context, event, call, 'resolved', 'retry', `${by?.userId} asked to retry with the same key${note}`),
    ],
    reply: {
      accepted: true,
      code: null,
      message: 'resolved: the write is retried with the same idempotency key, once re-checked',
    },
  };
};

/** The retry a reviewer asked for was refused by its re-check: the write's outcome is still unknown. */
export const holdRefusedResend: Step = (context, event) => {
  const call = currentCall(context.batch)!;
  const why =
    event.type === 'xstate.done.actor.recheck' ? refusalReason(event.output) : 'the re-check of the retry failed';
  const held = hold(
    context,
    event,
    'write_outcome_unknown',
    `the retry of ${call.tool} was not sent (${why}); its first attempt's outcome is still unknown`,
  );
  return {
    ...held,
    context: {
      ...held.context,
      batch: updateCall(held.context!.batch!, call.callId, { phase: 'awaitingReview', resendAfter: null }),
    },
  };
};

function refusalReason(output: RecheckActorOutput): string {
  if (output.principal === null) return output.sessionError ?? 'the session is no longer valid';
  if (!output.permission.ok) return output.permission.summary;
  if (!output.rate.ok) return output.rate.summary;
  return "the session no longer holds the tool's scopes";
}

/** A resolution the chart does not take: from someone without the review scope, or one that cannot hold. */
export const refuseReview: Step = (context, event) => {
  if (event.type !== 'review.resolved') return {};
  const call = reviewedCall(context)!;
  const reviewer = event.scopes.includes(context.policy.reviewScope) && event.userId !== context.principal.userId;
  const [code, message] = !reviewer
    ? ([
        'not_a_reviewer',
        `a review needs the scope ${context.policy.reviewScope}, from someone other than the task's user`,
      ] as const)
    : event.resolution === 'happened'
      ? (['invalid_review', `the result does not match the output schema of ${call.tool}`] as const)
      : event.resolution === 'retry'
        ? context.cancelRequested
          ? ([
              'invalid_review',
              'the task was cancelled meanwhile: say whether the write happened, not to retry it',
            ] as const)
          : ([
              'invalid_review',
              `${call.tool} is not safe to retry with the same key, or the retry budget is spent`,
            ] as const)
        : (['invalid_review', 'this resolution does not apply'] as const);
  return {
    audit: [reviewEntry(context, event, call, 'refused', code, message)],
    reply: { accepted: false, code, message },
  };
};

export const replyNotWaitingForReview: Step = () => ({
  reply: { accepted: false, code: 'not_waiting_for_review', message: 'the task is not waiting for a review' },
});

/** A cancel while a write is held for review: it applies once a reviewer said what the write did. */
export const deferCancelInReview: Step = (context, event) => {
  if (event.type !== 'task.cancelled') return {};
  return {
    context: { cancelRequested: { by: event.by, reason: event.reason, at: event.at } },
    audit: [
      auditEntry(context, event, { kind: 'cancel_requested', by: event.by, reason: event.reason, deferred: true }),
    ],
    reply: {
      accepted: true,
      code: 'cancel_deferred',
      message: 'cancel requested; it applies once a reviewer resolved the write held for review',
    },
  };
};
