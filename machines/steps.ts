/**
 * What each transition does, as pure functions of (context, event) returning a context patch plus the journal
 * entries to append. The chart wires them as actions; tests can call them directly.
 */
import type { Verdict } from './actorContracts.js';
import type {
  AgentContext,
  AgentInput,
  CallState,
  FinalStatus,
  Json,
  Observation,
  StopReason,
} from './agentTypes.js';
import type { AuditEntry, TranscriptEntry } from './journal.js';
import { type AnyAgentEvent, eventTime, outputOf } from './agentEventsInternal.js';
import * as B from './batch.js';
import { ZERO_COUNTERS, debit, describeShortfall, modelTurnNeed, shortfall } from './budget.js';
import { judgeConfirmation, newConfirmation } from './confirmation.js';
import { protocolVerdict } from './protocol.js';
import { callKey, currentCall, hasHostRejection, runningCall } from './guards.js';
import { fingerprint } from '../src/json/fingerprint.js';

export interface StepResult {
  context?: Partial<AgentContext>;
  audit?: AuditEntry[];
  transcript?: TranscriptEntry[];
}

export type Step = (context: AgentContext, event: AnyAgentEvent) => StepResult;

type AuditBody = AuditEntry extends infer E ? (E extends unknown ? Omit<E, 'at' | 'turn'> : never) : never;

const PROPOSED_SINCE_NEW = 32;
const WRITTEN_KEYS = 64;
const SEEN_OBSERVATIONS = 16;
const UNKNOWN_OUTCOME_CODES = new Set(['timeout', 'unavailable', 'outcome_unknown', 'lookup_failed']);

function at(context: AgentContext, event: AnyAgentEvent): number {
  return eventTime(event, context.startedAt);
}

function entry(context: AgentContext, event: AnyAgentEvent, body: AuditBody): AuditEntry {
  return { at: at(context, event), turn: context.turn, ...body } as AuditEntry;
}

function gate(
  context: AgentContext,
  event: AnyAgentEvent,
  body: Omit<Extract<AuditEntry, { kind: 'gate' }>, 'kind' | 'at' | 'turn' | 'callId' | 'tool' | 'argsHash'> & {
    call?: Pick<CallState, 'callId' | 'tool' | 'argsHash'>;
  },
): AuditEntry {
  const { call, ...rest } = body;
  return entry(context, event, {
    kind: 'gate',
    callId: call?.callId ?? null,
    tool: call?.tool ?? null,
    argsHash: call?.argsHash ?? null,
    ...rest,
  });
}

/** Builds the initial context from the host's task input. */
export function initialContext(input: AgentInput): AgentContext {
  return {
    taskId: input.taskId,
    goal: input.goal,
    principal: input.principal,
    catalog: input.catalog,
    policy: input.policy,
    budget: { limits: input.limits, used: { ...ZERO_COUNTERS }, deadlineAt: input.startedAt + input.limits.wallClockMs },
    modelReservation: input.modelReservation,
    success: input.success,
    startedAt: input.startedAt,
    turn: 0,
    batch: null,
    pendingConfirmation: null,
    question: null,
    waitingSince: null,
    evidence: [],
    knowledge: 0,
    seenObservations: [],
    proposedSinceNew: [],
    writtenKeys: [],
    rejectedTurns: 0,
    invalidOutputs: 0,
    lastFailure: null,
    cancelRequested: null,
    outcome: null,
  };
}

export const recordTaskStarted: Step = (context, event) => ({
  audit: [
    entry(context, event, {
      kind: 'task_started',
      userId: context.principal.userId,
      tenantId: context.principal.tenantId,
      scopes: context.principal.scopes,
      goal: context.goal,
      limits: context.budget.limits,
      policyVersion: context.policy.version,
    }),
  ],
  transcript: [{ kind: 'goal', at: context.startedAt, text: context.goal }],
});

// --- stopping ---------------------------------------------------------------------------------------------

