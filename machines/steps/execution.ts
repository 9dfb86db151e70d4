/** Running a batch: reads together, writes one at a time; every result is an observation paired by call id. */
import type { MachineEvent } from '../actors.js';
import { outputOf } from '../actors.js';
import type { AgentContext, CallState, Json, Observation } from '../context.js';
import { CONTEXT_BOUNDS } from '../context.js';
import {
  currentCall,
  evidenceFrom,
  finishCall,
  findCall,
  hasHostRejection,
  nextCall,
  nextStep,
  observationOf,
  rejection,
  updateCall,
} from '../lib/batch.js';
import { debit } from '../lib/budget.js';
import { patchedContext } from '../lib/contextCopy.js';
import { fingerprint } from '../lib/fingerprint.js';
import type { AuditEntry, TranscriptEntry } from '../journal.js';
import { auditEntry, gateEntry, timeOf } from '../journal.js';
import { nextStepNeed } from '../guards/budget.js';
import { blockingReads, exposedTo, exposedToFailure, identifiersOf, markRead, observe } from '../lib/observedFacts.js';
import { unconfirmedSummary } from '../lib/toolRules.js';
import type { ToolRules, Toolkit } from '../toolkit.js';
import { type Step, bounded, retriesWithin } from './step.js';
import { rememberWrite } from './compensate.js';
import { releaseUnstarted, subtaskReservedEntries, withSubtaskLink } from '../lib/subtask.js';
import { planProgress } from './plan.js';
import { workflowCallProgress } from './workflow.js';

/** Closes the batch: every result goes to the transcript, paired by call id, and new knowledge is counted. */
export const closeBatch: Step = (context, event, toolkit) => {
  const batch = context.batch!;
  let { knowledge, lastFailure } = context;
  // Copied only once something new is seen (most rounds of a loop see nothing new; the list is bounded).
  let seen = context.seenObservations;
  const transcript: TranscriptEntry[] = [];
  let failed = false;
  for (const call of batch.calls) {
    const observation = call.observation!;
    if (observation.ok === false) failed = true;
    transcript.push({ kind: 'result', at: timeOf(context, event), turn: batch.turn, observation });
    const { callId: _ignored, ...content } = observation;
    const print = fingerprint(content);
    if (!seen.includes(print)) {
      if (seen === context.seenObservations) seen = [...seen];
      seen.push(print);
      knowledge += 1;
    }
    if (!observation.ok) lastFailure = { tool: call.tool, code: observation.code, summary: observation.summary };
  }
  const planned = planProgress(context, event, batch.calls);
  const flowed = workflowCallProgress(context, event, batch.calls, toolkit);
  // The plan's and the workflow's entries, joined only when both made some (most rounds follow neither).
  const audit = planned.audit?.length
    ? flowed.audit?.length
      ? [...planned.audit, ...flowed.audit]
      : planned.audit
    : (flowed.audit ?? []);
  return {
    context: {
      ...planned.context,
      ...flowed.context,
      batch: { ...batch, closed: true, current: null },
      knowledge,
      // Something new was observed: earlier proposals may be worth making again.
      proposedSinceNew: knowledge === context.knowledge ? context.proposedSinceNew : [],
      lastFailure: failed ? lastFailure : null,
      seenObservations:
        seen.length > CONTEXT_BOUNDS.seenObservations ? seen.slice(-CONTEXT_BOUNDS.seenObservations) : seen,
      rejectedTurns: context.rejectedTurns + (hasHostRejection(batch) ? 1 : 0),
    },
    audit,
    transcript: planned.transcript?.length ? [...transcript, ...planned.transcript] : transcript,
  };
};

export function startedEntry(
  context: AgentContext,
  event: MachineEvent,
  call: CallState,
  attempt: number,
  money = 0,
): AuditEntry {
  return auditEntry(context, event, {
    kind: 'tool_started',
    callId: call.callId,
    tool: call.tool,
    effect: call.effect,
    argsHash: call.argsHash,
    args: call.redactedArgs,
    idempotencyKey: call.idempotencyKey,
    attempt,
    confirmationId: call.confirmedBy?.confirmationId ?? null,
    money,
  });
}

export function finishedEntry(
  context: AgentContext,
  event: MachineEvent,
  call: CallState,
  code: string,
  durationMs: number,
  attempts: number,
): AuditEntry {
  return auditEntry(context, event, {
    kind: 'tool_finished',
    callId: call.callId,
    tool: call.tool,
    code,
    durationMs,
    attempts,
    idempotencyKey: call.idempotencyKey,
  });
}

/**
 * What a trusted result of `call` teaches the task: the evidence it is (if any), the identifiers it names (an answer
 * may name them), whether it exposes the task to untrusted input or sensitive data (the Rule of Two), and for a write
 * whose tool names a compensation, the undo a stop may have to run.
 */
