/**
 * The host's rules as pure predicates over (context, event). They read as questions and compose with
 * `and`/`not` in the chart. Each is exported for table-driven tests.
 */
import type { AgentContext } from './agentTypes.js';
import { type AnyAgentEvent, eventTime, outputOf } from './agentEventsInternal.js';
import { findCall, isBatchComplete as batchComplete, nextStep } from './batch.js';
import { modelTurnNeed, shortfall } from './budget.js';
import { judgeConfirmation } from './confirmation.js';
import { protocolVerdict } from './protocol.js';

export type Guard = (context: AgentContext, event: AnyAgentEvent) => boolean;

const now = (context: AgentContext, event: AnyAgentEvent) => eventTime(event, context.startedAt);

function proposal(event: AnyAgentEvent) {
  if (event.type !== 'model.toolsProposed') throw new Error(`expected model.toolsProposed, got ${event.type}`);
  return event;
}

function confirmEvent(event: AnyAgentEvent) {
  if (event.type !== 'user.confirmed') throw new Error(`expected user.confirmed, got ${event.type}`);
  return event;
}

/** The call the executing step is about (the first unfinished one). */
export function currentCall(context: AgentContext) {
  const step = nextStep(context.batch);
  return step ? findCall(context.batch, step.callIds[0]!) : undefined;
}

/** The write in flight (writing / reconciling): the one running call. */
export function runningCall(context: AgentContext) {
  return context.batch?.calls.find((c) => c.phase === 'running');
}

/** The loop-detection key of a call: tool and the first 64 bits of its arguments hash. */
export function callKey(tool: string, argsHash: string): string {
  return `${tool}:${argsHash.replace(/^sha256:/, '').slice(0, 16)}`;
}

/**
 * True when the host's gates rejected a call of the batch. A user's refusal of a confirmation is the user's
 * decision, not a rejected proposal, so it does not count towards the rejected-turns limit.
 */
export function hasHostRejection(batch: AgentContext['batch']): boolean {
  return batch?.calls.some((c) => c.observation?.ok === false && c.observation.gate !== undefined && c.observation.gate !== 'confirmation') ?? false;
}

export const guards = {
  // --- budget -------------------------------------------------------------------------------------------
  hasBudgetForModelTurn: (context, event) =>
    shortfall(context.budget, modelTurnNeed(context.modelReservation), now(context, event)) === null,

  hasBudgetForNextStep: (context, event) => {
    const step = nextStep(context.batch);
    if (!step) return true;
    const writes = step.kind === 'write' ? 1 : 0;
    return shortfall(context.budget, { toolCalls: step.callIds.length, writes }, now(context, event)) === null;
  },

  hasBudgetForRetry: (context, event) => shortfall(context.budget, { retries: 1 }, now(context, event)) === null,

  // --- model output ---------------------------------------------------------------------------------------
  hasPairableCallIds: (context, event) =>
    protocolVerdict(proposal(event).calls, context.catalog, context.policy).kind !== 'unpairable',

  isBatchWellFormed: (context, event) =>
    protocolVerdict(proposal(event).calls, context.catalog, context.policy).kind === 'accepted',

  canReaskModel: (context) => context.invalidOutputs <= context.policy.maxInvalidOutputs,

  /** Success only from a trusted tool result that matches the task's criterion (or no criterion declared). */
  isGoalMet: (context) => context.success === null || context.evidence.length > 0,

  // --- vetting --------------------------------------------------------------------------------------------
  /** Same tool, same argument hash, and nothing new observed since it was last proposed. */
  isRepeatingWithoutNewObservation: (context, event) => {
    const { verdicts } = outputOf(event, 'vet');
    return verdicts.some((v) => {
      const call = findCall(context.batch, v.callId);
      return call !== undefined && context.proposedSinceNew.includes(callKey(call.tool, v.argsHash));
    });
  },

  // --- executing ------------------------------------------------------------------------------------------
  isBatchComplete: (context) => batchComplete(context.batch),

  hasTooManyRejectedTurns: (context) =>
    context.rejectedTurns + (hasHostRejection(context.batch) ? 1 : 0) > context.policy.maxRejectedTurns,

  isCancelRequested: (context) => context.cancelRequested !== null,

  isNextStepWrite: (context) => nextStep(context.batch)?.kind === 'write',

  /** The next write is a business intent (idempotency key) that already succeeded in this task. */
  isNextWriteAlreadyDone: (context) => {
    const step = nextStep(context.batch);
    const call = step?.kind === 'write' ? findCall(context.batch, step.callIds[0]!) : undefined;
    return call?.idempotencyKey != null && context.writtenKeys.includes(call.idempotencyKey);
  },

  needsConfirmation: (context) => nextStep(context.batch)?.needsConfirmation === true,

  isConfirmedForExactArguments: (context) => {
    const call = currentCall(context);
    return call?.confirmedBy != null;
  },

  isWriteOutcomeUnknown: (_context, event) => outputOf(event, 'write').outcome.kind === 'unknown',

  wasWriteFound: (_context, event) => outputOf(event, 'lookup').result.kind === 'found',

  wasWriteNotFound: (_context, event) => outputOf(event, 'lookup').result.kind === 'not_found',

  isLookupInconclusive: (_context, event) => outputOf(event, 'lookup').result.kind === 'inconclusive',

  isSameKeyRetrySafe: (context) => {
    const call = runningCall(context);
    return call !== undefined && context.catalog[call.tool]?.sameKeyRetrySafe === true;
  },

  canRetryWrite: (context) => (runningCall(context)?.writeAttempts ?? Infinity) < context.policy.maxReconcileAttempts,

  canLookUpAgain: (context) => (runningCall(context)?.lookups ?? Infinity) < context.policy.maxReconcileAttempts,

  // --- confirmation (checked in this order) -------------------------------------------------------------
  isConfirmationForPendingCall: (context, event) =>
    judgeConfirmation(context.pendingConfirmation, confirmEvent(event)) !== 'unknown_confirmation',

  isFromConfirmingUser: (context, event) => confirmEvent(event).userId === context.pendingConfirmation?.userId,

  isConfirmationUnexpired: (context, event) =>
    context.pendingConfirmation !== null && confirmEvent(event).at < context.pendingConfirmation.expiresAt,

  isUnderSamePolicy: (context, event) =>
    confirmEvent(event).policyVersion === context.pendingConfirmation?.policyVersion,

  doesConfirmationMatchArguments: (context, event) =>
    confirmEvent(event).argsHash === context.pendingConfirmation?.argsHash,

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

  // --- user -----------------------------------------------------------------------------------------------
  isFromTaskUser: (context, event) => event.type === 'user.answered' && event.userId === context.principal.userId,
} satisfies Record<string, Guard>;

export type GuardName = keyof typeof guards;