function stop(
  context: AgentContext,
  event: AnyAgentEvent,
  status: FinalStatus,
  reason: StopReason,
  extra: { answer?: string; skipCode?: string } = {},
): StepResult {
  const batch =
    context.batch && extra.skipCode ? B.skipUnfinished(context.batch, extra.skipCode, reason.message) : context.batch;
  const transcript: TranscriptEntry[] = [];
  const audit: AuditEntry[] = [];
  if (batch && !batch.closed && batch.calls.every((c) => c.phase === 'finished')) {
    // Keep the trajectory: every proposed call still gets its paired result.
    for (const call of batch.calls) {
      transcript.push({ kind: 'result', at: at(context, event), turn: batch.turn, observation: call.observation! });
    }
  }
  audit.push(entry(context, event, { kind: 'task_stopped', status, reason }));
  return {
    context: {
      batch: batch && { ...batch, closed: batch.calls.every((c) => c.phase === 'finished') },
      pendingConfirmation: null,
      outcome: { status, reason, answer: extra.answer ?? null, evidence: context.evidence },
    },
    audit,
    transcript,
  };
}

export const stopForBudget: Step = (context, event) => {
  const step = B.nextStep(context.batch);
  const need = context.batch && step && !context.batch.closed
    ? { toolCalls: step.callIds.length, writes: step.kind === 'write' ? 1 : 0 }
    : modelTurnNeed(context.modelReservation);
  const dimension = shortfall(context.budget, need, at(context, event)) ?? 'wallClock';
  const message = `stopped before the next ${step && !context.batch?.closed ? 'tool call' : 'model turn'}: ${describeShortfall(context.budget, dimension)}`;
  const result = stop(context, event, 'budget_exhausted', { code: 'budget_exhausted', message, detail: { dimension } }, {
    skipCode: 'budget_exhausted',
  });
  result.audit!.unshift(gate(context, event, { gate: 'budget', decision: 'stop', code: 'budget_exhausted', summary: message }));
  return result;
};

export const stopCancelled: Step = (context, event) => {
  const request =
    event.type === 'task.cancelled' ? { by: event.by, reason: event.reason } : context.cancelRequested ?? { by: 'host', reason: '' };
  return stop(
    context,
    event,
    'cancelled',
    { code: 'cancelled', message: `cancelled by ${request.by}${request.reason ? `: ${request.reason}` : ''}` },
    { skipCode: 'cancelled' },
  );
};

export const deferCancel: Step = (context, event) => {
  if (event.type !== 'task.cancelled') return {};
  return {
    context: { cancelRequested: { by: event.by, reason: event.reason, at: event.at } },
    audit: [entry(context, event, { kind: 'cancel_requested', by: event.by, reason: event.reason, deferred: true })],
  };
};

export const stopForModelError: Step = (context, event) => {
  const error = event.type === 'xstate.error.actor.model' ? event.error : undefined;
  const message = error === undefined ? 'the model failed' : safeErrorText(error);
  const spent = (error as { retriesUsed?: unknown } | undefined)?.retriesUsed;
  const result = stop(context, event, 'failed', { code: 'model_unavailable', message: `the model could not be reached: ${message}` });
  if (typeof spent === 'number' && spent > 0) result.context!.budget = debit(context.budget, { retries: retriesWithin(context, spent) });
  return result;
};

export const stopForInternalError: Step = (context, event) =>
  stop(
    context,
    event,
    'failed',
    { code: 'internal_error', message: `a host step failed: ${'error' in event ? safeErrorText(event.error) : event.type}` },
    { skipCode: 'internal_error' },
  );

export const stopForProtocolError: Step = (context, event) =>
  stop(context, event, 'failed', {
    code: 'protocol_error',
    message: `the model produced ${context.invalidOutputs} unusable outputs; the limit is ${context.policy.maxInvalidOutputs}`,
  });

export const stopForRejections: Step = (context, event) => {
  const turns = context.rejectedTurns + 1;
  const reason: StopReason = {
    code: 'too_many_rejections',
    message: `calls were rejected by the host in ${turns} turns; the limit is ${context.policy.maxRejectedTurns}`,
  };
  const failed = context.batch?.calls.findLast((c) => c.observation?.ok === false)?.observation;
  if (failed && !failed.ok) reason.detail = { lastFailure: { tool: failed.tool, code: failed.code } };
  return stop(context, event, 'failed', reason);
};

