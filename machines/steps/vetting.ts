/**
 * Vetting, one call at a time (the call being judged: the current one, else the next still to vet): each gate's
 * decision is audited; a refused call is finished with its observation at once, a call that passes every gate is
 * `ready` to run. The gates of one call are one transition of `vetting.judging`: its steps run in gate order.
 */
import type { MachineEvent } from '../actors.js';
import type { AgentContext, CallState, GateName, Principal } from '../context.js';
import { checkArguments } from '../lib/arguments.js';
import { bounded, type Step, type StepResult } from './step.js';
import { callKey, finishCall, rejection, updateCall } from '../lib/batch.js';
import { argumentsHash } from '../lib/hashing.js';
import { judge, nextToVet, pendingCall } from '../lib/judged.js';
import { invokedVerdict, syncVerdict } from '../lib/hooks.js';
import { confirmationNeed } from '../lib/toolRules.js';
import { CONTEXT_BOUNDS } from '../context.js';
import { auditEntry, gateEntry } from '../journal.js';
import type { ToolRules } from '../toolkit.js';

export function current(context: AgentContext): CallState {
  const call = pendingCall(context);
  if (!call) throw new Error('no call is being vetted');
  return call;
}

/**
 * Finishes the current call with a refusal at `gate`, audited. A refusal at the permission or mandate gate is
 * remembered (tool + arguments hash), so that the same call proposed again is recognised as a repeated denial.
 */
export function refuse(
  context: AgentContext,
  event: MachineEvent,
  gate: GateName,
  code: string,
  summary: string,
  call = current(context),
): StepResult {
  // Only a definite denial is final: a check that could not answer (`unavailable`) may pass next time.
  const remember = (code === 'permission_denied' || code === 'outside_mandate') && call.argsHash !== null;
  const key = remember ? callKey(call.tool, call.argsHash!) : null;
  const denied =
    key && !context.denied.some((d) => d.key === key)
      ? bounded(context.denied, [{ key, code }], CONTEXT_BOUNDS.denied)
      : context.denied;
  return {
    context: { batch: finishCall(context.batch!, call.callId, rejection(call, code, summary, gate)), denied },
    audit: [gateEntry(context, event, { gate, decision: 'reject', call, code, summary })],
  };
}

export function pass(
  context: AgentContext,
  event: MachineEvent,
  gate: GateName,
  summary: string,
  call = current(context),
) {
  return gateEntry(context, event, { gate, decision: 'pass', call, code: null, summary });
}

/** The call being judged becomes the current one: a hook of an invoked state is asked about it. */
export const takeNextCall: Step = (context) => {
  const call = nextToVet(context);
  return call ? { context: { batch: { ...context.batch!, current: call.callId } } } : {};
};

/** The tool is installed but not offered in this step of the task: refused before its arguments are looked at. */
export const refuseNotOffered: Step = (context, event) => {
  const call = current(context);
  const offered = context.offered?.length ? context.offered.join(', ') : 'none';
  return refuse(
    context,
    event,
    'protocol',
    'not_offered',
    `${call.tool} is not offered in this step (offered: ${offered})`,
  );
};

/** Gate (b) refused the arguments. They are hashed as proposed, so a repeat of them is still seen as a loop. */
export const refuseForSchema: Step = (context, event, toolkit) => {
  const call = current(context);
  const check = checkArguments(call.tool, toolkit.rules(call.tool), call.args, context);
  const hashed = { ...call, argsHash: argumentsHash(toolkit.sha256, call.args) };
  const code = check.ok ? 'invalid_arguments' : check.code;
  const summary = check.ok ? 'the arguments do not match the input schema' : check.summary;
  const batch = updateCall(context.batch!, call.callId, { argsHash: hashed.argsHash });
  return refuse({ ...context, batch }, event, 'schema', code, summary, hashed);
};

/**
 * Gate (b) passed: from here on the call holds the validated arguments (what will run), their hash, their redacted
 * form, and for a write its idempotency key, derived from task + tool + arguments hash. It is stored as the guards of
 * the transition judged it (`lib/judged.ts`), the very object: the steps after this one see what they saw.
 */
export const acceptArguments: Step = (context, event, toolkit) => {
  const before = current(context);
  // The chart asked `doArgumentsMatchSchema` first; this step does not judge again, it takes the judged value.
  const judged = judge(context, toolkit);
  const vetted = judged?.schemaOk && judged.call.callId === before.callId ? judged.call : before;
  const batch = context.batch!;
  return {
    context: { batch: { ...batch, calls: batch.calls.map((c) => (c.callId === before.callId ? vetted : c)) } },
    audit: [pass(context, event, 'schema', 'arguments match the input schema', vetted)],
  };
};

