/** A task's start, its model turns, and what the model proposed or asked: gate (a), protocol, included. */
import type { MachineEvent } from '../actors.js';
import { outputOf } from '../actors.js';
import type { AgentContext, AgentInput } from '../context.js';
import { createBatch, rejectedBatch } from '../lib/batch.js';
import { ZERO_COUNTERS, debit, modelTurnNeed } from '../lib/budget.js';
import { protocolVerdict } from '../lib/protocol.js';
import { utf8Length } from '../lib/strictJson.js';
import { holdsSealedValue, identifiersIn, identifiersOf, observe } from '../lib/observedFacts.js';
import type { StartWarning, TranscriptEntry } from '../journal.js';
import type { OfferFacts, Toolkit } from '../toolkit.js';
import { auditEntry, gateEntry, timeOf } from '../journal.js';
import { type Step, type StepResult, endWait, retriesWithin } from './step.js';
import { canProposePlan, planOffer } from '../lib/plan.js';
import { currentStep } from '../lib/workflow.js';
import { compactionState } from '../compactions.js';

/** Builds the initial context from the host's task input. */
export function initialContext(input: AgentInput): AgentContext {
  const sealedGoal = holdsSealedValue(input.goal);
  // What the user wrote and who they are: an answer may name these without any tool having returned them.
  const userIds = [
    input.principal.userId,
    input.principal.tenantId,
    ...identifiersIn(input.goal),
    ...(input.mandate ? identifiersOf(input.mandate.terms) : []),
  ];
  return {
    taskId: input.taskId,
    goal: input.goal,
    principal: input.principal,
    mandate: input.mandate,
    catalog: input.catalog,
    policy: input.policy,
    provenance: input.provenance,
    budget: {
      limits: input.limits,
      used: { ...ZERO_COUNTERS },
      largestTurn: { tokens: 0, costMicros: 0 },
      deadlineAt: input.startedAt + input.limits.wallClockMs,
    },
    modelReservation: input.modelReservation,
    success: input.success,
    startedAt: input.startedAt,
    // A fork's next model turn follows the turns it copied.
    turn: input.fork?.turns ?? 0,
    batch: null,
    pendingConfirmation: null,
    question: null,
    questionExpiresAt: null,
    review: null,
    outage: null,
    waitingSince: null,
    evidence: [],
    knowledge: 0,
    seenObservations: [],
    proposedSinceNew: [],
    writtenKeys: [],
    denied: [],
    unverified: [],
    exposure: { untrustedInput: null, sensitiveData: sealedGoal ? { source: 'goal', at: input.startedAt } : null },
    observedIds: observe(
      [],
      userIds.filter((id) => /^[\w-]{2,64}$/.test(id)),
    ),
    rejectedTurns: 0,
    invalidOutputs: 0,
    lastFailure: null,
    cancelRequested: null,
    succeeded: [],
    offered: null,
    compensable: [],
    away: null,
    unwinding: null,
    plan: null,
    workflow: input.workflow
      ? { name: input.workflow.name, current: input.workflow.start, facts: {}, runs: 0, problem: null }
      : null,
    tools: input.tools ?? null,
    parent: input.parent ?? null,
    subtasks: [],
    forkedFrom: input.fork?.from ?? null,
    compaction: compactionState(input.compaction),
    outcome: null,
  };
}

/**
 * A fork's copied transcript: carried by the start's input (`xstate.init`), recorded once as the copy's first entries
 * after its goal, and never kept in context.
 */
function copiedTranscript(event: unknown): TranscriptEntry[] {
  const input = (event as { input?: AgentInput } | null)?.input;
  return (input?.fork?.transcript ?? []) as TranscriptEntry[];
}

export const recordTaskStarted: Step = (context, event, toolkit) => ({
  audit: [
    auditEntry(context, event, {
      kind: 'task_started',
      userId: context.principal.userId,
      tenantId: context.principal.tenantId,
      scopes: context.principal.scopes,
      goal: context.goal,
      mandate: context.mandate,
      limits: context.budget.limits,
      policyVersion: context.policy.version,
      loosened: context.policy.loosened,
      warnings: startWarnings(context, toolkit),
      ...(context.workflow ? { workflow: context.workflow.name } : {}),
      ...(context.forkedFrom ? { forkedFrom: context.forkedFrom } : {}),
    }),
  ],
  transcript: [{ kind: 'goal', at: context.startedAt, text: context.goal }, ...copiedTranscript(event)],
});

