/**
 * Gates (b)-(d), asked of one call at a time (the call being judged: `lib/judged.ts`): schema, business validation,
 * permission of the trusted principal. The schema and scope checks are pure and answered here; business validation
 * and resource permission are the tool's hooks: a synchronous one (`hooks: 'sync'`) is asked by the guard itself
 * (`lib/hooks.ts`), an asynchronous one runs in the invoked `validating` or `authorizing` state and is judged on its
 * done event.
 */
import { invokedVerdict, isAsyncHook, syncVerdict } from '../lib/hooks.js';
import { callKey } from '../lib/batch.js';
import { judge, judgedCall, nextToVet, pendingCall } from '../lib/judged.js';
import { isConfirmationRuleSound } from '../lib/toolRules.js';
import type { Guard } from './guard.js';

export const vettingGuards = {
  // Asked at every microstep of vetting: no callback (a new closure per ask).
  isEveryCallVetted: (context) => nextToVet(context) === undefined,

  /** Some call repeats one proposed since the last new observation (same tool, same arguments hash). */
  isRepeatingWithoutNewObservation: (context) =>
    // A stop's compensations are the host's calls, not a proposal that could go round.
    context.unwinding === null &&
    (context.batch?.calls.some(
      (c) => c.argsHash !== null && context.proposedSinceNew.includes(callKey(c.tool, c.argsHash)),
    ) ??
      false),

  /** The tool is offered this turn (the host's offer rule), or there is no rule; a stop's undo is the host's call. */
  isToolOffered: (context) => {
    const call = pendingCall(context);
    // A sub-task may use only the subset of tools its parent gave it (undoing its own writes aside).
    if (
      call !== undefined &&
      context.tools !== null &&
      context.unwinding === null &&
      !context.tools.includes(call.tool)
    )
      return false;
    return (
      context.offered === null ||
      context.unwinding !== null ||
      (call !== undefined && context.offered.includes(call.tool))
    );
  },

  /** Gate (b): the installed tool's input schema accepts the arguments as they are. */
  doArgumentsMatchSchema: (context, _event, toolkit) => judge(context, toolkit)?.schemaOk ?? false,

  /** The tool's business validation answers asynchronously: gate (c) runs it in `validating`. */
  hasAsyncBusinessRules: (context, _event, toolkit) => {
    const call = pendingCall(context);
    return call !== undefined && isAsyncHook(toolkit, call.tool, 'validate');
  },

  /**
   * Gate (c): the tool's business validation said `{ ok: true }`: its invoked state's answer, or its synchronous hook
   * asked now; a tool without business rules passes.
   */
  isBusinessValid: (context, event, toolkit) => {
    const answered = invokedVerdict(context, event, 'validate');
    if (answered) return answered.ok;
    const call = judgedCall(context, toolkit);
    return call !== undefined && (syncVerdict(context, call, toolkit, 'validate')?.ok ?? true);
  },

  /** Gate (d), scopes: the task's principal holds every scope the installed tool requires. */
  hasScopesForTool: (context, _event, toolkit) => {
    const call = pendingCall(context);
    const rules = call && toolkit.rules(call.tool);
    return rules !== undefined && rules.scopes.every((scope) => context.principal.scopes.includes(scope));
  },

  /** The tool's resource-level permission answers asynchronously: gate (d) runs it in `authorizing`. */
  hasAsyncResourcePolicy: (context, _event, toolkit) => {
    const call = pendingCall(context);
    return call !== undefined && isAsyncHook(toolkit, call.tool, 'authorize');
  },

  /**
   * Gate (d), resource: the tool's authorization said `{ ok: true }` for these arguments and this principal: its
   * invoked state's answer, or its synchronous hook asked now; a tool without a resource policy passes.
   */
  isAuthorized: (context, event, toolkit) => {
    const answered = invokedVerdict(context, event, 'authorize');
    if (answered) return answered.ok;
    const call = judgedCall(context, toolkit);
    return call !== undefined && (syncVerdict(context, call, toolkit, 'authorize')?.ok ?? true);
  },

  /** The tool's confirmation rule decides something usable for these arguments (never a throw or a promise). */
  isConfirmationRuleSound: (context, _event, toolkit) => {
    const call = judgedCall(context, toolkit);
    return call !== undefined && isConfirmationRuleSound(context, call, toolkit.rules(call.tool));
  },
} satisfies Record<string, Guard>;
