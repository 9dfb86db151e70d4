/**
 * Waits that are not a human's decision: a model outage waited out (the task rests, persisted, and tries again at
 * a wake-up time with backoff, failing only after the policy's outage limit), and a question nobody answered.
 */
import { type MachineEvent, outputOf } from '../actors.js';
import type { Outage } from '../context.js';
import { debit, describeShortfall, modelTurnNeed, releaseTurn, reserveTurnAgain, shortfall } from '../lib/budget.js';
import { auditEntry, timeOf } from '../journal.js';
import { type Step, endWait, retriesWithin } from './step.js';
import { stop } from './stop.js';

/** The model stayed unreachable past its retries: wait, persisted, until the next attempt is due. */
export const pauseForModel: Step = (context, event) => {
  const output = outputOf(event, 'model');
  if (output.kind !== 'failed') return {};
  const at = timeOf(context, event);
  const attempts = (context.outage?.attempts ?? 0) + 1;
  const { first, longest } = context.policy.modelWakeMs;
  const wait = Math.min(longest, first * 2 ** Math.min(attempts - 1, 30));
  const outage: Outage = {
    since: context.outage?.since ?? at,
    attempts,
    wakeAt: at + wait,
    lastError: output.failure.message,
  };
  const retries = retriesWithin(context, output.retriesUsed);
  // Nothing is reserved while the task waits (a stop from the wait charges the turn nothing); resuming reserves again.
  const released = releaseTurn(context.budget, context.modelReservation);
  return {
    context: {
      outage,
      waitingSince: context.waitingSince ?? at,
      budget: retries > 0 ? debit(released, { retries }) : released,
    },
    audit: [
      auditEntry(context, event, {
        kind: 'model_outage',
        action: 'waiting',
        attempts,
        wakeAt: outage.wakeAt,
        error: output.failure.message,
      }),
    ],
  };
};

/** The audit entry of a model wait ending in another attempt: at its wake-up, or early at an operator's request (`by`). */
const retryingEntry = (context: Parameters<Step>[0], event: Parameters<Step>[1], by?: string) =>
  auditEntry(context, event, {
    kind: 'model_outage',
    action: 'retrying',
    attempts: context.outage?.attempts ?? 0,
    wakeAt: null,
    error: context.outage?.lastError ?? '',
    ...(by ? { by } : {}),
  });

/**
 * The wake-up is due: the same turn asks the model again. Its model turn was debited when it started; its token and
 * cost reservation, given back for the wait, is taken again.
 */
export const resumeModel: Step = (context, event) => {
  const ended = endWait(context, event);
  return {
    context: { ...ended, budget: reserveTurnAgain(ended.budget, context.modelReservation) },
    audit: [retryingEntry(context, event)],
  };
};

/**
 * An operator asks the model again now, before the wake-up time: the same turn is asked again (as at the wake-up), and
 * it is charged as one more model turn with its reservation (the model's own retries are spent by the time a task
 * waits), so early retries are bounded by the task's budget. The audit names who asked.
 */
export const retryModelNow: Step = (context, event) => {
  if (event.type !== 'operator.retryModel') return {};
  const ended = endWait(context, event);
  const budget = debit(ended.budget, modelTurnNeed(context.modelReservation, ended.budget));
  const by = `${event.actor.tenantId}:${event.actor.userId}`;
  return {
    context: { ...ended, budget },
    audit: [retryingEntry(context, event, by)],
    reply: { accepted: true, code: null, message: `the model is asked again now, at ${by}'s request` },
  };
};

/** An early model retry the chart does not take: from someone who is no operator of the tenant, or past the budget. */
export const refuseModelRetry: Step = (context, event) => {
  if (event.type !== 'operator.retryModel') return {};
  const by = `${event.actor.tenantId}:${event.actor.userId}`;
  const operator = event.actor.operator && event.actor.tenantId === context.principal.tenantId;
  const { budget } = endWait(context, event);
  const short = shortfall(budget, modelTurnNeed(context.modelReservation, budget), timeOf(context, event));
  const [code, message] = !operator
    ? (['operator_only', "only an operator of the task's tenant may retry the model early"] as const)
    : ([
        'budget_exhausted',
        `an early retry is one more model turn: ${short ? describeShortfall(budget, short) : 'the budget is spent'}`,
      ] as const);
  return {
    audit: [
      auditEntry(context, event, {
        kind: 'model_outage',
        action: 'retry_refused',
        attempts: context.outage?.attempts ?? 0,
        wakeAt: context.outage?.wakeAt ?? null,
        error: message,
        by,
        code,
      }),
    ],
    reply: { accepted: false, code, message },
  };
};

/** An answer that came after the question expired is not taken: the expiry applies instead. */
const tooLate = (event: MachineEvent) =>
  event.type === 'user.answered'
    ? {
        reply: {
          accepted: false,
          code: 'question_expired' as const,
          message: 'the question expired before this answer came',
        },
      }
    : {};

/** Nobody answered the model's question in time, and the policy lets the model go on without an answer. */
export const expireQuestion: Step = (context, event) => {
  const question = context.question ?? '';
  return {
    context: { question: null, questionExpiresAt: null, ...endWait(context, event) },
    transcript: [{ kind: 'no_answer', at: timeOf(context, event), turn: context.turn, question }],
    audit: [auditEntry(context, event, { kind: 'question_expired', question })],
    ...tooLate(event),
  };
};

export const stopForNoAnswer: Step = (context, event) => {
  const question = context.question ?? '';
  const result = stop(context, event, 'failed', {
    code: 'no_answer',
    message: `nobody answered the question in time: ${question}`,
  });
  return {
    ...result,
    context: { ...result.context, question: null, questionExpiresAt: null, ...endWait(context, event) },
    ...tooLate(event),
  };
};
