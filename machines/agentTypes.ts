/**
 * The data the agent machine owns. Everything here is plain JSON because it is persisted: no Dates, no Errors,
 * no functions. Failures are values with a stable snake_case `code`.
 */
import type { Json } from '../src/json/strictJson.js';

export type { Json };

/** The trusted principal of a task, given by the host from its session at task start. Never from model text. */
export interface Principal {
  /** Authenticated user id (e.g. "E17"). */
  userId: string;
  /** Tenant the user acts in. */
  tenantId: string;
  /** Scopes granted by the host session (e.g. "rooms:book"). */
  scopes: string[];
}

export type Effect = 'read' | 'write';

/** What the machine needs to know about a tool: data only, derived from the tool definitions at task start. */
export interface ToolFacts {
  effect: Effect;
  /** Declared by the tool: re-sending a write with the same idempotency key never duplicates it. */
  sameKeyRetrySafe: boolean;
}

export type Catalog = Record<string, ToolFacts>;

/** Budget dimensions counted in whole units. Cost is in micro-units of the host's currency (1e-6). */
export interface BudgetCounters {
  modelTurns: number;
  toolCalls: number;
  writes: number;
  retries: number;
  tokens: number;
  costMicros: number;
}

export type BudgetDimension = keyof BudgetCounters | 'wallClock';

export interface BudgetLimits extends BudgetCounters {
  /** Wall-clock budget of the whole task in milliseconds, turned into an absolute deadline at start. */
  wallClockMs: number;
}

export interface BudgetState {
  limits: BudgetLimits;
  used: BudgetCounters;
  /** Absolute deadline (ms since epoch): startedAt + limits.wallClockMs. */
  deadlineAt: number;
}

/** Host policy that the machine enforces. Persisted with the task so a restart enforces the same numbers. */
export interface Policy {
  /** Version of the host's policy; confirmations are bound to it. */
  version: string;
  maxCallsPerBatch: number;
  maxArgumentBytes: number;
  /** Turns in which some call was rejected by a gate, before the task stops. */
  maxRejectedTurns: number;
  /** Malformed model outputs re-asked before the task stops with protocol_error. */
  maxInvalidOutputs: number;
  confirmationTtlMs: number;
  /** How many times one call's confirmation is asked (after expiry or changed arguments) before giving up. */
  maxConfirmationRequests: number;
  /** Lookups of one unknown write before it goes to review. */
  maxReconcileAttempts: number;
  /** Tool output larger than this (canonical JSON bytes) reaches the model as a truncated preview. */
  observationCapBytes: number;
}

/** What the model reserves per turn; checked and debited before the call starts. */
export interface ModelReservation {
  tokens: number;
  costMicros: number;
}

/** A task's declaration of success: a trusted result of `tool` whose output matches `match` and has `require`. */
export interface SuccessCriterion {
  tool: string;
  match?: Record<string, string | number | boolean>;
  require?: string[];
  /** Shown in outcomes, e.g. "a confirmed booking with an id". */
  description?: string;
}

/** A trusted tool result that satisfied the success criterion. */
export interface Evidence {
  tool: string;
  callId: string;
  idempotencyKey: string | null;
  fields: Record<string, Json>;
}

export type GateName = 'protocol' | 'schema' | 'business' | 'permission' | 'loop' | 'budget' | 'confirmation';

/** The result of one call as the model will see it: exactly one per call id. */
export type Observation =
  | { callId: string; tool: string; ok: true; data: Json; truncated: boolean }
  | {
      callId: string;
      tool: string;
      ok: false;
      code: string;
      summary: string;
      retryable: boolean;
      gate?: GateName;
    };

export type CallPhase = 'vetting' | 'ready' | 'running' | 'finished';

