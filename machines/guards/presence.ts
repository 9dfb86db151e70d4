/** Questions of the user's presence: is the task's user away, did they (and not someone else) say so, is it too long. */
import type { Guard } from './guard.js';

export const presenceGuards = {
  /** The host said the task's user went away, and has not said they came back. */
  isUserAway: (context) => context.away !== null,

  /** `user.left` or `user.returned` about the task's own user (nobody else's presence pauses it). */
  isAboutTaskUser: (context, event) =>
    (event.type === 'user.left' || event.type === 'user.returned') && event.userId === context.principal.userId,

  /** The pause for an absent user has lasted the policy's `awayTtlMs`. */
  hasAbsenceExpired: (context, event) =>
    context.away !== null && 'at' in event && typeof event.at === 'number' && event.at >= context.away.expiresAt,
} satisfies Record<string, Guard>;
