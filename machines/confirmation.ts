/**
 * Confirmation: a persisted record bound to exactly what will run (tool, arguments hash, user, policy version,
 * absolute expiry). Only a `user.confirmed` event from the host API can satisfy it. Pure.
 */
import type { HostEvent } from './agentEvents.js';
import type { AgentContext, CallState, PendingConfirmation } from './agentTypes.js';

type ConfirmEvent = Extract<HostEvent, { type: 'user.confirmed' }>;

export type ConfirmationRefusal =
  | 'unknown_confirmation'
  | 'wrong_user'
  | 'confirmation_expired'
  | 'policy_changed'
  | 'arguments_changed';

export function newConfirmation(context: AgentContext, call: CallState, at: number): PendingConfirmation {
  const request = call.confirmationRequests + 1;
  const index = context.batch?.calls.findIndex((c) => c.callId === call.callId) ?? 0;
  return {
    id: `${context.taskId}/t${context.turn}.c${index + 1}.r${request}`,
    taskId: context.taskId,
    callId: call.callId,
    tool: call.tool,
    argsHash: call.argsHash ?? '',
    args: call.redactedArgs,
    summary: call.confirmationSummary ?? `Run ${call.tool}`,
    userId: context.principal.userId,
    policyVersion: context.policy.version,
    requestedAt: at,
    expiresAt: at + context.policy.confirmationTtlMs,
    request,
  };
}

/** Why a confirm event does not satisfy the pending confirmation, checked in this order; null when it does. */
export function judgeConfirmation(
  pending: PendingConfirmation | null,
  event: ConfirmEvent,
): ConfirmationRefusal | null {
  if (!pending || event.confirmationId !== pending.id) return 'unknown_confirmation';
  if (event.userId !== pending.userId) return 'wrong_user';
  if (event.at >= pending.expiresAt) return 'confirmation_expired';
  if (event.policyVersion !== pending.policyVersion) return 'policy_changed';
  if (event.argsHash !== pending.argsHash) return 'arguments_changed';
  return null;
}

export const REFUSAL_MESSAGES: Record<ConfirmationRefusal, string> = {
  unknown_confirmation: 'no pending confirmation has this id',
  wrong_user: 'this confirmation can only be given by the user it was asked of',
  confirmation_expired: 'the confirmation expired before it was given; it is asked again',
  policy_changed: 'the host policy changed since the confirmation was asked; it is asked again',
  arguments_changed: 'the confirmed arguments differ from the arguments that would run; it is asked again',
};

/** Refusals after which the same call is asked again with a fresh confirmation id. */
export function asksAgain(refusal: ConfirmationRefusal): boolean {
  return refusal === 'confirmation_expired' || refusal === 'policy_changed' || refusal === 'arguments_changed';
}
