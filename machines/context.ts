/**
 * The data the agent machine owns, defined once as zod schemas; every TypeScript type here is inferred from them.
 * The same schemas validate a persisted envelope on load (`src/store/envelope.ts`) and the host's input at the
 * API edge (`src/orchestrator/options.ts`), so a new field is one edit here plus, for stored tasks, a migration.
 *
 * Everything is plain JSON because it is persisted: no Dates, no Errors, no functions. Failures are values with a
 * stable snake_case `code` (see `failures.ts`).
 */
import { z } from 'zod';
import { batchSchema, effectSchema, pendingConfirmationSchema } from './calls.js';
import { MAX_COMPENSABLE, compensableWriteSchema, compensationSchema, unwindingSchema } from './compensations.js';
import { FINAL_STATUSES, STOP_CODES } from './failures.js';
import { planSchema, planningStateSchema } from './plans.js';
import { workflowStateSchema } from './workflows.js';
import { NO_COMPACTION, compactionSettingsSchema, compactionStateSchema } from './compactions.js';
import { policySchema } from './policy.js';
import { MAX_SUBTASKS, parentLinkSchema, subtaskLinkSchema } from './subtasks.js';
import { SHORT, budgetCounterShape, count, id, jsonSchema, principalSchema, time } from './lib/schemaParts.js';
import { INPUT_LIMITS } from './limits.js';
import type { Json } from './lib/strictJson.js';

export type { Json };
export { jsonSchema, principalSchema };
export * from './calls.js';
export * from './compensations.js';
export * from './plans.js';
export * from './workflows.js';
export * from './compactions.js';
export * from './subtasks.js';
export * from './policy.js';

/**
 * What the host derived from the user's request before the task started: structured terms (a slot, an order and a
 * maximum amount...) of a kind the host defines with its own zod schema (`defineMandate`). Persisted at start and
 * never changed by the task; each tool says how its arguments must relate to it, and writes outside it are refused.
 */
export const mandateSchema = z.strictObject({
  kind: z.string().min(1).max(SHORT),
  terms: jsonSchema,
  /** Unique per mandate (`MandateKind.of` mints it): a mandate authorises one task. Tasks stored before have none. */
  id: z.string().min(1).max(128).optional(),
});

/** What the chart persists about a tool at task start: the facts an in-flight call depends on. */
export const toolFactsSchema = z.strictObject({
  effect: effectSchema,
  /** Declared by the tool: re-sending a write with the same idempotency key never duplicates it. */
  sameKeyRetrySafe: z.boolean(),
  /** The tool's version when the task started (the host's `version`, or a hash of the tool's contract). */
  version: z.string().min(1).max(SHORT).optional(),
});

export const catalogSchema = z.record(z.string().min(1).max(SHORT), toolFactsSchema);

/** Budget limits of a task. `wallClockMs` becomes an absolute deadline at start. */
export const budgetLimitsSchema = z.strictObject({ ...budgetCounterShape, wallClockMs: z.number().int().positive() });

/** Used amounts: whole units; tokens and cost settle to reported usage after a reservation, so no lower bound. */
export const budgetCountersSchema = z.strictObject({
  modelTurns: z.number().int(),
  toolCalls: z.number().int(),
  writes: z.number().int(),
  retries: z.number().int(),
  tokens: z.number().int(),
  costMicros: z.number().int(),
  money: z.number().int(),
});

export const budgetStateSchema = z.strictObject({
  limits: budgetLimitsSchema,
  used: budgetCountersSchema,
  /**
   * The most one settled model turn has spent so far: a turn reserves at least this much, so a model that reserves
   * less than it spends (or nothing) cannot overrun the budget turn after turn.
   */
  largestTurn: z.strictObject({ tokens: count, costMicros: count }),
  /**
   * Absolute deadline (ms since epoch): startedAt + limits.wallClockMs, moved on by time spent waiting (for a human,
   * or for a model that is down).
   */
  deadlineAt: time,
});

/** What the model reserves per turn; checked and debited before the call starts. */
export const modelReservationSchema = z.strictObject({ tokens: count, costMicros: count });

/** A task's declaration of success: a trusted result of `tool` whose output matches `match` and has `require`. */
export const successCriterionSchema = z.strictObject({
  tool: z.string().min(1),
  match: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
  require: z.array(z.string()).optional(),
  /** Shown in outcomes, e.g. "a confirmed booking with an id". */
  description: z.string().optional(),
});

