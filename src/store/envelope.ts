/**
 * The persisted form of a task: a versioned envelope validated on every read. Unknown versions, foreign data
 * and corrupted snapshots are refused with a specific reason instead of being restored into a stuck actor.
 */
import { z } from 'zod';
import type { AgentContext, FinalStatus } from '../../machines/agentTypes.js';
import { CorruptTaskError, UnsupportedVersionError } from '../errors.js';

export const ENVELOPE_SCHEMA_VERSION = 1;
/** Machine versions this build can restore: the current one, and older ones it migrates on read. */
export const SUPPORTED_MACHINE_VERSIONS = ['agent/1', 'agent/2'] as const;

export type TaskState = 'running' | 'waiting_for_confirmation' | 'waiting_for_user' | FinalStatus;

export const TASK_STATES: readonly TaskState[] = [
  'running',
  'waiting_for_confirmation',
  'waiting_for_user',
  'done',
  'failed',
  'budget_exhausted',
  'cancelled',
  'review_required',
];

export interface TaskSummary {
  taskId: string;
  state: TaskState;
  /** The machine state, dotted ("executing.awaitingConfirmation"). */
  stateValue: string;
  userId: string;
  tenantId: string;
  revision: number;
  createdAt: number;
  updatedAt: number;
  /** When something is due without an event (a confirmation's expiry), else null. */
  wakeAt: number | null;
  outcomeCode: string | null;
}

/** The JSON XState gives from `getPersistedSnapshot()` for the agent machine. */
export interface PersistedAgentSnapshot {
  status: 'active' | 'done' | 'error' | 'stopped';
  value: string | Record<string, unknown>;
  context: AgentContext;
  children: Record<string, unknown>;
  historyValue?: Record<string, unknown>;
  output?: unknown;
  error?: unknown;
  [key: string]: unknown;
}

export interface TaskEnvelope {
  schemaVersion: typeof ENVELOPE_SCHEMA_VERSION;
  machineVersion: string;
  taskId: string;
  revision: number;
  createdAt: number;
  updatedAt: number;
  summary: TaskSummary;
  /** Committed journal lengths; entries past these were never acknowledged and are ignored. */
  journal: { audit: number; transcript: number };
  snapshot: PersistedAgentSnapshot;
}

const count = z.number().int().nonnegative();
const time = z.number().int().nonnegative();
const json = z.json();

const principalSchema = z.object({ userId: z.string(), tenantId: z.string(), scopes: z.array(z.string()) });
const countersShape = {
  modelTurns: z.number().int(),
  toolCalls: z.number().int(),
  writes: z.number().int(),
  retries: z.number().int(),
  tokens: z.number().int(),
  costMicros: z.number().int(),
};
const observationSchema = z.union([
  z.object({ callId: z.string(), tool: z.string(), ok: z.literal(true), data: json, truncated: z.boolean() }),
  z.object({
    callId: z.string(),
    tool: z.string(),
    ok: z.literal(false),
    code: z.string(),
    summary: z.string(),
    retryable: z.boolean(),
    gate: z.string().optional(),
  }),
]);
const callSchema = z.object({
  callId: z.string(),
  tool: z.string(),
  effect: z.enum(['read', 'write']),
  args: json,
  argsHash: z.string().nullable(),
  redactedArgs: json,
  idempotencyKey: z.string().nullable(),
  needsConfirmation: z.boolean(),
  confirmationSummary: z.string().nullable(),
  confirmedBy: z.object({ confirmationId: z.string(), userId: z.string(), at: time }).nullable(),
  confirmationRequests: count,
  phase: z.enum(['vetting', 'ready', 'running', 'finished']),
  writeAttempts: count,
  lookups: count,
  observation: observationSchema.nullable(),
});
const contextSchema = z.object({
  taskId: z.string().min(1),
  goal: z.string(),
  principal: principalSchema,
  catalog: z.record(z.string(), z.object({ effect: z.enum(['read', 'write']), sameKeyRetrySafe: z.boolean() })),
  policy: z.object({
    version: z.string(),
    maxCallsPerBatch: count,
    maxArgumentBytes: count,
    maxRejectedTurns: count,
    maxInvalidOutputs: count,
    confirmationTtlMs: count,
    maxConfirmationRequests: count,
    maxReconcileAttempts: count,
    observationCapBytes: count,
  }),
  budget: z.object({
    limits: z.object({ ...countersShape, wallClockMs: count }),
    used: z.object(countersShape),
    deadlineAt: time,
  }),
  modelReservation: z.object({ tokens: count, costMicros: count }),
  success: z
    .object({
      tool: z.string(),
      match: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
      require: z.array(z.string()).optional(),
      description: z.string().optional(),
    })
    .nullable(),
  startedAt: time,
  turn: count,
  batch: z.object({ turn: count, closed: z.boolean(), calls: z.array(callSchema) }).nullable(),
  pendingConfirmation: z
    .object({
      id: z.string(),
      taskId: z.string(),
      callId: z.string(),
      tool: z.string(),
      argsHash: z.string(),
      args: json,
      summary: z.string(),
      userId: z.string(),
      policyVersion: z.string(),
      requestedAt: time,
      expiresAt: time,
      request: count,
    })
    .nullable(),
  question: z.string().nullable(),
  waitingSince: time.nullable(),
  evidence: z.array(z.object({ tool: z.string(), callId: z.string(), idempotencyKey: z.string().nullable(), fields: z.record(z.string(), json) })),
  knowledge: count,
  seenObservations: z.array(z.string()),
  proposedSinceNew: z.array(z.string()),
  /** Since agent/2; agent/1 envelopes get [] on migration. */
  writtenKeys: z.array(z.string()).optional(),
  rejectedTurns: count,
  invalidOutputs: count,
  lastFailure: z.object({ tool: z.string(), code: z.string(), summary: z.string() }).nullable(),
  cancelRequested: z.object({ reason: z.string(), by: z.string(), at: time }).nullable(),
  outcome: z
    .object({
      status: z.enum(['done', 'failed', 'budget_exhausted', 'cancelled', 'review_required']),
      reason: z.object({ code: z.string(), message: z.string(), detail: json.optional() }),
      answer: z.string().nullable(),
      evidence: z.array(z.unknown()),
    })
    .nullable(),
});

