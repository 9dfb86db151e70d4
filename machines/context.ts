/**
 * The data the agent machine owns, defined once as zod schemas; every TypeScript type here is inferred from them.
 * The same schemas validate a persisted envelope on load (`src/store/envelope.ts`) and the host's input at the
 * API edge (`src/orchestrator/options.ts`), so a new field is one edit here plus, for stored tasks, a migration.
 *
 * Everything is plain JSON because it is persisted: no Dates, no Errors, no functions. Failures are values with a
 * stable snake_case `code` (see `failures.ts`).
 */
import { z } from 'zod';
import { FINAL_STATUSES, STOP_CODES } from './failures.js';
import type { Json } from './lib/strictJson.js';

export type { Json };

// zod is a peer dependency: the app's copy. zod 3 (or zod 3.25's root export) lacks what the schemas below use.
if (typeof (z as { json?: unknown }).json !== 'function' || typeof z.strictObject !== 'function') {
  throw new Error('statechart-agent needs zod ^4.0.0 (the zod this app resolves is older: install zod@4)');
}

const SHORT = 256;
const count = z.number().int().nonnegative();
const time = z.number().int().nonnegative();
/** Any non-empty id; the host API bounds the ids it hands out further (`startRequestSchema`). */
const id = z.string().min(1);
export const jsonSchema: z.ZodType<Json> = z.json();

/** The trusted principal of a task, given by the host from its session at task start. Never from model text. */
export const principalSchema = z.strictObject({
  /** Authenticated user id (e.g. "E17"). */
  userId: z.string().min(1).max(SHORT),
  /** Tenant the user acts in. */
  tenantId: z.string().min(1).max(SHORT),
  /** Scopes granted by the host session (e.g. "rooms:book"). */
  scopes: z.array(z.string().min(1)).max(SHORT),
});

export const effectSchema = z.enum(['read', 'write']);

/** What the chart persists about a tool at task start: the facts an in-flight call depends on. */
export const toolFactsSchema = z.strictObject({
  effect: effectSchema,
  /** Declared by the tool: re-sending a write with the same idempotency key never duplicates it. */
  sameKeyRetrySafe: z.boolean(),
});

export const catalogSchema = z.record(z.string().min(1).max(SHORT), toolFactsSchema);

const counters = {
  modelTurns: count,
  toolCalls: count,
  writes: count,
  retries: count,
  tokens: count,
  /** Micro-units (1e-6) of the host's currency. */
  costMicros: count,
};

/** Budget limits of a task. `wallClockMs` becomes an absolute deadline at start. */
export const budgetLimitsSchema = z.strictObject({ ...counters, wallClockMs: z.number().int().positive() });

/** Used amounts: whole units; tokens and cost settle to reported usage after a reservation, so no lower bound. */
export const budgetCountersSchema = z.strictObject({
  modelTurns: z.number().int(),
  toolCalls: z.number().int(),
  writes: z.number().int(),
  retries: z.number().int(),
  tokens: z.number().int(),
  costMicros: z.number().int(),
});

export const budgetStateSchema = z.strictObject({
  limits: budgetLimitsSchema,
  used: budgetCountersSchema,
  /** Absolute deadline (ms since epoch): startedAt + limits.wallClockMs, moved on by time spent waiting for humans. */
  deadlineAt: time,
});

