/** Questions of a stop: are the task's writes undone first, and which final state does the stop end in. */
import { willCompensate } from '../steps/compensate.js';
import type { Guard } from './guard.js';

export const compensationGuards = {
  /**
   * The stop just recorded is one the policy undoes (`compensateOn`), and the task made writes whose tools name a
   * compensation: they are undone first. Never while already undoing (a stop then ends the task).
   */
  mustCompensate: (context) => context.outcome !== null && willCompensate(context, context.outcome.status),

  /** The batch running is the host's compensations of a stop, not a model's proposal. */
  isUnwinding: (context) => context.unwinding !== null,

  stoppedAsFailed: (context) => context.outcome?.status === 'failed',

  stoppedAsCancelled: (context) => context.outcome?.status === 'cancelled',
} satisfies Record<string, Guard>;
