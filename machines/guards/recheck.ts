/**
 * The re-check right before a write runs (after any confirmation wait, and after a restart): the arguments that will
 * run are hashed again and must be the ones validated, keyed and confirmed; the confirmation must still satisfy the
 * tool's rule; and the hooks' fresh verdicts (the principal's current scopes, business validation, resource
 * permission, the rate limit) must all pass. Schema, mandate and budget are asked again by their own guards.
 *
 * A tool whose re-check asks nothing that waits (`recheckNow`: synchronous hooks or none, no rate limit, a session the
 * host does not refresh) is re-checked by these guards themselves, in the step that reaches the write: the verdicts
 * are then those the invoked actor would give (`recheckNow` below), with no child actor, timer or AbortController.
 */
import type { CheckVerdict, MachineEvent, RecheckActorOutput } from '../actors.js';
import { outputOf } from '../actors.js';
import type { AgentContext } from '../context.js';
import { currentCall } from '../lib/batch.js';
import { isAsyncHook, syncVerdict } from '../lib/hooks.js';
import { timeOf } from '../journal.js';
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

const PASS: CheckVerdict = { ok: true };

/** The current call's tool is re-checked by the gate itself (see `ToolRules.recheckNow`). */
export function canRecheckNow(context: AgentContext, toolkit: Toolkit): boolean {
  const call = currentCall(context.batch);
  if (call === undefined || toolkit.rules(call.tool)?.recheckNow !== true) return false;
  // A hook the gate could not ask (an asynchronous one) is never taken for a pass, whatever the flag says.
  return !isAsyncHook(toolkit, call.tool, 'validate') && !isAsyncHook(toolkit, call.tool, 'authorize');
}

/**
 * The re-check's verdicts asked now, as the invoked actor (`src/runtime/actors/recheck.ts`) gives them when nothing
 * it asks waits: the principal as at start (the host refreshes no session), business validation (not on a resend),
 * then resource permission once it passed, each the tool's synchronous hook or a pass; no rate limit. Stamped with
 * the time of the step's event. Each hook is asked once per call object (`syncVerdict`).
 */
export function recheckNow(context: AgentContext, event: MachineEvent, toolkit: Toolkit): RecheckActorOutput {
  const call = currentCall(context.batch)!;
  const resend = call.resendAfter !== null;
  const business = resend ? PASS : (syncVerdict(context, call, toolkit, 'validate') ?? PASS);
  const permission = business.ok ? (syncVerdict(context, call, toolkit, 'authorize') ?? PASS) : PASS;
  const at = timeOf(context, event);
  const { principal } = context;
  return { callId: call.callId, at, principal, sessionError: null, business, permission, rate: PASS, durationMs: 0 };
}

/**
 * The verdicts the guards judge: the invoked actor's, on its done event for the current call; else the gate's own
 * (`recheckNow`), for a tool it re-checks itself. XState hands eventless transitions the event of their macrostep: a
 * re-check done event of an earlier write may still be the event when the gate re-checks the next one, and must not
 * answer for it. The actor's answer for the current call is always the one judged, even for a tool the gate would
 * re-check itself (a task saved in `rechecking.hooks` or `resending` and taken up by a host without a session refresh
 * or a rate limit): a refusal it gave is not asked again until it passes.
 */
export function recheckVerdicts(context: AgentContext, event: MachineEvent, toolkit: Toolkit): RecheckActorOutput {
  if (event.type === 'xstate.done.actor.recheck') {
    const output = outputOf(event, 'recheck');
    if (output.callId === currentCall(context.batch)?.callId || !canRecheckNow(context, toolkit)) return output;
  }
  return recheckNow(context, event, toolkit);
}

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

  /** Everything the re-check asks of the current call answers at once: the gate asks it itself (`recheckNow`). */
  canRecheckNow: (context, _event, toolkit) => canRecheckNow(context, toolkit),

  /** The principal's session, as the host sees it now, still holds every scope the tool requires. */
  holdsScopesNow: (context, event, toolkit) => {
    const call = currentCall(context.batch);
    const principal = recheckVerdicts(context, event, toolkit).principal;
    const rules = call && toolkit.rules(call.tool);
    return principal !== null && rules !== undefined && rules.scopes.every((scope) => principal.scopes.includes(scope));
  },

  isStillBusinessValid: (context, event, toolkit) => recheckVerdicts(context, event, toolkit).business.ok,

  isStillAuthorized: (context, event, toolkit) => recheckVerdicts(context, event, toolkit).permission.ok,

  isWithinRateLimit: (context, event, toolkit) => recheckVerdicts(context, event, toolkit).rate.ok,

  /** The write about to be sent again was held for review (a reviewer asked to retry it). */
  isResendAfterReview: (context) => currentCall(context.batch)?.resendAfter === 'review',
} satisfies Record<string, Guard>;
