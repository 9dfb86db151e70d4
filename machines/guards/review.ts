/** The review desk: only a reviewer (the policy's review scope, not the task's own user) resolves a held write. */
import { taskRef } from '../lib/arguments.js';
import type { MachineEvent } from '../actors.js';
import type { AgentContext } from '../context.js';
import { findCall } from '../lib/batch.js';
import { type Guard, eventOf } from './guard.js';

const resolved = (event: MachineEvent) => eventOf(event, 'review.resolved');

export function reviewedCall(context: AgentContext) {
  return context.review ? findCall(context.batch, context.review.callId) : undefined;
}

export const reviewGuards = {
  /** The deciding session holds the review scope, and is not the user whose task it is. */
  isFromReviewer: (context, event) => {
    const { userId, scopes } = resolved(event);
    return scopes.includes(context.policy.reviewScope) && userId !== context.principal.userId;
  },

  isResolvedAsHappened: (_context, event) => resolved(event).resolution === 'happened',

  isResolvedAsNotHappened: (_context, event) => resolved(event).resolution === 'not_happened',

  isResolvedAsRetry: (_context, event) => resolved(event).resolution === 'retry',

  /** The result the reviewer found matches the tool's output schema: it becomes the write's trusted result. */
  isReviewResultValid: (context, event, toolkit) => {
    const call = reviewedCall(context);
    const rules = call ? toolkit.rules(call.tool) : undefined;
    const result = resolved(event).result;
    if (!rules?.output || result === null) return false;
    try {
      return (rules.parseOutput ? rules.parseOutput(result, taskRef(context)) : rules.output.safeParse(result)).success;
    } catch {
      return false;
    }
  },

  /** The persisted catalog says the held write's tool never duplicates on a same-key retry. */
  isHeldWriteRetrySafe: (context) => {
    const call = reviewedCall(context);
    return call !== undefined && context.catalog[call.tool]?.sameKeyRetrySafe === true;
  },
} satisfies Record<string, Guard>;