/** Entering `validating`: the tool's business validation is asked. */
export const noteBusinessCheck: Step = (context, event) => {
  const call = current(context);
  return {
    audit: [
      auditEntry(context, event, {
        kind: 'check_started',
        gate: 'business',
        callId: call.callId,
        tool: call.tool,
        argsHash: call.argsHash,
      }),
    ],
  };
};

/** Gate (c) passed: its hook said `{ ok: true }`, or the tool declares no business rules. */
export const passBusiness: Step = (context, event, toolkit) => {
  const declares = toolkit.rules(current(context).tool)?.validates === true;
  return {
    audit: [pass(context, event, 'business', declares ? 'business rules hold' : 'the tool declares no business rules')],
  };
};

export const refuseForBusiness: Step = (context, event, toolkit) => {
  const verdict =
    invokedVerdict(context, event, 'validate') ?? syncVerdict(context, current(context), toolkit, 'validate');
  if (verdict && !verdict.ok) return refuse(context, event, 'business', verdict.code, verdict.summary);
  return refuse(context, event, 'business', 'unavailable', 'business validation did not answer');
};

/** Entering `authorizing`: the tool's resource-level permission check is asked. */
export const notePermissionCheck: Step = (context, event) => {
  const call = current(context);
  return {
    audit: [
      auditEntry(context, event, {
        kind: 'check_started',
        gate: 'permission',
        callId: call.callId,
        tool: call.tool,
        argsHash: call.argsHash,
      }),
    ],
  };
};

/** Gate (d) refused: the session lacks a scope, or the tool's authorization said no. Retrying cannot help. */
export const refuseForPermission: Step = (context, event, toolkit) => {
  const call = current(context);
  const rules = toolkit.rules(call.tool);
  const hasScopes = rules !== undefined && rules.scopes.every((scope) => context.principal.scopes.includes(scope));
  const verdict =
    invokedVerdict(context, event, 'authorize') ??
    (hasScopes ? syncVerdict(context, call, toolkit, 'authorize') : null);
  if (verdict && !verdict.ok) {
    const { code, summary } = verdict;
    return refuse(context, event, 'permission', code === 'unavailable' ? 'unavailable' : 'permission_denied', summary);
  }
  return refuse(
    context,
    event,
    'permission',
    'permission_denied',
    missingScopes(context.principal, toolkit.rules(call.tool)),
  );
};

/** The tool's confirmation rule could not decide for these arguments: the call is refused, never asked of the weakest. */
export const refuseForConfirmationRule: Step = (context, event) =>
  refuse(
    context,
    event,
    'confirmation',
    'confirmation_rule_failed',
    `the confirmation rule of ${current(context).tool} could not decide who must confirm these arguments; the call was not run`,
  );

export function missingScopes(principal: Principal, rules: ToolRules | undefined): string {
  const missing = (rules?.scopes ?? []).filter((scope) => !principal.scopes.includes(scope));
  return `the session of ${principal.userId} lacks scope ${missing.join(', ')}`;
}

/**
 * Gate (d) passed: the call is ready to run. Whether it needs a human's confirmation is decided now, by the tool's
 * rule over the validated arguments; anything but a plain `false` (a throw, a promise, a truthy value) asks.
 */
export const admitCall: Step = (context, event, toolkit) => {
  const call = current(context);
  const need = confirmationNeed(context, call, toolkit.rules(call.tool));
  return {
    context: {
      batch: {
        ...updateCall(context.batch!, call.callId, {
          phase: 'ready',
          confirmation: need.requirement,
          confirmationSummary: need.summary,
        }),
        current: null,
      },
    },
    audit: [
      pass(context, event, 'permission', `${context.principal.userId} may use ${call.tool} with these arguments`),
    ],
  };
};

/** Every call is judged: the proposals are remembered (a repeat with nothing new observed is a loop). */
export const finishVetting: Step = (context) => {
  const keys = (context.batch?.calls ?? []).flatMap((c) => (c.argsHash ? [callKey(c.tool, c.argsHash)] : []));
  return {
    context: { proposedSinceNew: bounded(context.proposedSinceNew, keys, CONTEXT_BOUNDS.proposedSinceNew, true) },
  };
};
