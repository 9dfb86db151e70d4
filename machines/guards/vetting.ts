/**
 * Gates (b)-(d), asked of one call at a time (`batch.current`): schema, business validation, permission of the
 * trusted principal. The schema and scope checks are pure and answered here; business validation and resource
 * permission are the tool's hooks, run by the invoked `validating` and `authorizing` states and judged on their
 * done events.
 */
import { outputOf } from '../actors.js';
import { checkArguments, taskRef } from '../lib/arguments.js';
import { callKey, currentCall } from '../lib/batch.js';
import { isConfirmationRuleSound } from '../lib/toolRules.js';
import type { Guard } from './guard.js';

export const vettingGuards = {
  isEveryCallVetted: (context) => context.batch?.calls.every((c) => c.phase !== 'vetting') ?? true,

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
    const call = currentCall(context.batch);
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
  doArgumentsMatchSchema: (context, _event, toolkit) => {
    const call = currentCall(context.batch);
    return call !== undefined && checkArguments(call.tool, toolkit.rules(call.tool), call.args, taskRef(context)).ok;
  },

  /** The tool declares business validation (gate (c) then runs its hook in `validating`). */
  hasBusinessRules: (context, _event, toolkit) => {
    const call = currentCall(context.batch);
    return call !== undefined && toolkit.rules(call.tool)?.validates === true;
  },

  /** Gate (c): the tool's business validation said `{ ok: true }`. */
  isBusinessValid: (_context, event) => outputOf(event, 'validate').verdict.ok,

  /** Gate (d), scopes: the task's principal holds every scope the installed tool requires. */
  hasScopesForTool: (context, _event, toolkit) => {
    const call = currentCall(context.batch);
    const rules = call && toolkit.rules(call.tool);
    return rules !== undefined && rules.scopes.every((scope) => context.principal.scopes.includes(scope));
  },

  /** The tool declares a resource-level permission check (gate (d) then runs its hook in `authorizing`). */
  hasResourcePolicy: (context, _event, toolkit) => {
    const call = currentCall(context.batch);
    return call !== undefined && toolkit.rules(call.tool)?.authorizes === true;
  },

  /** Gate (d), resource: the tool's authorization said `{ ok: true }` for these arguments and this principal. */
  isAuthorized: (_context, event) => outputOf(event, 'authorize').verdict.ok,

  /** The tool's confirmation rule decides something usable for these arguments (never a throw or a promise). */
  isConfirmationRuleSound: (context, _event, toolkit) => {
    const call = currentCall(context.batch);
    return call !== undefined && isConfirmationRuleSound(context, call, toolkit.rules(call.tool));
  },
} satisfies Record<string, Guard>;