export const stopForLoop: Step = (context, event) => {
  const { verdicts } = outputOf(event, 'vet');
  const repeated = verdicts.find((v) => {
    const proposed = B.findCall(context.batch, v.callId);
    return proposed !== undefined && context.proposedSinceNew.includes(callKey(proposed.tool, v.argsHash));
  });
  const call = repeated && B.findCall(context.batch, repeated.callId);
  const message = `the model proposed ${call?.tool ?? 'a call'} again with the same arguments and nothing new was observed`;
  const batch = context.batch && B.applyVerdicts(context.batch, verdicts);
  const result = stop({ ...context, batch }, event, 'failed', { code: 'loop_detected', message }, { skipCode: 'loop_detected' });
  result.audit!.unshift(
    gate(context, event, {
      gate: 'loop',
      decision: 'stop',
      call: call ? { ...call, argsHash: repeated.argsHash } : undefined,
      code: 'loop_detected',
      summary: message,
    }),
  );
  return result;
};

export const stopForUnknownWrite: Step = (context, event) => {
  const call = runningCall(context)!;
  const summary = `the outcome of ${call.tool} could not be established; look it up with idempotency key ${call.idempotencyKey}`;
  const batch = B.finishCall(context.batch!, call.callId, B.rejection(call, 'outcome_unknown', summary, undefined, false));
  const result = stop(
    { ...context, batch },
    event,
    'review_required',
    {
      code: 'write_outcome_unknown',
      message: summary,
      detail: { tool: call.tool, idempotencyKey: call.idempotencyKey, callId: call.callId },
    },
    { skipCode: 'skipped_pending_review' },
  );
  result.audit!.unshift(lookupEntry(context, event, call));
  return result;
};

// --- model turns ------------------------------------------------------------------------------------------

export const startModelTurn: Step = (context, event) => {
  const turn = context.turn + 1;
  const next = { ...context, turn };
  return {
    context: { turn, budget: debit(context.budget, modelTurnNeed(context.modelReservation)) },
    audit: [
      gate(next, event, { gate: 'budget', decision: 'pass', code: null, summary: 'model turn within budget' }),
      entry(next, event, { kind: 'model_requested', reservation: context.modelReservation }),
    ],
  };
};

/** Settles the turn's reservation to actual usage and debits transport retries, before the event is handled. */
export const settleModelTurn: Step = (context, event) => {
  const output = outputOf(event, 'model');
  const { usage } = output;
  const tokens = usage.inputTokens + usage.outputTokens - context.modelReservation.tokens;
  const costMicros = usage.costMicros - context.modelReservation.costMicros;
  return {
    context: { budget: debit(context.budget, { tokens, costMicros, retries: retriesWithin(context, output.retriesUsed) }) },
    audit: [
      entry(context, event, {
        kind: 'model_output',
        output: output.type,
        usage,
        calls: output.type === 'model.toolsProposed' ? output.calls.length : 0,
      }),
    ],
  };
};

function invalidOutput(context: AgentContext, event: AnyAgentEvent, detail: string): StepResult {
  return {
    context: { invalidOutputs: context.invalidOutputs + 1 },
    transcript: [{ kind: 'invalid_output', at: at(context, event), turn: context.turn, detail }],
  };
}

export const recordInvalidOutput: Step = (context, event) =>
  invalidOutput(context, event, event.type === 'model.invalidOutput' ? event.detail : 'unusable output');

export const recordUnpairableProposal: Step = (context, event) => {
  if (event.type !== 'model.toolsProposed') return {};
  const verdict = protocolVerdict(event.calls, context.catalog, context.policy);
  const problems = verdict.kind === 'unpairable' ? verdict.problems : [];
  const detail = `tool calls must each have a unique call id: ${problems.map((p) => p.summary).join('; ')}`;
  const result = invalidOutput(context, event, detail);
  result.audit = problems.map((p) =>
    gate(context, event, {
      gate: 'protocol',
      decision: 'reject',
      call: { callId: p.callId ?? `#${p.index + 1}`, tool: event.calls[p.index]?.name ?? '', argsHash: null },
      code: p.code,
      summary: p.summary,
    }),
  );
  return result;
};

