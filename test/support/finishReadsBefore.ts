/**
 * `finishReads` as it was before the read round stopped copying the context for a single read (commit d116778):
 * the differential test (test/finishReads.test.ts) asks both for the same context patch and entries.
 */
import { outputOf } from '../../machines/actors.js';
import type { AgentContext, CallState, Observation } from '../../machines/context.js';
import { finishCall, findCall, observationOf, rejection } from '../../machines/lib/batch.js';
import { debit } from '../../machines/lib/budget.js';
import { patchedContext } from '../../machines/lib/contextCopy.js';
import { markRead } from '../../machines/lib/observedFacts.js';
import { exposedToFailure } from '../../machines/lib/observedFacts.js';
import type { AuditEntry } from '../../machines/journal.js';
import { timeOf } from '../../machines/journal.js';
import { finishedEntry, learnedFrom } from '../../machines/steps/execution.js';
import { type Step, retriesWithin } from '../../machines/steps/step.js';
import type { Toolkit } from '../../machines/toolkit.js';

function failureExposure(
  context: AgentContext,
  call: CallState,
  observation: Observation,
  at: number,
  toolkit: Toolkit,
): AgentContext['exposure'] {
  if (observation.ok) return context.exposure;
  return exposedToFailure(
    context.exposure,
    call.tool,
    toolkit.rules(call.tool),
    observation.code,
    observation.summary,
    at,
  );
}

function argsKeyOf(call: CallState): string {
  return (call.argsHash ?? call.callId).replace(/^sha256:/, '').slice(0, 16);
}

function codeOf(observation: Observation): string {
  return observation.ok ? 'ok' : observation.code;
}

export const finishReadsBefore: Step = (context, event, toolkit) => {
  const output = outputOf(event, 'reads');
  const at = timeOf(context, event);
  // One working copy for all the results (this step's own object: each result's fields are set on it in turn).
  const next: AgentContext = patchedContext(context);
  const audit: AuditEntry[] = [];
  for (const result of output.results) {
    const call = findCall(next.batch, result.callId);
    if (!call || call.phase !== 'reading') continue;
    const observation = observationOf(call, result.outcome, context.policy.observationCapBytes);
    next.batch = finishCall(next.batch!, call.callId, observation);
    next.unverified = markRead(next.unverified, call.tool, codeOf(observation), at, argsKeyOf(call));
    if (result.outcome.kind === 'ok') Object.assign(next, learnedFrom(next, call, result.outcome.value, at, toolkit));
    else next.exposure = failureExposure(next, call, observation, at, toolkit);
    audit.push(finishedEntry(context, event, call, codeOf(observation), result.durationMs, result.attempts));
  }
  let batch = next.batch!;
  // A read the executor did not report is still paired with a result.
  for (const call of batch.calls.filter((c) => c.phase === 'reading')) {
    batch = finishCall(
      batch,
      call.callId,
      rejection(call, 'internal_error', 'the host lost this read', undefined, false),
    );
  }
  const { evidence, observedIds, exposure, unverified, succeeded } = next;
  const budget = debit(context.budget, { retries: retriesWithin(context, output.retriesUsed) });
  return { context: { batch, evidence, observedIds, exposure, unverified, succeeded, budget }, audit };
};