/** A trusted tool result that satisfied the success criterion. */
export const evidenceSchema = z.strictObject({
  tool: z.string(),
  callId: z.string(),
  idempotencyKey: z.string().nullable(),
  fields: z.record(z.string(), jsonSchema),
});

export const finalStatusSchema = z.enum(FINAL_STATUSES);

/** A machine-readable reason: stable `code`, readable `message`. */
export const stopReasonSchema = z.strictObject({
  code: z.enum(STOP_CODES),
  message: z.string(),
  detail: jsonSchema.optional(),
});

export const outcomeSchema = z.strictObject({
  status: finalStatusSchema,
  reason: stopReasonSchema,
  /** The model's final text, if any. Never evidence of success by itself. */
  answer: z.string().nullable(),
  /**
   * Trusted results: those that met the success criterion, or (a task without one) the writes that succeeded. Never
   * the model's text.
   */
  evidence: z.array(evidenceSchema),
  /**
   * Identifiers the answer names (a booking id, an order id) that no trusted tool result of the task returned and the
   * user did not write: a claim nothing supports. Absent in outcomes recorded before agent/6.
   */
  unsupportedIds: z.array(z.string().max(SHORT)).max(16).optional(),
  /** The writes this stop undid or tried to undo, newest first (absent when there were none to undo). */
  compensations: z.array(compensationSchema).max(MAX_COMPENSABLE).optional(),
  /** The plan in force when the task ended, its steps as tool results left them (absent without one). */
  plan: planSchema.optional(),
});

/** Limits of the bounded lists in the context, so the snapshot stays the same size however long a task runs. */
export const CONTEXT_BOUNDS = {
  evidence: 8,
  seenObservations: 16,
  proposedSinceNew: 32,
  writtenKeys: 64,
  denied: 32,
  unverified: 16,
  unverifiedArgs: 8,
  observedIds: 48,
  succeeded: 64,
} as const;

/**
 * A read tool whose latest results were unknown (it timed out, or could not be reached): what it was meant to
 * establish is unverified until a later read of the same tool, with the same arguments, succeeds.
 */
export const unverifiedReadSchema = z.strictObject({
  tool: z.string().min(1).max(SHORT),
  /** The code of the latest unknown result (`timeout`, `unavailable`...). */
  code: z.string().min(1).max(SHORT),
  /** Unknown results of the tool since its facts were last all verified. */
  times: z.number().int().positive(),
  at: time,
  /**
   * The reads that ended unknown, by their arguments (`callKey`'s hash part), newest last: a read of other arguments
   * verifies nothing of theirs. Absent in marks recorded before it: then any read of the tool that succeeds clears it.
   */
  args: z.array(z.string().min(1).max(64)).max(CONTEXT_BOUNDS.unverifiedArgs).optional(),
});

/** What the task has been exposed to, for the Rule of Two: where it first saw untrusted input and sensitive data. */
export const exposureSchema = z.strictObject({
  /** The tool whose output (marked untrusted) first reached the task, or null. */
  untrustedInput: z.strictObject({ tool: z.string(), at: time }).nullable(),
  /** Where a sealed (sensitive) value first appeared: `goal`, `user_answer`, or a tool's name; or null. */
  sensitiveData: z.strictObject({ source: z.string(), at: time }).nullable(),
});

/** A write whose outcome a human must establish: the task waits for a reviewer. */
export const reviewSchema = z.strictObject({
  callId: z.string(),
  tool: z.string(),
  idempotencyKey: z.string().nullable(),
  /** Why: `write_outcome_unknown` (lookups could not tell) or `needs_review` (the tool reported an inconsistency). */
  reason: z.enum(['write_outcome_unknown', 'needs_review']),
  summary: z.string(),
  since: time,
});

/** The model could not be reached after its retries: the task waits and tries again at `wakeAt`. */
export const outageSchema = z.strictObject({
  since: time,
  attempts: z.number().int().positive(),
  wakeAt: time,
  lastError: z.string(),
});

/**
 * Which model and which prompt the task's decisions came from, as of its latest model turn: the configured model
 * id, the version the provider reported (or the host pinned), and the version of the model adapter's prompt.
 */
export const provenanceSchema = z.strictObject({
  model: z.strictObject({ id: z.string().min(1).max(SHORT), version: z.string().min(1).max(SHORT).nullable() }),
  prompt: z.string().min(1).max(SHORT).nullable(),
});