function proposalEntry(context: AgentContext, event: AnyAgentEvent): TranscriptEntry {
  if (event.type !== 'model.toolsProposed') throw new Error('expected model.toolsProposed');
  return {
    kind: 'proposal',
    at: event.at,
    turn: context.turn,
    text: event.text,
    calls: event.calls.map((c) => ({ callId: c.callId!.trim(), tool: c.name, arguments: c.arguments })),
  };
}

export const rejectWholeBatch: Step = (context, event) => {
  if (event.type !== 'model.toolsProposed') return {};
  const verdict = protocolVerdict(event.calls, context.catalog, context.policy);
  if (verdict.kind !== 'rejected') return {};
  const batch = B.rejectedBatch(context.turn, event.calls, verdict.problems, context.catalog);
  return {
    context: { batch, pendingConfirmation: null },
    transcript: [proposalEntry(context, event)],
    audit: verdict.problems.map((p, i) =>
      gate(context, event, {
        gate: 'protocol',
        decision: 'reject',
        call: { callId: batch.calls[i]!.callId, tool: batch.calls[i]!.tool, argsHash: null },
        code: p.code,
        summary: p.summary,
      }),
    ),
  };
};

export const acceptProposal: Step = (context, event) => {
  if (event.type !== 'model.toolsProposed') return {};
  const verdict = protocolVerdict(event.calls, context.catalog, context.policy);
  if (verdict.kind !== 'accepted') return {};
  return {
    context: { batch: B.createBatch(context.turn, verdict.calls, context.catalog), pendingConfirmation: null },
    transcript: [proposalEntry(context, event)],
    audit: [
      gate(context, event, {
        gate: 'protocol',
        decision: 'pass',
        code: null,
        summary: `${verdict.calls.length} call(s) with unique ids, known tools and well-formed JSON`,
      }),
    ],
  };
};

export const recordQuestion: Step = (context, event) => {
  if (event.type !== 'model.askedUser') return {};
  return {
    context: { question: event.question, waitingSince: event.at },
    transcript: [{ kind: 'question', at: event.at, turn: context.turn, text: event.question }],
  };
};

export const recordUserAnswer: Step = (context, event) => {
  if (event.type !== 'user.answered') return {};
  return {
    context: { question: null, ...endWait(context, event) },
    transcript: [{ kind: 'user_answer', at: event.at, text: event.text }],
    audit: [entry(context, event, { kind: 'user_answered', userId: event.userId })],
  };
};

export const finishDone: Step = (context, event) => {
  if (event.type !== 'model.answered') return {};
  const evidence = context.evidence.at(-1);
  const message = evidence
    ? `goal met: ${evidence.tool} returned ${describeFields(evidence.fields)}`
    : 'the model answered; the task declares no success criterion';
  const result = stop(context, event, 'done', { code: 'goal_met', message }, { answer: event.text });
  result.transcript!.push({ kind: 'answer', at: event.at, turn: context.turn, text: event.text });
  return result;
};

/** An answer without a trusted result: never "done", and flagged whatever the answer claims. */
export const finishUnmetGoal: Step = (context, event) => {
  if (event.type !== 'model.answered') return {};
  const failure = context.lastFailure;
  const wanted = context.success?.description ?? `a trusted result of ${context.success?.tool}`;
  const reason: StopReason =
    failure && UNKNOWN_OUTCOME_CODES.has(failure.code)
      ? {
          code: 'could_not_verify',
          message: `could not verify: ${failure.tool} ended with ${failure.code}; nothing shows ${wanted}`,
          detail: { flag: 'answer_without_trusted_result', lastFailure: failure },
        }
      : {
          code: 'goal_not_met',
          message: `the model answered, but no trusted result shows ${wanted}${failure ? ` (last failure: ${failure.tool} ${failure.code})` : ''}`,
          detail: { flag: 'answer_without_trusted_result', lastFailure: failure },
        };
  const result = stop(context, event, 'failed', reason, { answer: event.text });
  result.transcript!.push({ kind: 'answer', at: event.at, turn: context.turn, text: event.text });
  return result;
};