/** Host policy that the machine enforces. Persisted with the task so a restart enforces the same numbers. */
export const policySchema = z.strictObject({
  /** Version of the host's policy; confirmations are bound to it. */
  version: z.string().min(1),
  maxCallsPerBatch: z.number().int().positive(),
  maxArgumentBytes: z.number().int().positive(),
  /** Turns in which some call was rejected by a gate, before the task stops. */
  maxRejectedTurns: count,
  /** Malformed model outputs re-asked before the task stops with protocol_error. */
  maxInvalidOutputs: count,
  confirmationTtlMs: z.number().int().positive(),
  /** How many times one call's confirmation is asked (after expiry or changed arguments) before giving up. */
  maxConfirmationRequests: z.number().int().positive(),
  /** Lookups of one unknown write before it goes to review. */
  maxReconcileAttempts: count,
  /** Tool output larger than this (canonical JSON bytes) reaches the model as a truncated preview. */
  observationCapBytes: z.number().int().positive(),
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

/** The gates, in the order a call meets them. `loop` refuses repeats; it is not a gate of the sources' list. */
export const GATE_NAMES = ['protocol', 'schema', 'business', 'permission', 'loop', 'budget', 'confirmation'] as const;
export const gateNameSchema = z.enum(GATE_NAMES);

/** The result of one call as the model will see it: exactly one per call id. */
export const observationSchema = z.discriminatedUnion('ok', [
  z.strictObject({ callId: z.string(), tool: z.string(), ok: z.literal(true), data: jsonSchema, truncated: z.boolean() }),
  z.strictObject({
    callId: z.string(),
    tool: z.string(),
    ok: z.literal(false),
    /** A host code (`failures.ts`) or a business code a tool returned (`conflict`, `capacity_exceeded`...). */
    code: z.string(),
    summary: z.string(),
    retryable: z.boolean(),
    /** The gate that refused the call, when one did. */
    gate: gateNameSchema.optional(),
  }),
]);

/**
 * Where a call is in its life. The names are the chart's: a call is `vetting` until the vetting states have judged
 * it, `ready` once it passed and waits for its turn, then in the executing state that works on it
 * (`awaitingConfirmation`, `reading`, `writing`, `reconciling`), and `finished` once it has its observation.
 */
export const CALL_PHASES = ['vetting', 'ready', 'awaitingConfirmation', 'reading', 'writing', 'reconciling', 'finished'] as const;
export const callPhaseSchema = z.enum(CALL_PHASES);

export const callStateSchema = z.strictObject({
  callId: z.string().min(1),
  tool: z.string(),
  effect: effectSchema,
  /** Parsed arguments; once the schema gate passed, the validated value that will run (and only that). */
  args: jsonSchema,
  /** Hash of `args` (canonical JSON, SHA-256), set by the schema gate; confirmations and keys bind to it. */
  argsHash: z.string().nullable(),
  /** Arguments as the audit and the approver see them (the tool's `redact`). */
  redactedArgs: jsonSchema,
  /** For writes: derived from task + tool + args hash when the schema gate passed; never the model's call id. */
  idempotencyKey: z.string().nullable(),
  needsConfirmation: z.boolean(),
  confirmationSummary: z.string().nullable(),
  /** Set when a matching, unexpired confirmation was accepted for exactly these arguments. */
  confirmedBy: z.strictObject({ confirmationId: z.string(), userId: z.string(), at: time }).nullable(),
  /** Confirmation requests issued for this call so far. */
  confirmationRequests: count,
  phase: callPhaseSchema,
  /** Times the write was attempted (first try plus same-key retries). */
  writeAttempts: count,
  /** Times the write was looked up by its idempotency key. */
  lookups: count,
  observation: observationSchema.nullable(),
});

export const batchSchema = z.strictObject({
  turn: count,
  calls: z.array(callStateSchema),
  /** The call a single-call state (a vetting state, a confirmation, a write, its reconciliation) works on. */
  current: z.string().nullable(),
  /** True once every call has its observation and the results went to the transcript. */
  closed: z.boolean(),
});

/** A confirmation request: a persisted state bound to exactly what will run. */
export const pendingConfirmationSchema = z.strictObject({
  id: z.string(),
  taskId: z.string(),
  callId: z.string(),
  tool: z.string(),
  argsHash: z.string(),
  /** Redacted arguments for display to the approver. */
  args: jsonSchema,
  summary: z.string(),
  /** The only user whose confirmation counts. */
  userId: z.string(),
  policyVersion: z.string(),
  requestedAt: time,
  /** Absolute expiry (ms since epoch); enforced on every confirm, so it holds across restarts. */
  expiresAt: time,
  /** 1 for the first request of this call, 2 after it was asked again, ... */
  request: count,
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
  evidence: z.array(evidenceSchema),
});

/** Limits of the bounded lists in the context, so the snapshot stays the same size however long a task runs. */
export const CONTEXT_BOUNDS = { evidence: 8, seenObservations: 16, proposedSinceNew: 32, writtenKeys: 64 } as const;

export const agentContextSchema = z.strictObject({
  taskId: id,
  goal: z.string().min(1).max(16_384),
  principal: principalSchema,
  catalog: catalogSchema,
  policy: policySchema,
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
  rejectedTurns: count,
  invalidOutputs: count,
  /** The last failed observation, to explain an unmet goal. */
  lastFailure: z.strictObject({ tool: z.string(), code: z.string(), summary: z.string() }).nullable(),
  cancelRequested: z.strictObject({ reason: z.string(), by: z.string(), at: time }).nullable(),
  outcome: outcomeSchema.nullable(),
});

/** Input of the agent machine: what the host decides at task start. */
export const agentInputSchema = z.strictObject({
  taskId: id,
  goal: agentContextSchema.shape.goal,
  principal: principalSchema,
  catalog: catalogSchema,
  policy: policySchema,
  limits: budgetLimitsSchema,
  modelReservation: modelReservationSchema,
  success: successCriterionSchema.nullable(),
  startedAt: time,
});

/** Usage reported by a model turn. */
export const modelUsageSchema = z.strictObject({
  inputTokens: count,
  outputTokens: count,
  costMicros: count,
});

export type Principal = z.infer<typeof principalSchema>;
export type Effect = z.infer<typeof effectSchema>;
export type ToolFacts = z.infer<typeof toolFactsSchema>;
export type Catalog = z.infer<typeof catalogSchema>;
export type BudgetLimits = z.infer<typeof budgetLimitsSchema>;
export type BudgetCounters = z.infer<typeof budgetCountersSchema>;
export type BudgetDimension = keyof BudgetCounters | 'wallClock';
export type BudgetState = z.infer<typeof budgetStateSchema>;
export type Policy = z.infer<typeof policySchema>;
export type ModelReservation = z.infer<typeof modelReservationSchema>;
export type SuccessCriterion = z.infer<typeof successCriterionSchema>;
export type Evidence = z.infer<typeof evidenceSchema>;
export type GateName = z.infer<typeof gateNameSchema>;
export type Observation = z.infer<typeof observationSchema>;
export type CallPhase = z.infer<typeof callPhaseSchema>;
export type CallState = z.infer<typeof callStateSchema>;
export type Batch = z.infer<typeof batchSchema>;
export type PendingConfirmation = z.infer<typeof pendingConfirmationSchema>;
export type FinalStatus = z.infer<typeof finalStatusSchema>;
export type StopReason = z.infer<typeof stopReasonSchema>;
export type Outcome = z.infer<typeof outcomeSchema>;
export type AgentContext = z.infer<typeof agentContextSchema>;
export type AgentInput = z.infer<typeof agentInputSchema>;
export type ModelUsage = z.infer<typeof modelUsageSchema>;