/**
 * What is worth a warning about how the task was started: it may write, yet declares no success criterion, so it can
 * at best end `answered` (never `done`) however its writes went.
 */
function startWarnings(context: AgentContext, toolkit: Toolkit): StartWarning[] {
  if (context.success !== null) return [];
  const writes = Object.entries(context.catalog).some(
    ([name, facts]) =>
      facts.effect === 'write' &&
      (toolkit.rules(name)?.scopes ?? []).every((scope) => context.principal.scopes.includes(scope)),
  );
  return writes ? ['no_success_criterion'] : [];
}

/** Debits the turn (one model turn, its token and cost reservation) before the model is asked. */
export const startModelTurn: Step = (context, event, toolkit) => {
  const turn = context.turn + 1;
  const need = modelTurnNeed(context.modelReservation, context.budget);
  const hosts = offeredTools(toolkit, {
    turn,
    succeeded: context.succeeded,
    mandateKind: context.mandate?.kind ?? null,
  });
  // A plan in force narrows the offer further, to its ready steps' tools.
  // A workflow's decision turn offers no tool (only the decision); a plan in force narrows the offer to its ready steps.
  const planned = currentStep(context, toolkit)?.step.decide ? [] : planOffer(context);
  const offered = planned === null ? hosts : hosts === null ? planned : planned.filter((t) => hosts.includes(t));
  const gate = gateEntry(context, event, {
    gate: 'budget',
    decision: 'pass',
    code: null,
    summary: 'model turn within budget',
  });
  const requested = auditEntry(context, event, {
    kind: 'model_requested',
    reservation: { tokens: need.tokens ?? 0, costMicros: need.costMicros ?? 0 },
    ...(offered ? { offered } : {}),
    ...(canProposePlan(context) ? { planOffered: true } : {}),
  });
  // Stamped with the new turn: set in place (the key keeps its place), rather than a copy of the context to stamp.
  gate.turn = turn;
  requested.turn = turn;
  return { context: { turn, budget: debit(context.budget, need), offered }, audit: [gate, requested] };
};

/** Settles the turn's reservation to actual usage and debits transport retries, before its event is handled. */
export const settleModelTurn: Step = (context, event) => {
  const output = outputOf(event, 'model');
  if (output.kind !== 'replied') return {};
  const { usage } = output.event;
  // What the turn reserved when it started (the largest turn is only ever raised here, after the reservation).
  const reserved = modelTurnNeed(context.modelReservation, context.budget);
  const spent = { tokens: usage.inputTokens + usage.outputTokens, costMicros: usage.costMicros };
  const largest = context.budget.largestTurn;
  const largestTurn = {
    tokens: Math.max(largest.tokens, spent.tokens),
    costMicros: Math.max(largest.costMicros, spent.costMicros),
  };
  const tokens = spent.tokens - (reserved.tokens ?? 0);
  const costMicros = spent.costMicros - (reserved.costMicros ?? 0);
  // From here on the task's entries name the model that answered (the version its provider reported).
  const provenance = output.provenance ?? context.provenance;
  const invalid =
    output.event.type === 'model.invalidOutput'
      ? { detail: output.event.detail, received: output.event.received ?? null }
      : {};
  const entry = auditEntry(context, event, {
    kind: 'model_output',
    output: output.event.type,
    usage,
    calls: output.event.type === 'model.toolsProposed' ? output.event.calls.length : 0,
    ...invalid,
    ...(output.compaction ? { compaction: output.compaction } : {}),
  });
  // Stamped with the provenance that answered: set in place (the keys keep their places), not a context copy.
  entry.model = provenance.model;
  entry.prompt = provenance.prompt;
  const budget = debit(context.budget, { tokens, costMicros, retries: retriesWithin(context, output.retriesUsed) });
  // The model answered: an outage the task was waiting out is over.
  return { context: { budget: { ...budget, largestTurn }, outage: null, provenance }, audit: [entry] };
};

function invalidOutput(context: AgentContext, event: MachineEvent, detail: string): StepResult {
  return {
    context: { invalidOutputs: context.invalidOutputs + 1 },
    transcript: [{ kind: 'invalid_output', at: timeOf(context, event), turn: context.turn, detail }],
  };
}

export const recordInvalidOutput: Step = (context, event) =>
  invalidOutput(context, event, event.type === 'model.invalidOutput' ? event.detail : 'unusable output');