export interface CallState {
  callId: string;
  tool: string;
  effect: Effect;
  /** Parsed arguments; after vetting, the schema-validated value that will run. */
  args: Json;
  argsHash: string | null;
  redactedArgs: Json;
  idempotencyKey: string | null;
  needsConfirmation: boolean;
  confirmationSummary: string | null;
  /** Set when a matching, unexpired confirmation was accepted for exactly these arguments. */
  confirmedBy: { confirmationId: string; userId: string; at: number } | null;
  /** Confirmation requests issued for this call so far. */
  confirmationRequests: number;
  phase: CallPhase;
  /** Times the write was attempted (first try plus same-key retries) and looked up. */
  writeAttempts: number;
  lookups: number;
  observation: Observation | null;
}

export interface Batch {
  turn: number;
  calls: CallState[];
  /** True once every call has its observation and the results went to the transcript. */
  closed: boolean;
}

/** A confirmation request: a persisted state bound to exactly what will run. */
export interface PendingConfirmation {
  id: string;
  taskId: string;
  callId: string;
  tool: string;
  argsHash: string;
  /** Redacted arguments for display to the approver. */
  args: Json;
  summary: string;
  /** The only user whose confirmation counts. */
  userId: string;
  policyVersion: string;
  requestedAt: number;
  /** Absolute expiry (ms since epoch); enforced on every confirm, so it holds across restarts. */
  expiresAt: number;
  /** 1 for the first request of this call, 2 after it was asked again, ... */
  request: number;
}

export type FinalStatus = 'done' | 'failed' | 'budget_exhausted' | 'cancelled' | 'review_required';

/** A machine-readable reason: stable `code`, readable `message`. */
export interface StopReason {
  code: string;
  message: string;
  detail?: Json;
}

export interface Outcome {
  status: FinalStatus;
  reason: StopReason;
  /** The model's final text, if any. Never evidence of success by itself. */
  answer: string | null;
  evidence: Evidence[];
}

export interface AgentContext {
  taskId: string;
  goal: string;
  principal: Principal;
  catalog: Catalog;
  policy: Policy;
  budget: BudgetState;
  modelReservation: ModelReservation;
  success: SuccessCriterion | null;
  startedAt: number;
  /** Model turns started so far (the current one included). */
  turn: number;
  batch: Batch | null;
  pendingConfirmation: PendingConfirmation | null;
  /** Question the model asked the user, while waiting for the answer. */
  question: string | null;
  /**
   * When the task started waiting for a human (confirmation or answer), else null. Waiting time does not count
   * against the wall-clock budget: the deadline moves by the time waited when the wait ends.
   */
  waitingSince: number | null;
  evidence: Evidence[];
  /** Increments whenever an observation carries information not seen before. */
  knowledge: number;
  /** Fingerprints of recent observations (bounded), to tell new information from repeats. */
  seenObservations: string[];
  /**
   * Calls (tool + short argument hash) proposed since the last new observation. Proposing one of them again is a
   * loop. Emptied whenever something new is observed, so it stays small and the snapshot does not grow.
   */
  proposedSinceNew: string[];
  /**
   * Idempotency keys of writes that succeeded in this task (a result, or found by lookup). The same business intent
   * is never sent again: a later proposal of it is refused as a duplicate. Bounded.
   */
  writtenKeys: string[];
  rejectedTurns: number;
  invalidOutputs: number;
  /** The last failed observation, to explain an unmet goal. */
  lastFailure: { tool: string; code: string; summary: string } | null;
  cancelRequested: { reason: string; by: string; at: number } | null;
  outcome: Outcome | null;
}

/** Input of the agent machine: what the host decides at task start. */
export interface AgentInput {
  taskId: string;
  goal: string;
  principal: Principal;
  catalog: Catalog;
  policy: Policy;
  limits: BudgetLimits;
  modelReservation: ModelReservation;
  success: SuccessCriterion | null;
  startedAt: number;
}

/** Usage reported by a model turn. */
export interface ModelUsage {
  inputTokens: number;
  outputTokens: number;
  costMicros: number;
}
