/**
 * Gate (f), confirmation: a persisted request bound to tool, arguments hash, user, policy version and an absolute
 * expiry, decided by the task's user or (four eyes) by approvers other than the requester who hold the approver
 * scope. Only a `user.confirmed` event from the host API can satisfy it, and only if every check below holds. The
 * chart names these checks; `confirmationRefusal` derives the refusal code from the same functions, so each check
 * exists once.
 */
import { findCall, nextCall, nextStep } from '../lib/batch.js';
import type { ConfirmationRefusal } from '../failures.js';
import type { MachineEvent } from '../actors.js';
import type { AgentContext, CallState } from '../context.js';
import { type Guard, eventOf } from './guard.js';

const confirm = (event: MachineEvent) => eventOf(event, 'user.confirmed');
const pendingCall = (context: AgentContext): CallState | undefined =>
  context.pendingConfirmation ? findCall(context.batch, context.pendingConfirmation.callId) : undefined;

export const confirmationGuards = {
  needsConfirmation: (context) => nextStep(context.batch)?.needsConfirmation === true,

  /** The call holds a granted confirmation, given for exactly the arguments it now has. */
  isConfirmedForExactArguments: (context) => {
    const call = nextCall(context.batch);
    return call?.confirmedBy != null && call.confirmedBy.argsHash === call.argsHash;
  },

  isConfirmationForPendingCall: (context, event) =>
    context.pendingConfirmation !== null && confirm(event).confirmationId === context.pendingConfirmation.id,

  /** A confirmation the requester gives: only the task's user. (Approvals are checked by the next three.) */
  isFromConfirmingUser: (context, event) =>
    context.pendingConfirmation !== null &&
    (context.pendingConfirmation.approverScope !== null ||
      confirm(event).userId === context.pendingConfirmation.userId),

  /** Four eyes: the requester never approves their own request. */
  isNotSelfApproval: (context, event) =>
    context.pendingConfirmation?.approverScope === null ||
    confirm(event).userId !== context.pendingConfirmation?.userId,

  /** The approver's session (from the host, not the request) holds the approver scope. */
  holdsApproverScope: (context, event) => {
    const scope = context.pendingConfirmation?.approverScope;
    return scope === null || (scope !== undefined && confirm(event).scopes.includes(scope));
  },

  /** Each approver decides once: two approvals need two people. */
  isFirstDecisionOfApprover: (context, event) =>
    !(context.pendingConfirmation?.approvals ?? []).some((decision) => decision.userId === confirm(event).userId),

  isConfirmationUnexpired: (context, event) =>
    context.pendingConfirmation !== null && confirm(event).at < context.pendingConfirmation.expiresAt,

  isUnderSamePolicy: (context, event) => confirm(event).policyVersion === context.pendingConfirmation?.policyVersion,

  doesConfirmationMatchArguments: (context, event) => confirm(event).argsHash === context.pendingConfirmation?.argsHash,

  /** This decision is the last one needed (always, for the requester's confirmation). */
  completesApprovals: (context) => {
    const pending = context.pendingConfirmation;
    return pending !== null && pending.approvals.length + 1 >= pending.approvalsRequired;
  },

  /** The pending request (a call's or a plan's) is not yet the last one the policy allows. */
  canAskConfirmationAgain: (context) =>
    (context.pendingConfirmation?.request ?? Infinity) < context.policy.maxConfirmationRequests,

  /** The tool's policy ends the task when this confirmation is rejected. */
  cancelsOnReject: (context) => pendingCall(context)?.confirmation?.onReject === 'cancel',

  /** The tool's policy ends the task when nobody confirms in time. */
  cancelsOnExpiry: (context) => pendingCall(context)?.confirmation?.onExpiry === 'cancel',

  /** The requester withdrawing, or an approver (holding the scope) turning it down. */
  isRejectionOfPendingConfirmation: (context, event) =>
    event.type === 'user.rejected' && rejectionRefusal(context, event) === null,

  hasPendingConfirmationExpired: (context, event) =>
    event.type === 'timer.confirmationExpired' &&
    event.confirmationId === context.pendingConfirmation?.id &&
    event.at >= context.pendingConfirmation.expiresAt,
} satisfies Record<string, Guard>;

/** The checks a confirm event must pass, in the order the chart asks them, with the refusal each one gives. */
export const CONFIRMATION_CHECKS = [
  ['isConfirmationForPendingCall', 'unknown_confirmation'],
  ['isFromConfirmingUser', 'wrong_user'],
  ['isNotSelfApproval', 'self_approval'],
  ['holdsApproverScope', 'missing_approver_scope'],
  ['isFirstDecisionOfApprover', 'already_approved'],
  ['isConfirmationUnexpired', 'confirmation_expired'],
  ['isUnderSamePolicy', 'policy_changed'],
  ['doesConfirmationMatchArguments', 'arguments_changed'],
] as const satisfies readonly (readonly [keyof typeof confirmationGuards, ConfirmationRefusal])[];

/** Why a confirm event does not satisfy the pending confirmation (the first check that fails), or null. */
export function confirmationRefusal(context: AgentContext, event: MachineEvent): ConfirmationRefusal | null {
  for (const [check, refusal] of CONFIRMATION_CHECKS) {
    if (!confirmationGuards[check](context, event)) return refusal;
  }
  return null;
}

/**
 * Why a reject event neither withdraws nor turns down the pending confirmation, or null. A "no" is taken until the
 * request is settled, also past its expiry: an expiry keeps a late "yes" from authorizing anything under stale
 * circumstances, and a "no" authorizes nothing.
 */
export function rejectionRefusal(context: AgentContext, event: MachineEvent): ConfirmationRefusal | null {
  const pending = context.pendingConfirmation;
  if (event.type !== 'user.rejected') return null;
  if (pending === null || event.confirmationId !== pending.id) return 'unknown_confirmation';
  if (event.userId === pending.userId) return null;
  if (pending.approverScope === null) return 'wrong_user';
  return event.scopes.includes(pending.approverScope) ? null : 'missing_approver_scope';
}

/**
 * Refusals after which the request is asked again with a fresh confirmation id: it can never be granted any more
 * (it expired, or the host now confirms under another policy version). A confirmation for other arguments is not
 * one of them: the request stands unchanged, and asking again would show the very same arguments while spending
 * one of the policy's requests (a stale page reloads instead).
 */
export function asksAgain(refusal: ConfirmationRefusal): boolean {
  return refusal === 'confirmation_expired' || refusal === 'policy_changed';
}