export const finishRefused: Step = (context, event) => {
  if (event.type !== 'model.refused') return {};
  const result = stop(context, event, 'failed', { code: 'model_refused', message: `the model refused: ${event.reason}` });
  result.transcript!.push({ kind: 'refusal', at: event.at, turn: context.turn, text: event.reason });
  return result;
};

// --- vetting ----------------------------------------------------------------------------------------------

export const applyVerdicts: Step = (context, event) => {
  const { verdicts } = outputOf(event, 'vet');
  const batch = B.applyVerdicts(context.batch!, verdicts);
  const audit: AuditEntry[] = [];
  for (const verdict of verdicts) {
    const call = B.findCall(batch, verdict.callId);
    if (!call) continue;
    for (const decision of verdict.gates) {
      audit.push(
        gate(context, event, {
          gate: decision.gate,
          decision: decision.ok ? 'pass' : 'reject',
          call,
          code: decision.code,
          summary: decision.summary,
        }),
      );
    }
  }
  return { context: { batch, ...rememberProposals(context, batch, verdicts) }, audit };
};

function rememberProposals(context: AgentContext, batch: AgentContext['batch'], verdicts: Verdict[]) {
  const keys = verdicts.flatMap((v) => {
    const tool = B.findCall(batch, v.callId)?.tool;
    return tool ? [callKey(tool, v.argsHash)] : [];
  });
  return { proposedSinceNew: [...new Set([...context.proposedSinceNew, ...keys])].slice(-PROPOSED_SINCE_NEW) };
}

// --- executing --------------------------------------------------------------------------------------------

/** Closes the batch: every result goes to the transcript, paired by call id, and new knowledge is counted. */
export const closeBatch: Step = (context, event) => {
  const batch = context.batch!;
  let { knowledge, lastFailure } = context;
  const seen = [...context.seenObservations];
  const transcript: TranscriptEntry[] = [];
  for (const call of batch.calls) {
    const observation = call.observation!;
    transcript.push({ kind: 'result', at: at(context, event), turn: batch.turn, observation });
    const { callId: _ignored, ...content } = observation;
    const print = fingerprint(content);
    if (!seen.includes(print)) {
      seen.push(print);
      knowledge += 1;
    }
    if (!observation.ok) lastFailure = { tool: call.tool, code: observation.code, summary: observation.summary };
  }
  const rejected = hasHostRejection(batch);
  return {
    context: {
      batch: { ...batch, closed: true },
      knowledge,
      // Something new was observed: earlier proposals may be worth making again.
      proposedSinceNew: knowledge === context.knowledge ? context.proposedSinceNew : [],
      lastFailure: batch.calls.some((c) => c.observation?.ok === false) ? lastFailure : null,
      seenObservations: seen.slice(-SEEN_OBSERVATIONS),
      rejectedTurns: context.rejectedTurns + (rejected ? 1 : 0),
    },
    transcript,
  };
};

export const startReads: Step = (context, event) => {
  const step = B.nextStep(context.batch)!;
  let batch = context.batch!;
  const audit: AuditEntry[] = [
    gate(context, event, { gate: 'budget', decision: 'pass', code: null, summary: `${step.callIds.length} read(s) within budget` }),
  ];
  for (const callId of step.callIds) {
    const call = B.findCall(batch, callId)!;
    batch = B.updateCall(batch, callId, { phase: 'running' });
    audit.push(startedEntry(context, event, call, 1));
  }
  return { context: { batch, budget: debit(context.budget, { toolCalls: step.callIds.length }) }, audit };
};

function startedEntry(context: AgentContext, event: AnyAgentEvent, call: CallState, attempt: number): AuditEntry {
  return entry(context, event, {
    kind: 'tool_started',
    callId: call.callId,
    tool: call.tool,
    effect: call.effect,
    argsHash: call.argsHash,
    args: call.redactedArgs,
    idempotencyKey: call.idempotencyKey,
    attempt,
    confirmationId: call.confirmedBy?.confirmationId ?? null,
  });
}

function finishedEntry(context: AgentContext, event: AnyAgentEvent, call: CallState, code: string, durationMs: number, attempts: number) {
  return entry(context, event, {
    kind: 'tool_finished',
    callId: call.callId,
    tool: call.tool,
    code,
    durationMs,
    attempts,
    idempotencyKey: call.idempotencyKey,
  });
}