const stateValueSchema: z.ZodType<string | Record<string, unknown>> = z.union([
  z.string(),
  z.record(z.string(), z.lazy(() => stateValueSchema)),
]);

const envelopeSchema = z.object({
  schemaVersion: z.literal(ENVELOPE_SCHEMA_VERSION),
  machineVersion: z.string(),
  taskId: z.string().min(1),
  revision: z.number().int().positive(),
  createdAt: time,
  updatedAt: time,
  summary: z.object({
    taskId: z.string(),
    state: z.enum(TASK_STATES as [TaskState, ...TaskState[]]),
    stateValue: z.string(),
    userId: z.string(),
    tenantId: z.string(),
    revision: z.number().int().positive(),
    createdAt: time,
    updatedAt: time,
    wakeAt: time.nullable(),
    outcomeCode: z.string().nullable(),
  }),
  journal: z.object({ audit: count, transcript: count }),
  snapshot: z.looseObject({
    status: z.enum(['active', 'done', 'error', 'stopped']),
    value: stateValueSchema,
    context: contextSchema,
    children: z.record(z.string(), z.unknown()),
  }),
});

/**
 * Validates stored data as a task envelope for `taskId`. Throws UnsupportedVersionError for an envelope of another
 * schema or machine version, CorruptTaskError (with the first problem's path) for anything else.
 */
export function parseEnvelope(taskId: string, raw: unknown): TaskEnvelope {
  if (typeof raw === 'string') {
    try {
      raw = JSON.parse(raw);
    } catch (error) {
      throw new CorruptTaskError(taskId, `stored data is not JSON (${(error as Error).message})`);
    }
  }
  if (typeof raw !== 'object' || raw === null) throw new CorruptTaskError(taskId, 'stored data is not an object');
  const version = (raw as { schemaVersion?: unknown }).schemaVersion;
  if (version !== ENVELOPE_SCHEMA_VERSION) {
    throw new UnsupportedVersionError(
      taskId,
      `envelope schema version ${JSON.stringify(version)} is not supported; this build reads ${ENVELOPE_SCHEMA_VERSION}`,
    );
  }
  const parsed = envelopeSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new CorruptTaskError(taskId, `invalid envelope at ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  const envelope = raw as TaskEnvelope;
  if (envelope.taskId !== taskId || envelope.snapshot.context.taskId !== taskId) {
    throw new CorruptTaskError(taskId, `the stored envelope belongs to task ${JSON.stringify(envelope.taskId)}`);
  }
  if (!(SUPPORTED_MACHINE_VERSIONS as readonly string[]).includes(envelope.machineVersion)) {
    throw new UnsupportedVersionError(
      taskId,
      `machine version ${JSON.stringify(envelope.machineVersion)} is not supported; this build restores ${SUPPORTED_MACHINE_VERSIONS.join(', ')}`,
    );
  }
  return migrate(envelope);
}

/**
 * Brings an envelope of an older machine version to the current one. Each step is explicit and only ever adds
 * what the newer machine needs; a version with no step here is refused above.
 *
 * - agent/1 -> agent/2: adds `writtenKeys` (writes that succeeded), empty: an agent/1 task has no record of
 *   them, so it behaves as before for writes made before the upgrade. No state was renamed or removed.
 */
function migrate(envelope: TaskEnvelope): TaskEnvelope {
  if (envelope.machineVersion === 'agent/1') {
    const context = { ...envelope.snapshot.context, writtenKeys: envelope.snapshot.context.writtenKeys ?? [] };
    return { ...envelope, machineVersion: 'agent/2', snapshot: { ...envelope.snapshot, context } };
  }
  return envelope;
}

/** Dotted form of a state value: {executing: 'writing'} -> "executing.writing". */
export function stateValueToString(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object') {
    const [key, inner] = Object.entries(value)[0] ?? [];
    return key === undefined ? '' : `${key}.${stateValueToString(inner)}`;
  }
  return '';
}

/** The summary derived from a persisted snapshot. */
export function summarize(
  snapshot: PersistedAgentSnapshot,
  meta: { revision: number; createdAt: number; updatedAt: number },
): TaskSummary {
  const { context } = snapshot;
  const stateValue = stateValueToString(snapshot.value);
  let state: TaskState = 'running';
  if (context.outcome) state = context.outcome.status;
  else if (stateValue === 'executing.awaitingConfirmation') state = 'waiting_for_confirmation';
  else if (stateValue === 'awaitingUser') state = 'waiting_for_user';
  return {
    taskId: context.taskId,
    state,
    stateValue,
    userId: context.principal.userId,
    tenantId: context.principal.tenantId,
    revision: meta.revision,
    createdAt: meta.createdAt,
    updatedAt: meta.updatedAt,
    wakeAt: state === 'waiting_for_confirmation' ? (context.pendingConfirmation?.expiresAt ?? null) : null,
    outcomeCode: context.outcome?.reason.code ?? null,
  };
}
