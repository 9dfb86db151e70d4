/**
 * The data of one call and its batch, defined as zod schemas (types inferred): where the call is in its life, what
 * it was confirmed by, the observation it ends with, and the confirmation request a call waits on. Part of the task's
 * data model (`context.ts`, which re-exports all of it).
 */
import { z } from 'zod';
import { count, jsonSchema, principalSchema, time } from './lib/schemaParts.js';

/** What the chart persists about a tool's effect. */
export const effectSchema = z.enum(['read', 'write']);

/**
 * The design sources' four risk classes of a tool, each with its own default confirmation: `read_only` runs
 * unconfirmed; `writable` asks the task's user unless the tool waives it in writing; `irreversible` always asks the
 * task's user; `high_risk` always asks, and approvers other than the requester when the host's policy names them.
 */
export const RISK_CLASSES = ['read_only', 'writable', 'irreversible', 'high_risk'] as const;
export const riskClassSchema = z.enum(RISK_CLASSES);

/**
 * Why a call must be confirmed, every reason that applies: the tool's own rule asked (`tool_rule`); a write that
 * declares no rule (`write_default`); its risk class (`irreversible`, `high_risk`); it moves money above what the host
 * lets run unconfirmed (`moves_money`); the task saw untrusted input and holds sensitive data (`rule_of_two`).
 */
export const CONFIRMATION_REASONS = [
  'tool_rule',
  'write_default',
  'irreversible',
  'high_risk',
  'moves_money',
  'rule_of_two',
  /** A whole plan, before any of it runs (the policy's `planning.approval`). */
  'plan',
] as const;
export const confirmationReasonSchema = z.enum(CONFIRMATION_REASONS);

/**
 * The gates, in the order a call meets them. `loop` refuses repeats (it is not a gate of the sources' list);
 * `verification` refuses a write while a read it depends on ended unknown; `rate` is the per-tenant rate limit of a
 * tool, asked right before the call runs.
 */
export const GATE_NAMES = [
  'protocol',
  'schema',
  'mandate',
  'business',
  'permission',
  'loop',
  'verification',
  'budget',
  'confirmation',
  'rate',
  /** A proposed plan's checks (well formed, permitted, within the mandate and the budget) and its approval. */
  'plan',
] as const;
export const gateNameSchema = z.enum(GATE_NAMES);

/** The result of one call as the model will see it: exactly one per call id. */
export const observationSchema = z.discriminatedUnion('ok', [
  z.strictObject({
    callId: z.string(),
    tool: z.string(),
    ok: z.literal(true),
    data: jsonSchema,
    truncated: z.boolean(),
  }),
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
 * (`awaitingConfirmation`, `rechecking`, `reading`, `writing`, `reconciling`, or `awaitingReview` while a reviewer
 * must say what a write did), and `finished` once it has its observation.
 */
export const CALL_PHASES = [
  'vetting',
  'ready',
  'awaitingConfirmation',
  'rechecking',
  'reading',
  'writing',
  'reconciling',
  'awaitingReview',
  /** A call of a sub-task tool whose child task runs: the parent waits for the child's outcome. */
  'awaitingSubtask',
  'finished',
] as const;
export const callPhaseSchema = z.enum(CALL_PHASES);

/** Who decided on a confirmation: the task's user, or an approver holding the required scope. */
export const decisionSchema = z.strictObject({
  userId: z.string().min(1),
  as: z.enum(['requester', 'approver']),
  /** The scope the decision was made under (the approver scope), or null for the requester. */
  scope: z.string().nullable(),
  at: time,
});

/** How one call must be confirmed, decided by the tool's rule over the validated arguments when it was admitted. */
export const confirmationRequirementSchema = z.strictObject({
  /** null: the task's user confirms. Otherwise: people other than the requester, each holding this scope. */
  approverScope: z.string().min(1).nullable(),
  /** Distinct decisions needed (1 for the requester). */
  approvals: z.number().int().positive().max(16),
  /** The call is rejected: tell the model (`replan`) or end the task (`cancel`). */
  onReject: z.enum(['replan', 'cancel']),
  /** Nobody decided in time: ask again up to the policy's limit (`ask_again`), or end the task (`cancel`). */
  onExpiry: z.enum(['ask_again', 'cancel']),
  /** Why it is asked (at least one). */
  reasons: z.array(confirmationReasonSchema).min(1),
  /** The tool's risk class when it was asked. */
  risk: riskClassSchema,
});

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
  /** Set when the call was admitted and its tool's rule asks for a confirmation; null: it runs without one. */
  confirmation: confirmationRequirementSchema.nullable(),
  confirmationSummary: z.string().nullable(),
  /**
   * Set when a matching, unexpired confirmation was accepted: the hash it was given for (checked again against the
   * arguments right before the call runs) and every decision that made it.
   */
  confirmedBy: z
    .strictObject({
      confirmationId: z.string(),
      argsHash: z.string(),
      at: time,
      decisions: z.array(decisionSchema).min(1),
    })
    .nullable(),
  /** Confirmation requests issued for this call so far. */
  confirmationRequests: count,
  phase: callPhaseSchema,
  /** Times the write was attempted (first try plus same-key retries). */
  writeAttempts: count,
  /** Times the write was looked up by its idempotency key. */
  lookups: count,
  observation: observationSchema.nullable(),
  /**
   * A write: the principal as the host's session showed it at the re-check right before the write was sent (what the
   * tool's execute and lookup see), or null before that.
   */
  runAs: principalSchema.nullable(),
  /** A write about to be sent again with the same key: after a lookup found nothing, or as a reviewer asked. */
  resendAfter: z.enum(['lookup', 'review']).nullable(),
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
  /** The task's user: the one who confirms, or (with an approver scope) the one who may not approve. */
  userId: z.string(),
  /** Approvers must hold this scope and not be the requester; null when the requester confirms. */
  approverScope: z.string().nullable(),
  approvalsRequired: z.number().int().positive(),
  /** Approvals given so far (an approver decides once). */
  approvals: z.array(decisionSchema),
  /** Why it is asked, and the tool's risk class: what the approver is shown next to the summary. */
  reasons: z.array(confirmationReasonSchema).min(1),
  risk: riskClassSchema,
  policyVersion: z.string(),
  requestedAt: time,
  /** Absolute expiry (ms since epoch); enforced on every confirm, so it holds across restarts. */
  expiresAt: time,
  /** 1 for the first request of this call, 2 after it was asked again, ... */
  request: count,
});

export type RiskClass = z.infer<typeof riskClassSchema>;
export type ConfirmationReason = z.infer<typeof confirmationReasonSchema>;
export type Decision = z.infer<typeof decisionSchema>;
export type ConfirmationRequirement = z.infer<typeof confirmationRequirementSchema>;
export type GateName = z.infer<typeof gateNameSchema>;
export type Observation = z.infer<typeof observationSchema>;
export type CallPhase = z.infer<typeof callPhaseSchema>;
export type CallState = z.infer<typeof callStateSchema>;
export type Batch = z.infer<typeof batchSchema>;
export type PendingConfirmation = z.infer<typeof pendingConfirmationSchema>;