function withEvidence(context: AgentContext, call: CallState, value: Json) {
  const found = B.evidenceFrom(context.success, call, value);
  return found ? [...context.evidence, found].slice(-8) : context.evidence;
}

export const finishReads: Step = (context, event) => {
  const output = outputOf(event, 'reads');
  let batch = context.batch!;
  let evidence = context.evidence;
  const audit: AuditEntry[] = [];
  for (const result of output.results) {
    const call = B.findCall(batch, result.callId);
    if (!call || call.phase !== 'running') continue;
    const observation = B.observationOf(call, result.outcome, context.policy.observationCapBytes);
    batch = B.finishCall(batch, call.callId, observation);
    if (result.outcome.kind === 'ok') evidence = withEvidence({ ...context, evidence }, call, result.outcome.value);
    audit.push(finishedEntry(context, event, call, codeOf(observation), result.durationMs, result.attempts));
  }
  // A read the executor did not report is still paired with a result.
  for (const call of batch.calls.filter((c) => c.phase === 'running')) {
    batch = B.finishCall(batch, call.callId, B.rejection(call, 'internal_error', 'the host lost this read', undefined, false));
  }
  return { context: { batch, evidence, budget: debit(context.budget, { retries: retriesWithin(context, output.retriesUsed) }) }, audit };
};

function codeOf(observation: Observation): string {
  return observation.ok ? 'ok' : observation.code;
}

export const startWrite: Step = (context, event) => {
  const call = currentCall(context)!;
  const audit: AuditEntry[] = [
    gate(context, event, { gate: 'budget', decision: 'pass', call, code: null, summary: 'write within budget' }),
    gate(context, event, {
      gate: 'confirmation',
      decision: 'pass',
      call,
      code: null,
      summary: call.confirmedBy
        ? `confirmed by ${call.confirmedBy.userId} (${call.confirmedBy.confirmationId}) for exactly these arguments`
        : 'no confirmation required by the tool policy',
    }),
    startedEntry(context, event, call, 1),
  ];
  return {
    context: {
      batch: B.updateCall(context.batch!, call.callId, { phase: 'running', writeAttempts: 1 }),
      budget: debit(context.budget, { toolCalls: 1, writes: 1 }),
      pendingConfirmation: null,
    },
    audit,
  };
};

export const finishWrite: Step = (context, event) => {
  const output = outputOf(event, 'write');
  const call = runningCall(context)!;
  const observation = B.observationOf(call, output.outcome, context.policy.observationCapBytes);
  return {
    context: {
      batch: B.finishCall(context.batch!, call.callId, observation),
      evidence: output.outcome.kind === 'ok' ? withEvidence(context, call, output.outcome.value) : context.evidence,
      writtenKeys: output.outcome.kind === 'ok' ? written(context, call) : context.writtenKeys,
    },
    audit: [finishedEntry(context, event, call, codeOf(observation), output.durationMs, call.writeAttempts)],
  };
};

/** A write whose effect may have happened: it is looked up by its idempotency key before anything else. */
export const noteUnknownWrite: Step = (context, event) => {
  const call = runningCall(context)!;
  let code = 'outcome_unknown';
  let durationMs = 0;
  if (event.type === 'xstate.done.actor.write') {
    code = event.output.outcome.kind === 'unknown' ? event.output.outcome.code : code;
    durationMs = event.output.durationMs;
  }
  return {
    context: { batch: B.updateCall(context.batch!, call.callId, { lookups: call.lookups + 1 }) },
    audit: [finishedEntry(context, event, call, code, durationMs, call.writeAttempts)],
  };
};

export const finishReconciledWrite: Step = (context, event) => {
  const output = outputOf(event, 'lookup');
  const call = runningCall(context)!;
  if (output.result.kind !== 'found') return {};
  const observation = B.observationOf(call, { kind: 'ok', value: output.result.value }, context.policy.observationCapBytes);
  return {
    context: {
      batch: B.finishCall(context.batch!, call.callId, observation),
      evidence: withEvidence(context, call, output.result.value),
      writtenKeys: written(context, call),
    },
    audit: [lookupEntry(context, event, call)],
  };
};

