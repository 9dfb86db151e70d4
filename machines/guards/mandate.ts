/**
 * The mandate gate and the memory of denials: a call must fit what the user asked for (the task's mandate, by the
 * tool's own rule), and a call the host already denied (permission or mandate) is not asked again.
 */
import { callKey } from '../lib/batch.js';
import { judgedCall } from '../lib/judged.js';
import { mandateCheck } from '../lib/toolRules.js';
import type { AgentContext, CallState } from '../context.js';
import type { Guard } from './guard.js';

/** The denial recorded for `call` (same tool, same arguments hash), if any. */
export function earlierDenial(
  context: AgentContext,
  call: CallState | undefined,
): { key: string; code: string } | undefined {
  if (!call?.argsHash) return undefined;
  const key = callKey(call.tool, call.argsHash);
  return context.denied.find((denial) => denial.key === key);
}

export const mandateGuards = {
  /** The judged call's arguments (validated) fit the task's mandate (every call does when the task has none). */
  isWithinMandate: (context, _event, toolkit) => {
    const call = judgedCall(context, toolkit);
    return call !== undefined && mandateCheck(context, call, toolkit.rules(call.tool)).ok;
  },

  /** The host denied this very call before in this task (permission or mandate). */
  isRepeatOfDeniedCall: (context, _event, toolkit) =>
    context.unwinding === null && earlierDenial(context, judgedCall(context, toolkit)) !== undefined,

  /** The policy ends the task when a denied call is proposed again (the default), rather than refusing it again. */
  stopsOnRepeatedDenial: (context) => context.policy.onRepeatedDenial === 'stop',
} satisfies Record<string, Guard>;
