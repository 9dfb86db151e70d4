/**
 * The mandate gate's steps, and the stop for a denied call proposed again. The model is told why a call does not fit
 * the mandate (the rule's own summary), so it can correct the arguments; it is never told the mandate can change.
 */
import { mandateCheck } from '../lib/toolRules.js';
import { earlierDenial } from '../guards/mandate.js';
import { gateEntry } from '../journal.js';
import type { Step } from './step.js';
import { stop } from './stop.js';
import { current, pass, refuse } from './vetting.js';

export const passMandate: Step = (context, event, toolkit) => {
  const call = current(context);
  const check = mandateCheck(context, call, toolkit.rules(call.tool));
  return { audit: [pass(context, event, 'mandate', check.summary)] };
};

export const refuseForMandate: Step = (context, event, toolkit) => {
  const call = current(context);
  const check = mandateCheck(context, call, toolkit.rules(call.tool));
  const summary = check.ok ? 'the arguments do not fit the mandate' : `${check.summary} [${check.code}]`;
  return refuse(context, event, 'mandate', 'outside_mandate', `outside what the user asked for: ${summary}`);
};

/** A call the host denied (permission or mandate) was proposed again: the task stops with that denial's code. */
export const stopForRepeatedDenial: Step = (context, event) => {
  const call = current(context);
  const denial = earlierDenial(context, call);
  const code = denial?.code === 'outside_mandate' ? 'outside_mandate' : 'permission_denied';
  const gate = code === 'outside_mandate' ? 'mandate' : 'permission';
  const message = `${call.tool} was proposed again with the same arguments after the host denied it (${denial?.code ?? code}); a denial is final for that call`;
  const result = stop(context, event, 'failed', { code, message }, { skipCode: code });
  return {
    ...result,
    audit: [
      gateEntry(context, event, { gate, decision: 'stop', call, code, summary: message }),
      ...(result.audit ?? []),
    ],
  };
};
