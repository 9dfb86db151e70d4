/** Questions about the conversation's size: is it time to compact it before the next model turn? */
import { outputOf } from '../actors.js';
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
