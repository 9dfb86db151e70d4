/** Questions the executing states ask: what runs next, and how a write ended or was reconciled. */
import { outputOf } from '../actors.js';
import { currentCall, hasHostRejection, isBatchComplete, nextCall, nextStep } from '../lib/batch.js';
import type { Guard } from './guard.js';

export const executionGuards = {
  isBatchComplete: (context) => isBatchComplete(context.batch),

  hasTooManyRejectedTurns: (context) =>
    context.rejectedTurns + (hasHostRejection(context.batch) ? 1 : 0) > context.policy.maxRejectedTurns,

  isCancelRequested: (context) => context.cancelRequested !== null,

  isNextStepWrite: (context) => nextStep(context.batch)?.kind === 'write',

  /** The next write is a business intent (idempotency key) that already succeeded in this task. */
  isNextWriteAlreadyDone: (context) => {
    const call = nextStep(context.batch)?.kind === 'write' ? nextCall(context.batch) : undefined;
    return call?.idempotencyKey != null && context.writtenKeys.includes(call.idempotencyKey);
  },

  isWriteOutcomeUnknown: (_context, event) => outputOf(event, 'write').outcome.kind === 'unknown',

  /** The tool found the records inconsistent and asked for a human (`needs_review`). */
  doesWriteNeedReview: (_context, event) => outputOf(event, 'write').outcome.kind === 'review',

  wasWriteFound: (_context, event) => outputOf(event, 'lookup').result.kind === 'found',

  wasWriteNotFound: (_context, event) => outputOf(event, 'lookup').result.kind === 'not_found',

  isLookupInconclusive: (_context, event) => outputOf(event, 'lookup').result.kind === 'inconclusive',

  /** The persisted catalog says re-sending this write with the same key never duplicates it. */
  isSameKeyRetrySafe: (context) => {
    const call = currentCall(context.batch);
    return call !== undefined && context.catalog[call.tool]?.sameKeyRetrySafe === true;
  },

  canRetryWrite: (context) => (currentCall(context.batch)?.writeAttempts ?? Infinity) < context.policy.maxReconcileAttempts,

  canLookUpAgain: (context) => (currentCall(context.batch)?.lookups ?? Infinity) < context.policy.maxReconcileAttempts,
} satisfies Record<string, Guard>;