export function learnedFrom(
  context: AgentContext,
  call: CallState,
  value: Json,
  at: number,
  toolkit: Toolkit,
): Pick<AgentContext, 'evidence' | 'observedIds' | 'exposure' | 'compensable' | 'succeeded'> {
  const found = evidenceFrom(context.success, call, value);
  return {
    succeeded: context.succeeded.includes(call.tool)
      ? context.succeeded
      : bounded(context.succeeded, [call.tool], CONTEXT_BOUNDS.succeeded),
    compensable: call.effect === 'write' ? rememberWrite(context, call, value, at, toolkit) : context.compensable,
    evidence: found ? bounded(context.evidence, [found], CONTEXT_BOUNDS.evidence) : context.evidence,
    observedIds: observe(context.observedIds, identifiersOf(value)),
    exposure: exposedTo(context.exposure, call.tool, toolkit.rules(call.tool), value, at),
  };
}

/** What a failure of `call` exposes the task to: its text is the tool's (see `exposedToFailure`). */
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

/** The write's intent succeeded: remembered by its key, so the same business intent is never sent again. */
export function written(context: AgentContext, call: CallState): string[] {
  if (!call.idempotencyKey || context.writtenKeys.includes(call.idempotencyKey)) return context.writtenKeys;
  return bounded(context.writtenKeys, [call.idempotencyKey], CONTEXT_BOUNDS.writtenKeys);
}

/** The part of a read's arguments hash its unverified mark keeps (as `callKey` does). */
function argsKeyOf(call: CallState): string {
  return (call.argsHash ?? call.callId).replace(/^sha256:/, '').slice(0, 16);
}

function codeOf(observation: Observation): string {
  return observation.ok ? 'ok' : observation.code;
}

/** `learned[key]` as the last result's lesson `taught` left it (its own key wins, as `Object.assign` would). */
function latest<K extends keyof AgentContext>(
  taught: Partial<AgentContext> | null,
  learned: AgentContext,
  key: K,
): AgentContext[K] {
  return taught !== null && Object.hasOwn(taught, key) ? (taught[key] as AgentContext[K]) : learned[key];
}

export const startReads: Step = (context, event) => {
  const step = nextStep(context.batch)!;
  let batch = context.batch!;
  const audit: AuditEntry[] = [
    gateEntry(context, event, {
      gate: 'budget',
      decision: 'pass',
      code: null,
      summary: `${step.callIds.length} read(s) within budget`,
    }),
  ];
  for (const callId of step.callIds) {
    batch = updateCall(batch, callId, { phase: 'reading' });
    audit.push(startedEntry(context, event, findCall(batch, callId)!, 1));
  }
  return { context: { batch, budget: debit(context.budget, { toolCalls: step.callIds.length }) }, audit };
};

/**
 * The reads' results: each an observation; a result teaches the task (evidence, identifiers, exposure), and a read
 * that ended unknown marks its tool's facts unverified until the same read (same arguments) succeeds later.
 */
export const finishReads: Step = (context, event, toolkit) => {
  const output = outputOf(event, 'reads');
  const at = timeOf(context, event);
  let batch = context.batch!;
  let unverified = context.unverified;
  // What the results taught so far, as the context `learnedFrom` reads (it reads neither the batch nor `unverified`):
  // the context itself until a result teaches something; a working copy (this step's own) once a later result must
  // read what an earlier one taught. A round's single read makes none.
  let learned: AgentContext = context;
  let taught: Partial<AgentContext> | null = null;
  const audit: AuditEntry[] = [];
  for (const result of output.results) {
    const call = findCall(batch, result.callId);
    if (!call || call.phase !== 'reading') continue;
    if (taught) learned = learned === context ? patchedContext(context, taught) : Object.assign(learned, taught);
    const observation = observationOf(call, result.outcome, context.policy.observationCapBytes);
    batch = finishCall(batch, call.callId, observation);
    unverified = markRead(unverified, call.tool, codeOf(observation), at, argsKeyOf(call));
    taught =
      result.outcome.kind === 'ok'
        ? learnedFrom(learned, call, result.outcome.value, at, toolkit)
        : { exposure: failureExposure(learned, call, observation, at, toolkit) };
    audit.push(finishedEntry(context, event, call, codeOf(observation), result.durationMs, result.attempts));
  }
  // A read the executor did not report is still paired with a result.
  const reported = batch;
  for (const call of reported.calls) {
    if (call.phase !== 'reading') continue;
    batch = finishCall(
      batch,
      call.callId,
      rejection(call, 'internal_error', 'the host lost this read', undefined, false),
    );
  }
  const evidence = latest(taught, learned, 'evidence');
  const observedIds = latest(taught, learned, 'observedIds');
  const exposure = latest(taught, learned, 'exposure');
  const succeeded = latest(taught, learned, 'succeeded');
  const budget = debit(context.budget, { retries: retriesWithin(context, output.retriesUsed) });
  return { context: { batch, evidence, observedIds, exposure, unverified, succeeded, budget }, audit };
};

