/**
 * Gate (f): asking a human to confirm exactly what will run, and what their answer does. A refused or stale
 * confirmation changes nothing but the audit (or asks again); only a valid one marks the call confirmed.
 */
import type { MachineEvent } from '../actors.js';
import type { AgentContext, CallState, PendingConfirmation } from '../context.js';
import { CONFIRMATION_REFUSALS } from '../failures.js';
import { confirmationRefusal } from '../guards/confirmation.js';
import { findCall, finishCall, nextCall, rejection, updateCall } from '../lib/batch.js';
import type { AuditEntry, ConfirmationAction } from '../journal.js';
import { auditEntry, timeOf } from '../journal.js';
import { type Step, type StepResult, endWait } from './step.js';

/** A new confirmation request for `call`, bound to its arguments hash, the task's user, the policy, an expiry. */
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

function confirmationEntry(
  context: AgentContext,
  event: MachineEvent,
  action: ConfirmationAction,
  pending: PendingConfirmation,
  userId: string | null,
  code: string | null,
  argsHash = pending.argsHash,
  confirmationId = pending.id,
): AuditEntry {
  return auditEntry(context, event, {
    kind: 'confirmation',
    action,
    confirmationId,
    callId: pending.callId,
    tool: pending.tool,
    argsHash,
    userId,
    code,
    expiresAt: action === 'requested' ? pending.expiresAt : null,
  });
}

function askFor(context: AgentContext, event: MachineEvent, call: CallState): StepResult & { pending: PendingConfirmation } {
  const pending = newConfirmation(context, call, timeOf(context, event));
  return {
    pending,
    context: {
      pendingConfirmation: pending,
      waitingSince: context.waitingSince ?? pending.requestedAt,
      batch: {
        ...updateCall(context.batch!, call.callId, { phase: 'awaitingConfirmation', confirmationRequests: pending.request, confirmedBy: null }),
        current: call.callId,
      },
    },
    audit: [confirmationEntry(context, event, 'requested', pending, null, null)],
  };
}

export const requestConfirmation: Step = (context, event) => {
  const { pending: _pending, ...result } = askFor(context, event, nextCall(context.batch)!);
  return result;
};

export const grantConfirmation: Step = (context, event) => {
  const pending = context.pendingConfirmation!;
  if (event.type !== 'user.confirmed') return {};
  return {
    context: {
      batch: {
        ...updateCall(context.batch!, pending.callId, {
          phase: 'ready',
          confirmedBy: { confirmationId: pending.id, userId: event.userId, at: event.at },
        }),
        current: null,
      },
      pendingConfirmation: null,
      ...endWait(context, event),
    },
    audit: [confirmationEntry(context, event, 'granted', pending, event.userId, null)],
    reply: { accepted: true, code: null, message: 'confirmed; the call runs now' },
  };
};

/** A confirm event that does not satisfy the pending confirmation: audited with the check it failed. */
function refusal(context: AgentContext, event: MachineEvent): Required<Pick<StepResult, 'audit' | 'reply'>> | null {
  if (event.type !== 'user.confirmed') return null;
  const code = confirmationRefusal(context, event) ?? 'unknown_confirmation';
  const pending = context.pendingConfirmation!;
  return {
    audit: [confirmationEntry(context, event, 'refused', pending, event.userId, code, event.argsHash, event.confirmationId)],
    reply: { accepted: false, code, message: `refused: ${CONFIRMATION_REFUSALS[code]}` },
  };
}

export const refuseConfirmation: Step = (context, event) => refusal(context, event) ?? {};

/** Asks again with a fresh confirmation id and expiry (after expiry, a policy change or changed arguments). */
export const askConfirmationAgain: Step = (context, event) => {
  const pending = context.pendingConfirmation!;
  const asked = askFor(context, event, findCall(context.batch, pending.callId)!);
  if (event.type === 'user.confirmed') {
    const refused = refusal(context, event)!;
    return {
      context: asked.context,
      audit: [...refused.audit, ...asked.audit!],
      reply: { ...refused.reply, message: `${refused.reply.message} (now ${asked.pending.id})` },
    };
  }
  return {
    context: asked.context,
    audit: [confirmationEntry(context, event, 'expired', pending, null, 'confirmation_expired'), ...asked.audit!],
    reply: { accepted: true, code: 'confirmation_expired', message: `expired; asked again as ${asked.pending.id}` },
  };
};

/** The call is not run: the user rejected it, or it was asked too many times. The model is told. */
function closeConfirmation(context: AgentContext, event: MachineEvent, code: 'confirmation_rejected' | 'confirmation_expired', summary: string): StepResult {
  const pending = context.pendingConfirmation!;
  const call = findCall(context.batch, pending.callId)!;
  const userId = 'userId' in event ? event.userId : null;
  const refused = refusal(context, event);
  return {
    context: {
      batch: finishCall(context.batch!, call.callId, rejection(call, code, summary, 'confirmation')),
      pendingConfirmation: null,
      ...endWait(context, event),
    },
    audit: [...(refused?.audit ?? []), confirmationEntry(context, event, code === 'confirmation_rejected' ? 'rejected' : 'expired', pending, userId, code)],
    reply: refused?.reply ?? { accepted: true, code, message: summary },
  };
}

export const rejectConfirmedCall: Step = (context, event) => {
  const result = closeConfirmation(
    context,
    event,
    'confirmation_rejected',
    `the user rejected this call${event.type === 'user.rejected' && event.reason ? `: ${event.reason}` : ''}; it was not run`,
  );
  return { ...result, reply: { accepted: true, code: null, message: 'rejected; the call will not run and the model is told' } };
};

export const giveUpConfirmation: Step = (context, event) =>
  closeConfirmation(context, event, 'confirmation_expired', `no valid confirmation after ${context.policy.maxConfirmationRequests} request(s); the call was not run`);
