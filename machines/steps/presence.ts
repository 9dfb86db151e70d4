/**
 * The user's presence: the host says the task's user left or came back. While they are away the task finishes what
 * is running, then pauses (persisted, its wall-clock budget not spent) before its next model turn and before any write
 * (undoing a stop's writes goes on), and resumes when they are back; a pause that outlasts the policy's `awayTtlMs`
 * cancels the task (`user_away`), which undoes its writes as any cancel does.
 */
import type { MachineEvent } from '../actors.js';
import type { AgentContext } from '../context.js';
import { auditEntry, timeOf } from '../journal.js';
import { type Step, type StepResult, endWait } from './step.js';
import { stop } from './stop.js';

type PresenceAction = 'left' | 'returned' | 'paused' | 'resumed' | 'expired';

const presence = (context: AgentContext, event: MachineEvent, action: PresenceAction, expiresAt: number | null) =>
  auditEntry(context, event, { kind: 'presence', action, userId: context.principal.userId, expiresAt });

/** The user left: remembered, with when a pause for it ends the task. What runs now finishes first. */
export const recordUserAway: Step = (context, event) => {
  if (context.away) return { reply: { accepted: true, code: null, message: 'the user was already away' } };
  const at = timeOf(context, event);
  const away = { since: at, expiresAt: at + context.policy.awayTtlMs };
  return {
    context: { away },
    audit: [presence(context, event, 'left', away.expiresAt)],
    reply: { accepted: true, code: null, message: 'the task pauses before its next model turn or write' },
  };
};

/** The user is back while the task was not paused (it was running, or waiting for them anyway). */
export const recordUserBack: Step = (context, event) => {
  if (!context.away) return { reply: { accepted: false, code: 'not_away', message: 'the user was not away' } };
  return {
    context: { away: null },
    audit: [presence(context, event, 'returned', null)],
    reply: { accepted: true, code: null, message: 'the user is back' },
  };
};

/** The next step needs the user (a model turn, a write) and they are away: the task rests until they return. */
export const pauseForAbsence: Step = (context, event) => ({
  context: { waitingSince: context.waitingSince ?? timeOf(context, event) },
  audit: [presence(context, event, 'paused', context.away?.expiresAt ?? null)],
});

/** The user is back: the task goes on where it paused, the time paused not counted against its deadline. */
export const resumeForUser: Step = (context, event) => ({
  context: { away: null, ...endWait(context, event) },
  audit: [presence(context, event, 'resumed', null)],
  reply: { accepted: true, code: null, message: 'the user is back; the task resumes' },
});

/** Nobody came back in time: the task is cancelled (its writes undone where their tools say how). */
export const stopForAbsence: Step = (context, event): StepResult => {
  const since = context.away?.since ?? timeOf(context, event);
  const result = stop(
    context,
    event,
    'cancelled',
    {
      code: 'user_away',
      message: `the user went away at ${new Date(since).toISOString()} and did not come back within ${context.policy.awayTtlMs} ms`,
    },
    { skipCode: 'cancelled' },
  );
  return {
    ...result,
    context: { ...result.context, away: null, ...endWait(context, event) },
    audit: [presence(context, event, 'expired', null), ...(result.audit ?? [])],
  };
};

/** `user.left` / `user.returned` about someone other than the task's user: refused, nothing changes. */
export const refusePresenceOfOther: Step = () => ({
  reply: {
    accepted: false,
    code: 'wrong_user',
    message: "only the task's user's own session says they left or returned",
  },
});
