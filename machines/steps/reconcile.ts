/**
 * A write whose outcome is unknown (timeout, crash, unclassified failure) is looked up by its idempotency key
 * before anything else: found means it happened; not found may allow one same-key retry; otherwise a reviewer
 * decides (`review.ts`).
 */
import type { MachineEvent } from '../actors.js';
import { outputOf } from '../actors.js';
import type { AgentContext, CallState } from '../context.js';
import { currentCall, finishCall, observationOf, rejection, updateCall } from '../lib/batch.js';
import { debit } from '../lib/budget.js';
import type { AuditEntry } from '../journal.js';
import { auditEntry, timeOf } from '../journal.js';
import { finishedEntry, learnedFrom, written } from './execution.js';
import { releaseUnstarted } from '../lib/subtask.js';
import type { Step } from './step.js';

function inFlight(context: AgentContext): CallState {
  const call = currentCall(context.batch);
  if (!call) throw new Error('no write is in flight');
  return call;
}

export function lookupEntry(context: AgentContext, event: MachineEvent, call: CallState): AuditEntry {
  const output = event.type === 'xstate.done.actor.lookup' ? event.output : null;
  return auditEntry(context, event, {
    kind: 'write_lookup',
    callId: call.callId,
    tool: call.tool,
    idempotencyKey: call.idempotencyKey!,
    result: output?.result.kind ?? 'inconclusive',
    durationMs: output?.durationMs ?? 0,
  });
}

/** The write's effect may have happened: it goes to reconciling, to be looked up first. */
export const noteUnknownWrite: Step = (context, event) => {
  const call = inFlight(context);
  let code = 'outcome_unknown';
  let durationMs = 0;
  if (event.type === 'xstate.done.actor.write') {
    if (event.output.outcome.kind === 'unknown') code = event.output.outcome.code;
    durationMs = event.output.durationMs;
  }
  return {
    context: { batch: updateCall(context.batch!, call.callId, { phase: 'reconciling', lookups: call.lookups + 1 }) },
    audit: [finishedEntry(context, event, call, code, durationMs, call.writeAttempts)],
  };
};

export const finishReconciledWrite: Step = (context, event, toolkit) => {
  const output = outputOf(event, 'lookup');
  const call = inFlight(context);
  if (output.result.kind !== 'found') return {};
  const observation = observationOf(
    call,
    { kind: 'ok', value: output.result.value },
    context.policy.observationCapBytes,
  );
  return {
    context: {
      batch: finishCall(context.batch!, call.callId, observation),
      ...learnedFrom(context, call, output.result.value, timeOf(context, event), toolkit),
      writtenKeys: written(context, call),
    },
    audit: [lookupEntry(context, event, call)],
  };
};

/** Looked up and not found, and not to be sent again (`why`): the write ends `not_executed`. */
const abandonWrite =
  (why: string): Step =>
  (context, event) => {
    const call = inFlight(context);
    const summary = `looked up by idempotency key ${call.idempotencyKey}: not found; not sent again ${why}`;
    // A sub-task's start that did not happen: the child's share goes back.
    const released = releaseUnstarted(context, event, call.callId);
    return {
      context: {
        batch: finishCall(context.batch!, call.callId, rejection(call, 'not_executed', summary)),
        ...released.context,
      },
      audit: [lookupEntry(context, event, call), ...released.audit],
    };
  };

/** After a cancel: the task ends as cancelled. */
export const abandonWriteForCancel: Step = abandonWrite('because the task was cancelled');

/**
 * While the task's user is away (a write that did not happen is a new effect, and none starts while the user is
 * away): the model is told, and may propose it again once they are back.
 */
export const abandonWriteForAbsence: Step = abandonWrite('while the user is away');

/** Not found, and the tool declares same-key retries safe: to be sent again with the same key, once re-checked. */
export const prepareResend: Step = (context, event) => {
  const call = inFlight(context);
  return {
    context: { batch: updateCall(context.batch!, call.callId, { phase: 'rechecking', resendAfter: 'lookup' }) },
    audit: [lookupEntry(context, event, call)],
  };
};

export const lookUpAgain: Step = (context, event) => {
  const call = inFlight(context);
  return {
    context: {
      batch: updateCall(context.batch!, call.callId, { lookups: call.lookups + 1 }),
      budget: debit(context.budget, { retries: 1 }),
    },
    audit: [lookupEntry(context, event, call)],
  };
};
