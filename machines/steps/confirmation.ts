/**
 * Gate (f): asking a human to confirm exactly what will run, and what their answer does. A refused or stale
 * confirmation changes nothing but the audit (or asks again); an approval of several is recorded; only the last
 * decision needed marks the call confirmed, with every decision and the hash they were given for.
 */
import type { MachineEvent } from '../actors.js';
import type { AgentContext, CallState, Decision, PendingConfirmation } from '../context.js';
import { CONFIRMATION_REFUSALS } from '../failures.js';
import { confirmationRefusal, rejectionRefusal } from '../guards/confirmation.js';
import { findCall, finishCall, nextCall, rejection, updateCall } from '../lib/batch.js';
import type { AuditEntry, ConfirmationAction } from '../journal.js';
import { auditEntry, timeOf } from '../journal.js';
import { type Step, type StepResult, endWait } from './step.js';
import { stop } from './stop.js';

/**
 * A new confirmation request for `call`, bound to its arguments hash, the task's user, the host's policy version
 * (the task's own, unless the host's has changed since: then the one the host confirms under now), an expiry.
 */
export function newConfirmation(
  context: AgentContext,
  call: CallState,
  at: number,
  policyVersion = context.policy.version,
): PendingConfirmation {
  const request = call.confirmationRequests + 1;
  const index = context.batch?.calls.findIndex((c) => c.callId === call.callId) ?? 0;
  const requirement = call.confirmation;
  return {
    id: `${context.taskId}/t${context.turn}.c${index + 1}.r${request}`,
    taskId: context.taskId,
    callId: call.callId,
    tool: call.tool,
    argsHash: call.argsHash ?? '',
    args: call.redactedArgs,
    summary: call.confirmationSummary ?? `Run ${call.tool}`,
    userId: context.principal.userId,
    approverScope: requirement?.approverScope ?? null,
    approvalsRequired: requirement?.approvals ?? 1,
    approvals: [],
    reasons: requirement?.reasons ?? ['tool_rule'],
    risk: requirement?.risk ?? (call.effect === 'write' ? 'writable' : 'read_only'),
    policyVersion,
    requestedAt: at,
    expiresAt: at + context.policy.confirmationTtlMs,
    request,
  };
}

/** The decision a confirm or reject event makes: as the requester, or as an approver under the approver scope. */
export function decisionOf(pending: PendingConfirmation, event: MachineEvent): Decision | null {
  if (event.type !== 'user.confirmed' && event.type !== 'user.rejected') return null;
  const approver = pending.approverScope !== null && event.userId !== pending.userId;
  return {
    userId: event.userId,
    as: approver ? 'approver' : 'requester',
    scope: approver ? pending.approverScope : null,
    at: event.at,
  };
}

export function confirmationEntry(
  context: AgentContext,
  event: MachineEvent,
  action: ConfirmationAction,
  pending: PendingConfirmation,
  code: string | null,
  argsHash = pending.argsHash,
  confirmationId = pending.id,
): AuditEntry {
  const decision = decisionOf(pending, event);
  return auditEntry(context, event, {
    kind: 'confirmation',
    action,
    confirmationId,
    callId: pending.callId,
    tool: pending.tool,
    argsHash,
    userId: decision?.userId ?? null,
    decidedAs: decision?.as ?? null,
    scope: decision?.scope ?? null,
    code,
    expiresAt: action === 'requested' ? pending.expiresAt : null,
    ...(action === 'requested' ? { reasons: pending.reasons, risk: pending.risk } : {}),
    ...(action === 'rejected' && event.type === 'user.rejected' && event.reason ? { reason: event.reason } : {}),
  });
}

/** Asks for a confirmation of `call` (fresh id, expiry and approvals); the task waits. */
export function askFor(
  context: AgentContext,
  event: MachineEvent,
  call: CallState,
  policyVersion = context.pendingConfirmation?.policyVersion ?? context.policy.version,
): StepResult & { pending: PendingConfirmation } {
  const pending = newConfirmation(context, call, timeOf(context, event), policyVersion);
  return {
    pending,
    context: {
      pendingConfirmation: pending,
      waitingSince: context.waitingSince ?? pending.requestedAt,
      batch: {
        ...updateCall(context.batch!, call.callId, {
          phase: 'awaitingConfirmation',
          confirmationRequests: pending.request,
          confirmedBy: null,
        }),
        current: call.callId,
      },
    },
    audit: [confirmationEntry(context, event, 'requested', pending, null)],
  };
}

export const requestConfirmation: Step = (context, event) => {
  const { pending: _pending, ...result } = askFor(context, event, nextCall(context.batch)!);
  return result;
};

/** The last decision needed: the call is confirmed for exactly the hash the decisions were given for. */
export const grantConfirmation: Step = (context, event) => {
  const pending = context.pendingConfirmation!;
  const decision = decisionOf(pending, event);
  if (event.type !== 'user.confirmed' || !decision) return {};
  return {
    context: {
      batch: {
        ...updateCall(context.batch!, pending.callId, {
          phase: 'ready',
          confirmedBy: {
            confirmationId: pending.id,
            argsHash: pending.argsHash,
            at: event.at,
            decisions: [...pending.approvals, decision],
          },
        }),
        current: null,
      },
      pendingConfirmation: null,
      ...endWait(context, event),
    },
    audit: [confirmationEntry(context, event, 'granted', pending, null)],
    reply: { accepted: true, code: null, message: 'confirmed; the call runs now' },
  };
};

