/**
 * Synchronous hooks in the adversarial world (`SYNC_CHART` of `agentWorld.ts`): the booking tool declares its
 * `validate` and `authorize` synchronous (`hooks: 'sync'`), so the gates' guards ask them inside the step that judges
 * the call, with no invoked state and no done event. What they answer is the harness's move: the model's proposal
 * comes with the host's answers for each booking of the batch (pass, refuse, unavailable, or a hook that throws), kept
 * in the shadow and put in force (`host`) before every transition, so a call judged later (after another call's
 * asynchronous check) still gets its own answer. The hooks also log every question they are asked, for the rules.
 *
 * This module does not import `agentWorld.ts` (which imports it): the types it needs are structural.
 */
import type { CallRef, CheckVerdict } from '../../machines/actors.js';
import type { AgentContext } from '../../machines/context.js';
import type { SyncCheck } from '../../machines/toolkit.js';

export type HookName = 'validate' | 'authorize';
/** What the host's hook says for one call: passes, refuses, cannot answer, or throws (a hook the runtime distrusts). */
export type HookAnswer = 'pass' | 'refuse' | 'unavailable' | 'throws';
export type HookAnswers = Record<HookName, HookAnswer>;

/** The answers in force (by call id) and the questions asked during the current transition. */
export const host = {
  answers: {} as Record<string, HookAnswers>,
  /** `recheck`: asked by the re-check right before the write (`recheckNowWorld.ts`), not by vetting. */
  asked: [] as { callId: string; hook: HookName; args: string; recheck?: boolean }[],
};

/** A refusal names the call it is for, so a verdict read for another call shows. */
export function refusalOf(hook: HookName, callId: string): Extract<CheckVerdict, { ok: false }> {
  return hook === 'validate'
    ? { ok: false, code: 'conflict', summary: `validate refused ${callId}: the room is closed that day` }
    : { ok: false, code: 'permission_denied', summary: `authorize refused ${callId}: executive rooms only` };
}

/** The booking tool's synchronous hook: the harness's answer for this call (a call it never planned passes). */
export function syncHook(hook: HookName): SyncCheck {
  return (call: CallRef, _context: AgentContext): CheckVerdict => {
    host.asked.push({ callId: call.callId, hook, args: JSON.stringify(call.args) });
    const answer = host.answers[call.callId]?.[hook] ?? 'pass';
    if (answer === 'throws') throw new Error(`${hook} hook crashed`);
    if (answer === 'unavailable')
      return { ok: false, code: 'unavailable', summary: `${hook} of ${call.callId} timed out` };
    return answer === 'pass' ? { ok: true } : refusalOf(hook, call.callId);
  };
}

const PASS: HookAnswers = { validate: 'pass', authorize: 'pass' };
/** The answers one booking may get: both pass, or one hook refuses, cannot answer, or throws. */
export const ONE_BOOKING: [string, HookAnswers][] = [
  ['hooks pass', PASS],
  ['validate refuses', { validate: 'refuse', authorize: 'pass' }],
  ['validate unavailable', { validate: 'unavailable', authorize: 'pass' }],
  ['validate throws', { validate: 'throws', authorize: 'pass' }],
  ['authorize refuses', { validate: 'pass', authorize: 'refuse' }],
  ['authorize unavailable', { validate: 'pass', authorize: 'unavailable' }],
];
/** Two bookings of one batch: one refused and the other passing, each way, and both refused by different hooks. */
export const TWO_BOOKINGS: [string, HookAnswers, HookAnswers][] = [
  ['both pass', PASS, PASS],
  ['first validate refuses', { validate: 'refuse', authorize: 'pass' }, PASS],
  ['second validate refuses', PASS, { validate: 'refuse', authorize: 'pass' }],
  ['first authorize refuses', { validate: 'pass', authorize: 'refuse' }, PASS],
  ['second authorize refuses', PASS, { validate: 'pass', authorize: 'refuse' }],
];

/** The harness's verdict for the shadow: what the gate must decide, and whether a refusal is one that may pass later. */
export function shadowVerdict(answer: HookAnswer): { verdict: 'pass' | 'reject'; unanswered: boolean } {
  return {
    verdict: answer === 'pass' ? 'pass' : 'reject',
    unanswered: answer === 'unavailable' || answer === 'throws',
  };
}