function written(context: AgentContext, call: CallState): string[] {
  if (!call.idempotencyKey || context.writtenKeys.includes(call.idempotencyKey)) return context.writtenKeys;
  return [...context.writtenKeys, call.idempotencyKey].slice(-WRITTEN_KEYS);
}

/** The same business intent already succeeded in this task: it is not sent again, and the model is told. */
export const refuseDuplicateWrite: Step = (context, event) => {
  const call = currentCall(context)!;
  const summary = `this write (same tool and arguments) already succeeded in this task; it was not sent again`;
  return {
    context: { batch: B.finishCall(context.batch!, call.callId, B.rejection(call, 'duplicate_write', summary, 'loop', false)) },
    audit: [gate(context, event, { gate: 'loop', decision: 'reject', call, code: 'duplicate_write', summary })],
  };
};

/** Looked up and not found after a cancel: the write is not sent again, and the task ends as cancelled. */
export const abandonWriteForCancel: Step = (context, event) => {
  const call = runningCall(context)!;
  const summary = `looked up by idempotency key ${call.idempotencyKey}: not found; not sent again because the task was cancelled`;
  return {
    context: { batch: B.finishCall(context.batch!, call.callId, B.rejection(call, 'not_executed', summary, undefined, false)) },
    audit: [lookupEntry(context, event, call)],
  };
};

function lookupEntry(context: AgentContext, event: AnyAgentEvent, call: CallState): AuditEntry {
  const output = event.type === 'xstate.done.actor.lookup' ? event.output : null;
  return entry(context, event, {
    kind: 'write_lookup',
    callId: call.callId,
    tool: call.tool,
    idempotencyKey: call.idempotencyKey!,
    result: output?.result.kind ?? 'inconclusive',
    durationMs: output?.durationMs ?? 0,
  });
}

export const retryWriteWithSameKey: Step = (context, event) => {
  const call = runningCall(context)!;
  const attempt = call.writeAttempts + 1;
  return {
    context: {
      batch: B.updateCall(context.batch!, call.callId, { writeAttempts: attempt }),
      budget: debit(context.budget, { retries: 1 }),
    },
    audit: [lookupEntry(context, event, call), startedEntry(context, event, call, attempt)],
  };
};

export const lookUpAgain: Step = (context, event) => {
  const call = runningCall(context)!;
  return {
    context: {
      batch: B.updateCall(context.batch!, call.callId, { lookups: call.lookups + 1 }),
      budget: debit(context.budget, { retries: 1 }),
    },
    audit: [lookupEntry(context, event, call)],
  };
};

// --- confirmation -----------------------------------------------------------------------------------------

export const requestConfirmation: Step = (context, event) => {
  const call = currentCall(context)!;
  return askFor(context, event, call);
};

function askFor(context: AgentContext, event: AnyAgentEvent, call: CallState): StepResult {
  const pending = newConfirmation(context, call, at(context, event));
  return {
    context: {
      pendingConfirmation: pending,
      waitingSince: context.waitingSince ?? pending.requestedAt,
      batch: B.updateCall(context.batch!, call.callId, { confirmationRequests: pending.request, confirmedBy: null }),
    },
    audit: [
      confirmationEntry(context, event, 'requested', pending, null, null),
    ],
  };
}

function confirmationEntry(
  context: AgentContext,
  event: AnyAgentEvent,
  action: Extract<AuditEntry, { kind: 'confirmation' }>['action'],
  pending: NonNullable<AgentContext['pendingConfirmation']>,
  userId: string | null,
  code: string | null,
): AuditEntry {
  return entry(context, event, {
    kind: 'confirmation',
    action,
    confirmationId: pending.id,
    callId: pending.callId,
    tool: pending.tool,
    argsHash: pending.argsHash,
    userId,
    code,
    expiresAt: action === 'requested' ? pending.expiresAt : null,
  });
}

export const grantConfirmation: Step = (context, event) => {
  const pending = context.pendingConfirmation!;
  if (event.type !== 'user.confirmed') return {};
  return {
    context: {
      batch: B.updateCall(context.batch!, pending.callId, {
        confirmedBy: { confirmationId: pending.id, userId: event.userId, at: event.at },
      }),
      pendingConfirmation: null,
      ...endWait(context, event),
    },
    audit: [confirmationEntry(context, event, 'granted', pending, event.userId, null)],
  };
};

