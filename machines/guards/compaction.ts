/** Questions about the conversation's size: is it time to compact it before the next model turn? */
import { outputOf } from '../actors.js';
import { textTokens } from '../lib/conversationSize.js';
import type { Guard } from './guard.js';

export const compactionGuards = {
  /**
   * The conversation the next turn would send is estimated past the host's threshold, or the provider refused the
   * last prompt as too long; and the chart has not compacted since the last turn (a summary that still does not fit
   * is the adapters' to bound: compacting again before a turn would loop).
   */
  isTranscriptNearLimit: (context) => {
    const { atTokens, tokens, requested, afterTurn } = context.compaction;
    if (afterTurn !== null && afterTurn >= context.turn) return false;
    return requested !== null || (atTokens !== null && tokens >= atTokens);
  },

  /**
   * The batch's results, once in the conversation, cannot bring it to the threshold: `isTranscriptNearLimit` will
   * not hold after them. Asked before they are recorded, so it counts each call's result at the most a result
   * counts (`resultBytes`); a task with a plan (whose progress adds entries too) or a compaction asked for does not
   * hold, and is asked again after the results, in `deciding`.
   */
  hasRoomForResults: (context) => {
    const { atTokens, tokens, requested, afterTurn, resultBytes } = context.compaction;
    if (afterTurn !== null && afterTurn >= context.turn) return true;
    if (requested !== null || context.plan !== null) return false;
    if (atTokens === null) return true;
    return tokens + (context.batch?.calls.length ?? 0) * textTokens(resultBytes) < atTokens;
  },

  /** The provider refused the turn's prompt as too long (also when asked again compacted harder). */
  isContextTooLong: (_context, event) => {
    const output = outputOf(event, 'model');
    return output.kind === 'failed' && output.failure.code === 'context_too_long';
  },

  /** The refused turn was not the first after a compaction: compacting again may help; else it would not. */
  canCompactForRefusal: (context) => {
    const { afterTurn } = context.compaction;
    return afterTurn === null || afterTurn + 1 < context.turn;
  },

  /** The summariser replaced older turns (else there was nothing old enough). */
  didCompactionReplace: (_context, event) => outputOf(event, 'summarise').summary !== null,

  /** The compaction was asked for by the provider's refusal (`context_too_long`), not by the estimate. */
  wasCompactionRequested: (context) => context.compaction.requested !== null,
} satisfies Record<string, Guard>;
