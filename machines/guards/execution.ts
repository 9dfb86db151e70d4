/** Questions the executing states ask: what runs next, and how a write ended or was reconciled. */
import { outputOf } from '../actors.js';
import { currentCall, hasHostRejection, isBatchComplete, nextCall, nextStep } from '../lib/batch.js';
import { blockingReads } from '../lib/observedFacts.js';
import type { Guard } from './guard.js';

/** The next write, if the next step is one. */
const nextWrite = (context: Parameters<Guard>[0]) =>
  nextStep(context.batch)?.kind === 'write' ? nextCall(context.batch) : undefined;

export const executionGuards = {
  isBatchComplete: (context) => isBatchComplete(context.batch),

  hasTooManyRejectedTurns: (context) =>
    context.rejectedTurns + (hasHostRejection(context.batch) ? 1 : 0) > context.policy.maxRejectedTurns,

  isCancelRequested: (context) => context.cancelRequested !== null,

  isNextStepWrite: (context) => nextStep(context.batch)?.kind === 'write',

  isNextStepRead: (context) => nextStep(context.batch)?.kind === 'read',

  /**
   * The reads running now are the batch's last step: once their results are in, the batch is complete (what
   * `isBatchComplete` answers after them). Asked on a read's done event, before its results are recorded.
   */
  areReadsLastStep: (context) => {
    if (context.batch === null) return false;
    for (const c of context.batch.calls) if (c.phase !== 'finished' && c.phase !== 'reading') return false;
    return true;
  },

  /** The next write is a business intent (idempotency key) that already succeeded in this task. */
  isNextWriteAlreadyDone: (context) => {
    const call = nextWrite(context);
    return call?.idempotencyKey != null && context.writtenKeys.includes(call.idempotencyKey);
  },

  /**
   * The next write depends on facts a read could not establish: a read it depends on (every read, unless its tool
   * names them) ended unknown and has not succeeded since. A timeout means "unknown", never "none".
   */
  dependsOnUnverifiedFacts: (context, _event, toolkit) => {
    // A compensation rests on the trusted result of the write it undoes, not on the task's reads.
    if (context.unwinding !== null) return false;
    const call = nextWrite(context);
    return call !== undefined && blockingReads(context, toolkit.rules(call.tool)).length > 0;
  },

  /** Reading again did not help: a read the next write depends on ended unknown the policy's number of times in a row. */
  haveRereadsKeptFailing: (context, _event, toolkit) => {
    if (context.unwinding !== null) return false;
    const call = nextWrite(context);
    return (
      call !== undefined &&
      blockingReads(context, toolkit.rules(call.tool)).some((mark) => mark.times >= context.policy.maxUnknownReads)
    );
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

  canRetryWrite: (context) =>
    (currentCall(context.batch)?.writeAttempts ?? Infinity) < context.policy.maxReconcileAttempts,

  canLookUpAgain: (context) => (currentCall(context.batch)?.lookups ?? Infinity) < context.policy.maxReconcileAttempts,
} satisfies Record<string, Guard>;