/** A fork's marker: the task it is a copy of, and the step (audit entries) it was copied at. */
export const forkLinkSchema = z.strictObject({
  taskId: z.string().min(1).max(SHORT),
  step: z.number().int().nonnegative(),
});

export const agentContextSchema = z.strictObject({
  taskId: id,
  /** At most `INPUT_LIMITS.goal` characters as the host gives it; sealing the sensitive values in it can make it longer. */
  goal: z.string().min(1).max(INPUT_LIMITS.storedGoal),
  principal: principalSchema,
  /** What the user asked for, as the host derived it at start; never changed by the task. */
  mandate: mandateSchema.nullable(),
  catalog: catalogSchema,
  policy: policySchema,
  provenance: provenanceSchema,
  budget: budgetStateSchema,
  modelReservation: modelReservationSchema,
  success: successCriterionSchema.nullable(),
  startedAt: time,
  /** Model turns started so far (the current one included). */
  turn: count,
  batch: batchSchema.nullable(),
  pendingConfirmation: pendingConfirmationSchema.nullable(),
  /** Question the model asked the user, while waiting for the answer. */
  question: z.string().nullable(),
  /** When the question stops waiting for an answer (absolute). */
  questionExpiresAt: time.nullable(),
  /** The write a reviewer must resolve, while the task waits for review. */
  review: reviewSchema.nullable(),
  /** The model outage the task is waiting out, if any. */
  outage: outageSchema.nullable(),
  /**
   * When the task started waiting for a human (confirmation or answer), else null. Waiting time does not count
   * against the wall-clock budget: the deadline moves by the time waited when the wait ends.
   */
  waitingSince: time.nullable(),
  evidence: z.array(evidenceSchema).max(CONTEXT_BOUNDS.evidence),
  /** Increments whenever an observation carries information not seen before. */
  knowledge: count,
  /** Fingerprints of recent observations (bounded), to tell new information from repeats. */
  seenObservations: z.array(z.string()).max(CONTEXT_BOUNDS.seenObservations),
  /**
   * Calls (tool + short argument hash) proposed since the last new observation. Proposing one of them again is a
   * loop. Emptied whenever something new is observed, so it stays small.
   */
  proposedSinceNew: z.array(z.string()).max(CONTEXT_BOUNDS.proposedSinceNew),
  /** Idempotency keys of writes that succeeded in this task: the same business intent is never sent again. */
  writtenKeys: z.array(z.string()).max(CONTEXT_BOUNDS.writtenKeys),
  /** Calls (tool + short argument hash) refused at the permission or mandate gate, with the code they got. */
  denied: z.array(z.strictObject({ key: z.string(), code: z.string() })).max(CONTEXT_BOUNDS.denied),
  /** Read tools whose latest results were unknown: writes that depend on them are refused until they succeed. */
  unverified: z.array(unverifiedReadSchema).max(CONTEXT_BOUNDS.unverified),
  exposure: exposureSchema,
  /** Identifiers seen in trusted tool results and in the user's own text (newest kept), to check the final answer. */
  observedIds: z.array(z.string().max(64)).max(CONTEXT_BOUNDS.observedIds),
  rejectedTurns: count,
  invalidOutputs: count,
  /** The last failed observation, to explain an unmet goal. */
  lastFailure: z.strictObject({ tool: z.string(), code: z.string(), summary: z.string() }).nullable(),
  cancelRequested: z.strictObject({ reason: z.string(), by: z.string(), at: time }).nullable(),
  /** Tools that returned a trusted result so far, in the order they first did (what an offer rule sees). */
  succeeded: z.array(z.string().max(SHORT)).max(CONTEXT_BOUNDS.succeeded),
  /**
   * The tools offered to the model in the current turn by the host's offer rule, or null when there is none (every
   * tool the principal may use is offered). A call to a tool not in it is refused (`not_offered`).
   */
  offered: z.array(z.string().max(SHORT)).max(256).nullable(),
  /** Writes that succeeded and name a compensation, oldest first: what a stop may have to undo. */
  compensable: z.array(compensableWriteSchema).max(MAX_COMPENSABLE),
  /**
   * The task's user went away (the host said so): since when, and when a pause for it ends the task. Null while the
   * user is present (or nothing was said).
   */
  away: z.strictObject({ since: time, expiresAt: time }).nullable(),
  /** A stop whose compensations are running (the outcome is set once they have all run), else null. */
  unwinding: unwindingSchema.nullable(),
  /** The task's plans (plan-and-execute), or null while none was proposed. Absent in tasks stored before plans. */
  plan: planningStateSchema.nullable().default(null),
  /** The host-defined flow the task follows (`start({ workflow })`), or null. Absent in tasks stored before workflows. */
  workflow: workflowStateSchema.nullable().default(null),
  /**
   * The tools this task may use at all, or null: every installed tool its principal may use. A sub-task gets the
   * subset its tool names. Absent in tasks stored before sub-tasks.
   */
  tools: z.array(z.string().min(1).max(SHORT)).max(256).nullable().default(null),
  /** The task that started this one (a sub-task), or null. Absent in tasks stored before sub-tasks. */
  parent: parentLinkSchema.nullable().default(null),
  /** The children this task started through sub-task tools, oldest first. Absent in tasks stored before sub-tasks. */
  subtasks: z.array(subtaskLinkSchema).max(MAX_SUBTASKS).default([]),
  /** The task this one is a copy of (an operator's fork), or null. Absent in tasks stored before forks. */
  forkedFrom: forkLinkSchema.nullable().default(null),
  /** The conversation's estimated size and the summary of its older turns. Absent in tasks stored before it. */
  compaction: compactionStateSchema.default(NO_COMPACTION),
  outcome: outcomeSchema.nullable(),
});