/**
 * Every gate passed again for the write, right before it runs: its intent (key, arguments hash) is in the snapshot
 * saved before the executor sends it, and the budget (money included) is debited first.
 */
export const startWrite: Step = (context, event, toolkit) => {
  const call = nextCall(context.batch)!;
  const need = nextStepNeed(context, toolkit) ?? { toolCalls: 1, writes: 1 };
  const money = need.money ? `, ${need.money} in money` : '';
  // The session the re-check just saw: what the tool's execute (and a later lookup) is given.
  const runAs = event.type === 'xstate.done.actor.recheck' ? event.output.principal : null;
  // A sub-task tool's call: the child's link (id, goal, tools, mandate, share) is in the snapshot saved before the start.
  const subtasks = withSubtaskLink(context, call, toolkit, timeOf(context, event));
  return {
    context: {
      batch: {
        ...updateCall(context.batch!, call.callId, { phase: 'writing', writeAttempts: 1, runAs }),
        current: call.callId,
      },
      budget: debit(context.budget, need),
      pendingConfirmation: null,
      subtasks,
    },
    audit: [
      gateEntry(context, event, {
        gate: 'budget',
        decision: 'pass',
        call,
        code: null,
        summary: `write within budget${money}`,
      }),
      gateEntry(context, event, {
        gate: 'confirmation',
        decision: 'pass',
        call,
        code: null,
        summary: confirmedSummary(call, toolkit.rules(call.tool)),
      }),
      startedEntry(context, event, call, 1, need.money ?? 0),
      ...subtaskReservedEntries({ ...context, subtasks }, event, call.callId),
    ],
  };
};

function confirmedSummary(call: CallState, rules: ToolRules | undefined): string {
  if (!call.confirmedBy) return unconfirmedSummary(rules);
  const who = call.confirmedBy.decisions
    .map((d) => (d.as === 'approver' ? `${d.userId} (${d.scope})` : d.userId))
    .join(', ');
  return `confirmed by ${who} (${call.confirmedBy.confirmationId}) for exactly these arguments`;
}

export const finishWrite: Step = (context, event, toolkit) => {
  const output = outputOf(event, 'write');
  const call = currentCall(context.batch)!;
  const observation = observationOf(call, output.outcome, context.policy.observationCapBytes);
  const at = timeOf(context, event);
  const learned =
    output.outcome.kind === 'ok'
      ? learnedFrom(context, call, output.outcome.value, at, toolkit)
      : { exposure: failureExposure(context, call, observation, at, toolkit) };
  // A sub-task's start that was refused: the child's share goes back.
  const released = output.outcome.kind === 'error' ? releaseUnstarted(context, event, call.callId) : null;
  return {
    context: {
      batch: finishCall(context.batch!, call.callId, observation),
      ...learned,
      writtenKeys: output.outcome.kind === 'ok' ? written(context, call) : context.writtenKeys,
      ...released?.context,
    },
    audit: [
      finishedEntry(context, event, call, codeOf(observation), output.durationMs, call.writeAttempts),
      ...(released?.audit ?? []),
    ],
  };
};

/** The same business intent already succeeded in this task: it is not sent again, and the model is told. */
export const refuseDuplicateWrite: Step = (context, event) => {
  const call = nextCall(context.batch)!;
  const summary = 'this write (same tool and arguments) already succeeded in this task; it was not sent again';
  return {
    context: { batch: finishCall(context.batch!, call.callId, rejection(call, 'duplicate_write', summary, 'loop')) },
    audit: [gateEntry(context, event, { gate: 'loop', decision: 'reject', call, code: 'duplicate_write', summary })],
  };
};

/**
 * The write depends on a read that ended unknown (and has not succeeded since): it is not run, and the model is told
 * to read again. The facts it would rest on are unverified, not absent.
 */
export const refuseForUnverifiedFacts: Step = (context, event, toolkit) => {
  const call = nextCall(context.batch)!;
  const marks = blockingReads(context, toolkit.rules(call.tool));
  const reads = marks.map((mark) => `${mark.tool} ended ${mark.code}`).join(', ');
  const summary = `not run: the facts it depends on are unverified (${reads}, and the same read has not succeeded since); read again, with the same arguments, before writing`;
  return {
    context: {
      batch: finishCall(context.batch!, call.callId, rejection(call, 'unverified_facts', summary, 'verification')),
    },
    audit: [
      gateEntry(context, event, { gate: 'verification', decision: 'reject', call, code: 'unverified_facts', summary }),
    ],
  };
};