/** Call ids missing or repeated: no result could be paired with its call, so the model is asked again. */
export const recordUnpairableProposal: Step = (context, event) => {
  if (event.type !== 'model.toolsProposed') return {};
  const verdict = protocolVerdict(event.calls, context.catalog, context.policy);
  const problems = verdict.kind === 'unpairable' ? verdict.problems : [];
  const result = invalidOutput(
    context,
    event,
    `tool calls must each have a unique call id: ${problems.map((p) => p.summary).join('; ')}`,
  );
  result.audit = problems.map((p) =>
    gateEntry(context, event, {
      gate: 'protocol',
      decision: 'reject',
      call: { callId: p.callId ?? `#${p.index + 1}`, tool: event.calls[p.index]?.name ?? '', argsHash: null },
      code: p.code,
      summary: p.summary,
    }),
  );
  return result;
};

function proposalEntry(context: AgentContext, event: MachineEvent): TranscriptEntry {
  if (event.type !== 'model.toolsProposed') throw new Error('expected model.toolsProposed');
  return {
    kind: 'proposal',
    at: event.at,
    turn: context.turn,
    text: event.text,
    calls: event.calls.map((c) => ({
      callId: c.callId!.trim(),
      tool: keptName(c.name),
      arguments: keptArguments(c.arguments, context.policy.maxArgumentBytes),
    })),
  };
}

/**
 * Arguments over the limit are refused at the protocol gate; the transcript keeps a short JSON placeholder instead of
 * them, so that they are neither stored nor sent back to the model on every later turn.
 */
export function keptArguments(text: string, maxBytes: number): string {
  const bytes = utf8Length(text);
  if (bytes <= maxBytes) return text;
  return JSON.stringify({
    omitted_by_host: `arguments of ${bytes} bytes were refused (the limit is ${maxBytes} bytes)`,
  });
}

/** A tool name no tool can have (a catalog name is at most 64 characters) is kept cut. */
function keptName(name: string): string {
  return name.length <= 128 ? name : `${name.slice(0, 128)}…`;
}

/** Refused whole at the protocol gate: every call gets its paired rejection, and nothing in the batch runs. */
export const rejectWholeBatch: Step = (context, event) => {
  if (event.type !== 'model.toolsProposed') return {};
  const verdict = protocolVerdict(event.calls, context.catalog, context.policy);
  if (verdict.kind !== 'rejected') return {};
  const batch = rejectedBatch(context.turn, event.calls, verdict.problems, context.catalog);
  return {
    context: { batch, pendingConfirmation: null },
    transcript: [proposalEntry(context, event)],
    audit: verdict.problems.map((p, i) =>
      gateEntry(context, event, {
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
    context: { batch: createBatch(context.turn, verdict.calls, context.catalog), pendingConfirmation: null },
    transcript: [proposalEntry(context, event)],
    audit: [
      gateEntry(context, event, {
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
    context: {
      question: event.question,
      questionExpiresAt: event.at + context.policy.answerTtlMs,
      waitingSince: event.at,
    },
    transcript: [{ kind: 'question', at: event.at, turn: context.turn, text: event.question }],
  };
};

export const recordUserAnswer: Step = (context, event) => {
  if (event.type !== 'user.answered') return {};
  const sensitive = context.exposure.sensitiveData === null && holdsSealedValue(event.text);
  return {
    context: {
      question: null,
      questionExpiresAt: null,
      ...endWait(context, event),
      // The user's own words: an answer may name what they named.
      observedIds: observe(context.observedIds, identifiersIn(event.text)),
      ...(sensitive
        ? { exposure: { ...context.exposure, sensitiveData: { source: 'user_answer', at: event.at } } }
        : {}),
    },
    transcript: [{ kind: 'user_answer', at: event.at, text: event.text }],
    audit: [auditEntry(context, event, { kind: 'user_answered', userId: event.userId })],
    reply: { accepted: true, code: null, message: 'answer passed to the model' },
  };
};

/**
 * The tools the host's offer rule gives this turn, or null when there is no rule. Fails closed: a rule that throws,
 * returns a promise or something that is not a list of names offers nothing.
 */
export function offeredTools(toolkit: Toolkit, facts: OfferFacts): string[] | null {
  if (!toolkit.offer) return null;
  try {
    const names = toolkit.offer(facts) as unknown;
    if (names instanceof Promise) {
      names.catch(() => {});
      return [];
    }
    if (!Array.isArray(names)) return [];
    return [...new Set(names.filter((name): name is string => typeof name === 'string' && name.length <= 256))].slice(
      0,
      256,
    );
  } catch {
    return [];
  }
}
