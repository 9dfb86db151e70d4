/**
 * A pause while the task's user is away (`paused` before a model turn, `executing.pausedBeforeWrite` before a
 * write): both wait for the same two events, and differ only in where the user's return leads.
 */
import { TAGS } from '../tags.js';
import type { ChartState } from './chartState.js';

export function pausedState(description: string, onReturn: string) {
  return {
    description,
    tags: [TAGS.waiting, TAGS.away],
    on: {
      'user.returned': [
        { guard: 'isAboutTaskUser', target: onReturn, actions: 'resumeForUser' },
        { actions: 'refusePresenceOfOther' },
      ],
      'timer.awayExpired': [
        { guard: 'hasAbsenceExpired', target: '#agent.stopping', actions: 'stopForAbsence' },
        { actions: 'replyNothingDue' },
      ],
    },
  } satisfies ChartState;
}
