/**
 * Gate (f), confirmation: a persisted request bound to tool, arguments hash, user, policy version and an absolute
 * expiry. Only a `user.confirmed` event from the host API can satisfy it, and only if every check below holds.
 * The chart names these checks; `confirmationRefusal` derives the refusal code from the same functions, so each
 * check exists once.
 */
import { findCall, nextStep, nextCall } from '../lib/batch.js';
import type { ConfirmationRefusal } from '../failures.js';
import type { MachineEvent } from '../actors.js';
import type { AgentContext } from '../context.js';
import { type Guard, eventOf } from './guard.js';

const confirm = (event: MachineEvent) => eventOf(event, 'user.confirmed');

export const confirmationGuards = {
  needsConfirmation: (context) => nextStep(context.batch)?.needsConfirmation === true,

  isConfirmedForExactArguments: (context) => nextCall(context.batch)?.confirmedBy != null,

  isConfirmationForPendingCall: (context, event) =>
    context.pendingConfirmation !== null && confirm(event).confirmationId === context.pendingConfirmation.id,

  isFromConfirmingUser: (context, event) => confirm(event).userId === context.pendingConfirmation?.userId,

  isConfirmationUnexpired: (context, event) =>
    context.pendingConfirmation !== null && confirm(event).at < context.pendingConfirmation.expiresAt,

  isUnderSamePolicy: (context, event) => confirm(event).policyVersion === context.pendingConfirmation?.policyVersion,

  doesConfirmationMatchArguments: (context, event) => confirm(event).argsHash === context.pendingConfirmation?.argsHash,

  canAskConfirmationAgain: (context) => {
    const call = context.pendingConfirmation && findCall(context.batch, context.pendingConfirmation.callId);
    return (call?.confirmationRequests ?? Infinity) < context.policy.maxConfirmationRequests;
  },

  isRejectionOfPendingConfirmation: (context, event) =>
    event.type === 'user.rejected' &&
    event.confirmationId === context.pendingConfirmation?.id &&
    event.userId === context.pendingConfirmation.userId,

  hasPendingConfirmationExpired: (context, event) =>
    event.type === 'timer.confirmationExpired' &&
    event.confirmationId === context.pendingConfirmation?.id &&
    event.at >= context.pendingConfirmation.expiresAt,
} satisfies Record<string, Guard>;

/** The checks a confirm event must pass, in the order the chart asks them, with the refusal each one gives. */
export const CONFIRMATION_CHECKS = [
  ['isConfirmationForPendingCall', 'unknown_confirmation'],
  ['isFromConfirmingUser', 'wrong_user'],
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

/** Refusals after which the same call is asked again with a fresh confirmation id. */
export function asksAgain(refusal: ConfirmationRefusal): boolean {
  return refusal === 'confirmation_expired' || refusal === 'policy_changed' || refusal === 'arguments_changed';
}
