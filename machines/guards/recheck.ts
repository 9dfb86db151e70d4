/**
 * The re-check right before a write runs (after any confirmation wait, and after a restart): the arguments that will
 * run are hashed again and must be the ones validated, keyed and confirmed; the confirmation must still satisfy the
 * tool's rule; and the hooks' fresh verdicts (the principal's current scopes, business validation, resource
 * permission, the rate limit) must all pass. Schema, mandate and budget are asked again by their own guards.
 */
import type { MachineEvent } from '../actors.js';
import { outputOf } from '../actors.js';
import type { AgentContext } from '../context.js';
import { currentCall } from '../lib/batch.js';
import { argumentsHash, idempotencyKeyFor } from '../lib/hashing.js';
import { confirmationRequirement, decisionsSatisfy } from '../lib/toolRules.js';
import type { Toolkit } from '../toolkit.js';
import type { Guard } from './guard.js';

/** The current call's arguments still hash to what was validated, keyed and (if so) confirmed. */
export function argumentsIntact(context: AgentContext, toolkit: Toolkit): boolean {
  const call = currentCall(context.batch);
  if (!call?.argsHash) return false;
  if (argumentsHash(toolkit.sha256, call.args) !== call.argsHash) return false;
  if (
    call.effect === 'write' &&
    call.idempotencyKey !== idempotencyKeyFor(toolkit.sha256, context.taskId, call.tool, call.argsHash)
  )
    return false;
  return call.confirmedBy === null || call.confirmedBy.argsHash === call.argsHash;
}

const hooks = (event: MachineEvent) => outputOf(event, 'recheck');

export const recheckGuards = {
  areArgumentsIntact: (context, _event, toolkit) => argumentsIntact(context, toolkit),

  /** The tool's confirmation rule, asked again now, is satisfied by the decisions the call holds. */
  isConfirmationStillSufficient: (context, _event, toolkit) => {
    const call = currentCall(context.batch);
    if (!call) return false;
    const requirement = confirmationRequirement(context, call, toolkit.rules(call.tool));
    if (requirement === null) return true;
    return (
      call.confirmedBy !== null && decisionsSatisfy(requirement, call.confirmedBy.decisions, context.principal.userId)
    );
  },

  /** The principal's session, as the host sees it now, still holds every scope the tool requires. */
  holdsScopesNow: (context, event, toolkit) => {
    const call = currentCall(context.batch);
    const principal = hooks(event).principal;
    const rules = call && toolkit.rules(call.tool);
    return principal !== null && rules !== undefined && rules.scopes.every((scope) => principal.scopes.includes(scope));
  },

  isStillBusinessValid: (_context, event) => hooks(event).business.ok,

  isStillAuthorized: (_context, event) => hooks(event).permission.ok,

  isWithinRateLimit: (_context, event) => hooks(event).rate.ok,

  /** The write about to be sent again was held for review (a reviewer asked to retry it). */
  isResendAfterReview: (context) => currentCall(context.batch)?.resendAfter === 'review',
} satisfies Record<string, Guard>;
