/** Questions about the model's turn: did it produce an event, and (gate (a), protocol) is its proposal usable? */
import { outputOf } from '../actors.js';
import { protocolVerdict } from '../lib/protocol.js';
import { type Guard, eventOf } from './guard.js';

export const modelGuards = {
  /** The turn produced no event (transport failure past its retries, or a refused request). */
  didModelFail: (_context, event) => outputOf(event, 'model').kind === 'failed',

  /** Every call has a unique id, so each result can be paired with its call. */
  hasPairableCallIds: (context, event) =>
    protocolVerdict(eventOf(event, 'model.toolsProposed').calls, context.catalog, context.policy).kind !== 'unpairable',

  /** Known tools, strict JSON objects within the size limit, no more calls than allowed. */
  isBatchWellFormed: (context, event) =>
    protocolVerdict(eventOf(event, 'model.toolsProposed').calls, context.catalog, context.policy).kind === 'accepted',

  canReaskModel: (context) => context.invalidOutputs <= context.policy.maxInvalidOutputs,

  /** Success only from a trusted tool result that matches the task's criterion (or no criterion declared). */
  isGoalMet: (context) => context.success === null || context.evidence.length > 0,

  isFromTaskUser: (context, event) => event.type === 'user.answered' && event.userId === context.principal.userId,
} satisfies Record<string, Guard>;