/** One approval of several: recorded; the call still waits for the others. */
export const recordApproval: Step = (context, event) => {
  const pending = context.pendingConfirmation!;
  const decision = decisionOf(pending, event);
  if (!decision) return {};
  const approvals = [...pending.approvals, decision];
  return {
    context: { pendingConfirmation: { ...pending, approvals } },
    audit: [confirmationEntry(context, event, 'approved', pending, null)],
    reply: {
      accepted: true,
      code: 'approval_recorded',
      message: `approval ${approvals.length} of ${pending.approvalsRequired} recorded; another approver must decide`,
    },
  };
};

/** A confirm event that does not satisfy the pending confirmation: audited with the check it failed. */
export function refusal(
  context: AgentContext,
  event: MachineEvent,
): Required<Pick<StepResult, 'audit' | 'reply'>> | null {
  if (event.type !== 'user.confirmed') return null;
  const code = confirmationRefusal(context, event) ?? 'unknown_confirmation';
  const pending = context.pendingConfirmation!;
  return {
    audit: [confirmationEntry(context, event, 'refused', pending, code, event.argsHash, event.confirmationId)],
    reply: { accepted: false, code, message: `refused: ${CONFIRMATION_REFUSALS[code]}` },
  };
}

export const refuseConfirmation: Step = (context, event) => refusal(context, event) ?? {};

/** A reject event that neither withdraws nor turns down the pending confirmation: audited with why, nothing else. */
export const refuseRejection: Step = (context, event) => {
  const pending = context.pendingConfirmation;
  if (event.type !== 'user.rejected' || pending === null) return {};
  const code = rejectionRefusal(context, event) ?? 'unknown_confirmation';
  return {
    audit: [confirmationEntry(context, event, 'refused', pending, code, pending.argsHash, event.confirmationId)],
    reply: { accepted: false, code, message: `refused: ${CONFIRMATION_REFUSALS[code]}` },
  };
};

/** Asks again with a fresh confirmation id and expiry (after expiry, a policy change or changed arguments). */
export const askConfirmationAgain: Step = (context, event) => {
  const pending = context.pendingConfirmation!;
  // The host's policy changed since the request: asked again under the version the host confirms under now.
  const policyChanged = event.type === 'user.confirmed' && confirmationRefusal(context, event) === 'policy_changed';
  const asked = askFor(
    context,
    event,
    findCall(context.batch, pending.callId)!,
    policyChanged ? event.policyVersion : pending.policyVersion,
  );
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
    audit: [confirmationEntry(context, event, 'expired', pending, 'confirmation_expired'), ...asked.audit!],
    reply: { accepted: true, code: 'confirmation_expired', message: `expired; asked again as ${asked.pending.id}` },
  };
};

type Closing = 'confirmation_rejected' | 'confirmation_expired';

/** The audit of a confirmation that ends without running the call (and the refusal, for a late confirm). */
function closingAudit(context: AgentContext, event: MachineEvent, code: Closing) {
  const pending = context.pendingConfirmation!;
  const refused = refusal(context, event);
  const action = code === 'confirmation_rejected' ? 'rejected' : 'expired';
  return { refused, audit: [...(refused?.audit ?? []), confirmationEntry(context, event, action, pending, code)] };
}

/** The call is not run: the user rejected it, or it was asked too many times. The model is told. */
function closeConfirmation(context: AgentContext, event: MachineEvent, code: Closing, summary: string): StepResult {
  const pending = context.pendingConfirmation!;
  const call = findCall(context.batch, pending.callId)!;
  const { refused, audit } = closingAudit(context, event, code);
  return {
    context: {
      batch: finishCall(context.batch!, call.callId, rejection(call, code, summary, 'confirmation')),
      pendingConfirmation: null,
      ...endWait(context, event),
    },
    audit,
    reply: refused?.reply ?? { accepted: true, code, message: summary },
  };
}

function rejectionSummary(event: MachineEvent): string {
  const by = event.type === 'user.rejected' ? ` by ${event.userId}` : '';
  const reason = event.type === 'user.rejected' && event.reason ? `: ${event.reason}` : '';
  return `the call was rejected${by}${reason}; it was not run`;
}

export const rejectConfirmedCall: Step = (context, event) => {
  const result = closeConfirmation(context, event, 'confirmation_rejected', rejectionSummary(event));
  return {
    ...result,
    reply: { accepted: true, code: null, message: 'rejected; the call will not run and the model is told' },
  };
};

export const giveUpConfirmation: Step = (context, event) =>
  closeConfirmation(
    context,
    event,
    'confirmation_expired',
    `no valid confirmation after ${context.policy.maxConfirmationRequests} request(s); the call was not run`,
  );

/** The tool's policy ends the task on a rejection (`onReject: 'cancel'`) or an expiry (`onExpiry: 'cancel'`). */
export const cancelForConfirmation: Step = (context, event) => {
  const code: Closing = event.type === 'user.rejected' ? 'confirmation_rejected' : 'confirmation_expired';
  const pending = context.pendingConfirmation!;
  const { refused, audit } = closingAudit(context, event, code);
  const why =
    code === 'confirmation_rejected'
      ? rejectionSummary(event)
      : `nobody confirmed ${pending.tool} in time; it was not run`;
  const message = `${why}; the policy of ${pending.tool} cancels the task`;
  const stopped = stop(
    { ...context, ...endWait(context, event) },
    event,
    'cancelled',
    { code, message },
    { skipCode: 'cancelled' },
  );
  return {
    ...stopped,
    context: { ...stopped.context, ...endWait(context, event) },
    // The stop first: the confirmation's end is recorded in the state it ended in (the audit replay reads it so).
    audit: [...(stopped.audit ?? []), ...audit],
    reply: refused?.reply ?? { accepted: true, code: code === 'confirmation_rejected' ? null : code, message },
  };
};
