/**
 * The re-check right before a write runs. Whatever changed since the call was vetted and confirmed (its stored
 * arguments, the business facts, the principal's scopes, the tool's rules, the rate limit) refuses the write, which
 * then never runs; the model is told why and may propose again, which asks for a new confirmation. A confirmation
 * that no longer satisfies the tool's rule is asked for again.
 */
import type { MachineEvent } from '../actors.js';
import type { AgentContext } from '../context.js';
import { recheckVerdicts, recheckNow } from '../guards/recheck.js';
import { nextCall, updateCall } from '../lib/batch.js';
import { debit } from '../lib/budget.js';
import { startWrite, startedEntry } from './execution.js';
import { confirmationNeed } from '../lib/toolRules.js';
import { auditEntry } from '../journal.js';
import type { Toolkit } from '../toolkit.js';
import { askFor } from './confirmation.js';
import { holdRefusedResend } from './review.js';
import type { Step, StepResult } from './step.js';
import { stopForBudget } from './stop.js';
import { current, missingScopes, refuse } from './vetting.js';

/** The write is next: it becomes the current call, and is checked again before anything runs. */
export const startRecheck: Step = (context) => {
  const call = nextCall(context.batch)!;
  return {
    context: { batch: { ...updateCall(context.batch!, call.callId, { phase: 'rechecking' }), current: call.callId } },
  };
};

/** Entering `rechecking.hooks`: the principal's session and the tool's hooks are asked again. */
export const noteRecheck: Step = (context, event) => {
  const call = current(context);
  return {
    audit: [
      auditEntry(context, event, {
        kind: 'check_started',
        gate: 'recheck',
        callId: call.callId,
        tool: call.tool,
        argsHash: call.argsHash,
      }),
    ],
  };
};

/** The stored arguments no longer hash to what was validated, keyed and confirmed: they never run. */
export const refuseChangedArguments: Step = (context, event) =>
  refuse(
    context,
    event,
    'confirmation',
    'arguments_changed',
    'the arguments about to run are not the ones that were validated and confirmed; the write was not run',
  );

/** The tool's confirmation rule, asked again, wants decisions the call does not hold: ask for them now. */
export const askForFreshConfirmation: Step = (context, event, toolkit) => {
  const call = current(context);
  const need = confirmationNeed(context, call, toolkit.rules(call.tool));
  const updated = { ...call, confirmation: need.requirement, confirmationSummary: need.summary, confirmedBy: null };
  const { pending: _pending, ...result } = askFor(
    { ...context, batch: updateCall(context.batch!, call.callId, updated) },
    event,
    updated,
  );
  return result;
};

/** The first fresh verdict that refuses the write, in the order the chart asks them. */
function refusalOf(context: AgentContext, event: MachineEvent, toolkit: Toolkit): StepResult {
  const output = recheckVerdicts(context, event, toolkit);
  const call = current(context);
  const rules = toolkit.rules(call.tool);
  if (output.principal === null && output.sessionError !== null) {
    return refuse(context, event, 'permission', 'unavailable', `${output.sessionError}; the write was not run`);
  }
  if (output.principal === null)
    return refuse(
      context,
      event,
      'permission',
      'permission_denied',
      `the session of ${context.principal.userId} is no longer valid; the write was not run`,
    );
  if (!rules || !rules.scopes.every((scope) => output.principal!.scopes.includes(scope))) {
    return refuse(
      context,
      event,
      'permission',
      'permission_denied',
      `${missingScopes(output.principal, rules)} now; the write was not run`,
    );
  }
  if (!output.business.ok)
    return refuse(
      context,
      event,
      'business',
      output.business.code,
      `${output.business.summary} (checked again before the write; it was not run)`,
    );
  if (!output.permission.ok) {
    const code = output.permission.code === 'unavailable' ? 'unavailable' : 'permission_denied';
    return refuse(
      context,
      event,
      'permission',
      code,
      `${output.permission.summary} (checked again before the write; it was not run)`,
    );
  }
  if (!output.rate.ok) return refuse(context, event, 'rate', output.rate.code, output.rate.summary);
  return refuse(context, event, 'rate', 'internal_error', 'the re-check refused the write without a reason');
}

export const refuseAtRecheck: Step = (context, event, toolkit) => refusalOf(context, event, toolkit);

/**
 * The gate's own re-check (`recheckNow`), as the event the invoked actor's answer would be: the steps after it then
 * record what they record on the actor's answer (its time, the principal's session, the write's `runAs`).
 */
function answeredNow(context: AgentContext, event: MachineEvent, toolkit: Toolkit): MachineEvent {
  return { type: 'xstate.done.actor.recheck', output: recheckNow(context, event, toolkit) };
}

/** Re-checked by the gate itself and refused: `refuseAtRecheck` on the verdicts it asked. */
export const refuseAtRecheckNow: Step = (context, event, toolkit) =>
  refusalOf(context, answeredNow(context, event, toolkit), toolkit);

/** Re-checked by the gate itself, and the budget ran out meanwhile: `stopForBudget`, as on the actor's answer. */
export const stopForBudgetAtRecheck: Step = (context, event, toolkit) =>
  stopForBudget(context, answeredNow(context, event, toolkit), toolkit);

/** A resend re-checked by the gate itself and passed: `resendWrite`, as on the actor's answer. */
export const resendWriteNow: Step = (context, event, toolkit) =>
  resendWrite(context, answeredNow(context, event, toolkit), toolkit);

/** A reviewer's retry re-checked by the gate itself and refused: `holdRefusedResend`, as on the actor's answer. */
export const holdRefusedResendNow: Step = (context, event, toolkit) =>
  holdRefusedResend(context, answeredNow(context, event, toolkit), toolkit);

/** Re-checked by the gate itself and passed: `startWrite`, as on the actor's answer (run as the principal seen). */
export const startWriteNow: Step = (context, event, toolkit) =>
  startWrite(context, answeredNow(context, event, toolkit), toolkit);

/** The write is sent again with the same key: one more attempt, a retry debited, under the session just seen. */
export const resendWrite: Step = (context, event) => {
  const call = current(context);
  const attempt = call.writeAttempts + 1;
  const runAs = event.type === 'xstate.done.actor.recheck' ? event.output.principal : call.runAs;
  const resent = { ...call, writeAttempts: attempt };
  return {
    context: {
      batch: updateCall(context.batch!, call.callId, {
        phase: 'writing',
        writeAttempts: attempt,
        runAs,
        resendAfter: null,
      }),
      budget: debit(context.budget, { retries: 1 }),
    },
    audit: [startedEntry(context, event, resent, attempt)],
  };
};