/** A confirm event that does not satisfy the pending confirmation: audited, nothing else changes. */
export const refuseConfirmation: Step = (context, event) => {
  if (event.type !== 'user.confirmed') return {};
  const refusal = judgeConfirmation(context.pendingConfirmation, event) ?? 'unknown_confirmation';
  const pending = context.pendingConfirmation!;
  return {
    audit: [
      entry(context, event, {
        kind: 'confirmation',
        action: 'refused',
        confirmationId: event.confirmationId,
        callId: pending.callId,
        tool: pending.tool,
        argsHash: event.argsHash,
        userId: event.userId,
        code: refusal,
        expiresAt: null,
      }),
    ],
  };
};

/** Asks again with a fresh confirmation id and expiry (after expiry, a policy change or changed arguments). */
export const askConfirmationAgain: Step = (context, event) => {
  const refused = refuseConfirmation(context, event);
  const call = B.findCall(context.batch, context.pendingConfirmation!.callId)!;
  const asked = askFor(context, event, call);
  if (event.type === 'timer.confirmationExpired') {
    asked.audit!.unshift(confirmationEntry(context, event, 'expired', context.pendingConfirmation!, null, 'confirmation_expired'));
  }
  return { context: asked.context, audit: [...(refused.audit ?? []), ...asked.audit!] };
};

/** The call is not run: the user rejected it, or it was asked too many times. The model is told. */
function closeConfirmation(context: AgentContext, event: AnyAgentEvent, code: string, summary: string): StepResult {
  const pending = context.pendingConfirmation!;
  const call = B.findCall(context.batch, pending.callId)!;
  const userId = 'userId' in event ? event.userId : null;
  const action = code === 'confirmation_rejected' ? 'rejected' : 'expired';
  const refused = event.type === 'user.confirmed' ? refuseConfirmation(context, event).audit ?? [] : [];
  return {
    context: {
      batch: B.finishCall(context.batch!, call.callId, B.rejection(call, code, summary, 'confirmation', false)),
      pendingConfirmation: null,
      ...endWait(context, event),
    },
    audit: [...refused, confirmationEntry(context, event, action, pending, userId, code)],
  };
}

export const rejectConfirmedCall: Step = (context, event) =>
  closeConfirmation(
    context,
    event,
    'confirmation_rejected',
    `the user rejected this call${event.type === 'user.rejected' && event.reason ? `: ${event.reason}` : ''}; it was not run`,
  );

export const giveUpConfirmation: Step = (context, event) =>
  closeConfirmation(
    context,
    event,
    'confirmation_expired',
    `no valid confirmation after ${context.policy.maxConfirmationRequests} request(s); the call was not run`,
  );

// --- helpers ----------------------------------------------------------------------------------------------

/**
 * Retries an actor reports, never more than the allowance it was given (the remaining budget): the budget's
 * `used` cannot pass its limit even if an actor misreports.
 */
function retriesWithin(context: AgentContext, reported: number): number {
  const allowance = Math.max(0, context.budget.limits.retries - context.budget.used.retries);
  return Math.min(Math.max(0, Math.floor(reported)), allowance);
}

/** Ends a wait for a human: the deadline moves by the time waited, so waiting does not spend the budget. */
function endWait(context: AgentContext, event: AnyAgentEvent): Pick<AgentContext, 'waitingSince' | 'budget'> {
  if (context.waitingSince === null) return { waitingSince: null, budget: context.budget };
  const waited = Math.max(0, at(context, event) - context.waitingSince);
  return { waitingSince: null, budget: { ...context.budget, deadlineAt: context.budget.deadlineAt + waited } };
}

function describeFields(fields: Record<string, Json>): string {
  return Object.entries(fields)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(', ');
}

/** An error as a short safe string: its name and first line, without stack or nested causes. */
export function safeErrorText(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message.split('\n')[0]!.slice(0, 200)}`;
  return String(error).slice(0, 200);
}