/** Input of the agent machine: what the host decides at task start. */
export const agentInputSchema = z.strictObject({
  taskId: id,
  goal: agentContextSchema.shape.goal,
  principal: principalSchema,
  mandate: mandateSchema.nullable(),
  catalog: catalogSchema,
  policy: policySchema,
  provenance: provenanceSchema,
  limits: budgetLimitsSchema,
  modelReservation: modelReservationSchema,
  success: successCriterionSchema.nullable(),
  startedAt: time,
  /** The host-defined flow the task follows, by name, and its first step; or absent. */
  workflow: z.strictObject({ name: z.string().min(1).max(SHORT), start: z.string().min(1).max(SHORT) }).optional(),
  /** A sub-task: the tools it may use (a subset of its parent's) and its parent. */
  tools: z.array(z.string().min(1).max(SHORT)).max(256).optional(),
  parent: parentLinkSchema.optional(),
  /**
   * A fork (`orchestrator.fork`): the task it copies and the step, the model turns copied (the copy's next turn follows
   * them), and the copied transcript entries, recorded after the copy's goal as its first entries.
   */
  fork: z
    .strictObject({
      from: forkLinkSchema,
      turns: z.number().int().nonnegative(),
      transcript: z.array(jsonSchema).max(100_000),
    })
    .optional(),
  /** When the chart compacts the conversation, and who summarises it; absent: only after a provider's refusal. */
  compaction: compactionSettingsSchema.optional(),
});

/** Usage reported by a model turn. */
export const modelUsageSchema = z.strictObject({
  inputTokens: count,
  outputTokens: count,
  costMicros: count,
});

export type Principal = z.infer<typeof principalSchema>;
export type ForkLink = z.infer<typeof forkLinkSchema>;
export type Mandate = z.infer<typeof mandateSchema>;
export type Review = z.infer<typeof reviewSchema>;
export type UnverifiedRead = z.infer<typeof unverifiedReadSchema>;
export type Exposure = z.infer<typeof exposureSchema>;
export type Outage = z.infer<typeof outageSchema>;
export type Effect = z.infer<typeof effectSchema>;
export type ToolFacts = z.infer<typeof toolFactsSchema>;
export type Catalog = z.infer<typeof catalogSchema>;
export type BudgetLimits = z.infer<typeof budgetLimitsSchema>;
export type BudgetCounters = z.infer<typeof budgetCountersSchema>;
export type BudgetDimension = keyof BudgetCounters | 'wallClock';
export type BudgetState = z.infer<typeof budgetStateSchema>;
export type Provenance = z.infer<typeof provenanceSchema>;
export type ModelReservation = z.infer<typeof modelReservationSchema>;
export type SuccessCriterion = z.infer<typeof successCriterionSchema>;
export type Evidence = z.infer<typeof evidenceSchema>;
export type FinalStatus = z.infer<typeof finalStatusSchema>;
export type StopReason = z.infer<typeof stopReasonSchema>;
export type Outcome = z.infer<typeof outcomeSchema>;
export type AgentContext = z.infer<typeof agentContextSchema>;
export type AgentInput = z.infer<typeof agentInputSchema>;
export type ModelUsage = z.infer<typeof modelUsageSchema>;
