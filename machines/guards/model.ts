/**
 * Questions about the model's turn: did it produce an event, and (gate (a), protocol) is its proposal usable? Also
 * the waits around the model: an outage waited out, and the user's answer to its question.
 */
import { outputOf } from '../actors.js';
import { protocolVerdict } from '../lib/protocol.js';
import { timeOf } from '../journal.js';
import { type Guard, eventOf } from './guard.js';

export const modelGuards = {
  /** The turn produced no event (transport failure past its retries, or a refused request). */
  didModelFail: (_context, event) => outputOf(event, 'model').kind === 'failed',

  /** The failure was transient (the provider did not answer, or was overloaded), not a refused request. */
  isModelOutage: (_context, event) => {
    const output = outputOf(event, 'model');
    return output.kind === 'failed' && output.failure.transient;
  },

  /** The outage, counted from its first failure, is still shorter than the policy lets a task wait. */
  canWaitOutModel: (context, event) =>
    timeOf(context, event) - (context.outage?.since ?? timeOf(context, event)) < context.policy.modelOutageMs,

  isModelRetryDue: (context, event) =>
    event.type === 'timer.modelRetryDue' && context.outage !== null && event.at >= context.outage.wakeAt,

  /**
   * An early model retry comes from an operator of the task's tenant: the caller the host attached to the event (from
   * its session, checked again at the edge), never anything a request body says.
   */
  isFromOperatorOfTenant: (context, event) =>
    event.type === 'operator.retryModel' && event.actor.operator && event.actor.tenantId === context.principal.tenantId,

  /** Every call has a unique id, so each result can be paired with its call. */
  hasPairableCallIds: (context, event) =>
    protocolVerdict(eventOf(event, 'model.toolsProposed').calls, context.catalog, context.policy).kind !== 'unpairable',

  /** Known tools, strict JSON objects within the size limit, no more calls than allowed. */
  isBatchWellFormed: (context, event) =>
    protocolVerdict(eventOf(event, 'model.toolsProposed').calls, context.catalog, context.policy).kind === 'accepted',

  canReaskModel: (context) => context.invalidOutputs <= context.policy.maxInvalidOutputs,

  /** The task declares what success is (a trusted result of a tool, matching fields): without it, nothing is "done". */
  hasSuccessCriterion: (context) => context.success !== null,

  /** Success only from a trusted tool result that matches the task's criterion, never from the model's text. */
  isGoalMet: (context) => context.success !== null && context.evidence.length > 0,

  isFromTaskUser: (context, event) => event.type === 'user.answered' && event.userId === context.principal.userId,

  /** The answer came before the question expired (a question without an expiry never does). */
  isQuestionUnexpired: (context, event) =>
    context.questionExpiresAt === null || ('at' in event && event.at < context.questionExpiresAt),

  hasQuestionExpired: (context, event) =>
    event.type === 'timer.answerExpired' && context.questionExpiresAt !== null && event.at >= context.questionExpiresAt,

  /** An unanswered question goes back to the model (policy `onAnswerExpiry: 'replan'`) rather than ending the task. */
  replansOnAnswerExpiry: (context) => context.policy.onAnswerExpiry === 'replan',
} satisfies Record<string, Guard>;
