/**
 * The persisted form of a task: a versioned envelope validated on every read against the machine's own data model
 * (`machines/context.ts`). Unknown versions, foreign data and corrupted snapshots are refused with a specific
 * reason instead of being restored into a stuck actor; older machine versions are migrated first (`migrations.ts`).
 */
import { z } from 'zod';
import { AGENT_MACHINE_VERSION } from '../../machines/agentMachine.js';
import { type AgentContext, agentContextSchema, jsonSchema } from '../../machines/context.js';
import { CorruptTaskError, UnsupportedVersionError } from '../errors.js';
import { compiledParse, interpreted, jsonStandIn, stateValueStandIn } from './compiledSchema.js';
import { MIGRATED_VERSIONS, migrate } from './migrations.js';
import { type TaskSummary, taskSummarySchema } from './summary.js';

export { TASK_STATES, type TaskState, type TaskSummary, stateValueToString, summarize } from './summary.js';

export const ENVELOPE_SCHEMA_VERSION = 1;
/** Machine versions this build can restore: the current one, and older ones it migrates on read. */
export const SUPPORTED_MACHINE_VERSIONS = [...MIGRATED_VERSIONS, AGENT_MACHINE_VERSION] as const;

const count = z.number().int().nonnegative();
const time = z.number().int().nonnegative();

const stateValueSchema: z.ZodType<string | Record<string, unknown>> = z.union([
  z.string(),
  z.record(
    z.string(),
    z.lazy(() => stateValueSchema),
  ),
]);

/** The JSON XState gives from `getPersistedSnapshot()` for the agent machine (XState's own fields kept as they are). */
const persistedSnapshotSchema = z.looseObject({
  status: z.enum(['active', 'done', 'error', 'stopped']),
  value: stateValueSchema,
  context: agentContextSchema,
  children: z.record(z.string(), z.unknown()),
});

export type PersistedAgentSnapshot = z.infer<typeof persistedSnapshotSchema>;

const envelopeSchema = z.strictObject({
  schemaVersion: z.literal(ENVELOPE_SCHEMA_VERSION),
  machineVersion: z.literal(AGENT_MACHINE_VERSION),
  taskId: z.string().min(1),
  revision: z.number().int().positive(),
  createdAt: time,
  updatedAt: time,
  summary: taskSummarySchema,
  /** Committed journal lengths; entries past these were never acknowledged and are ignored. */
  journal: z.strictObject({ audit: count, transcript: count }),
  snapshot: persistedSnapshotSchema,
  /** With dispatch: the last event of the task's inbox applied in this snapshot, and the replies of the latest ones. */
  inbox: z
    .strictObject({
      applied: count,
      replies: z
        .array(
          z.strictObject({
            eventId: z.string().min(1),
            seq: count,
            accepted: z.boolean(),
            code: z.string().nullable(),
            message: z.string(),
          }),
        )
        .max(64),
    })
    .optional(),
});

/**
 * The parts of the context left to the interpreter inside the compiled fast path: large to compile (generated code
 * of ~60 KB together) and null or empty in most stored tasks.
 */
const INTERPRETED = ['outcome', 'plan', 'subtasks', 'workflow', 'unwinding', 'pendingConfirmation'] as const;

type EnvelopeParse = ReturnType<typeof envelopeSchema.safeParse>;

/**
 * Reads checked by the interpreter before the fast path is built: compiling takes tens of ms and saves a few hundred
 * µs a read, so a process that reads a few envelopes (a CLI command, most tests) never pays for it.
 */
const COMPILE_AFTER_READS = 16;
let reads = 0;

/** Built when first asked for: undefined until then, null where it cannot be built. */
let compiledEnvelope: ((value: unknown) => { success: boolean; data?: unknown }) | null | undefined;

/**
 * The two ways of checking an envelope against `envelopeSchema`, for `parseEnvelope` and the test that holds them to
 * each other: `fast` is the compiled fast path (`compiledSchema.ts`), which gives the parsed value or null (never an
 * error: not valid, or a case it leaves to the interpreter); `full` is zod's interpreter, whose errors are reported.
 * @internal
 */
export const envelopeChecks = {
  fast(value: unknown): TaskEnvelope | null {
    // `=== undefined`, not `??=`: null (no `z.compile`, a node it refuses) is an answer, kept, not asked again per read.
    if (compiledEnvelope === undefined)
      compiledEnvelope = compiledParse(
        envelopeSchema,
        new Map<z.core.$ZodType, z.core.$ZodType>([
          [jsonSchema, jsonStandIn],
          [stateValueSchema, stateValueStandIn],
          ...INTERPRETED.map((key): [z.core.$ZodType, z.core.$ZodType] => {
            // Below a default, which has to stay: an absent field takes it before anything else is asked.
            const field: z.core.$ZodType = agentContextSchema.shape[key];
            const def = field._zod.def;
            const part = def.type === 'default' ? (def as z.core.$ZodDefaultDef).innerType : field;
            return [part, interpreted(part)];
          }),
        ]),
      );
    const parsed = compiledEnvelope?.(value);
    return parsed?.success ? (parsed.data as TaskEnvelope) : null;
  },
  full(value: unknown): EnvelopeParse {
    return envelopeSchema.safeParse(value);
  },
};

export interface TaskEnvelope {
  schemaVersion: typeof ENVELOPE_SCHEMA_VERSION;
  machineVersion: string;
  taskId: string;
  revision: number;
  createdAt: number;
  updatedAt: number;
  summary: TaskSummary;
  journal: { audit: number; transcript: number };
  snapshot: PersistedAgentSnapshot & { context: AgentContext };
  /** With dispatch (`inbox.ts`): how far the task's inbox was applied, saved with the snapshot that applied it. */
  inbox?: InboxCursor;
}

/** The chart's (or the host's) answer to one inbox event, kept with the task for the caller waiting on it. */
export interface InboxReply {
  eventId: string;
  seq: number;
  accepted: boolean;
  code: string | null;
  message: string;
}

/** The inbox position a snapshot includes: every event up to `applied` was applied in it, exactly once. */
export interface InboxCursor {
  applied: number;
  /** The replies of the latest events (at most INBOX_REPLIES_KEPT), newest last. */
  replies: InboxReply[];
}

/** How many replies an envelope keeps for callers that wait on their event. */
export const INBOX_REPLIES_KEPT = 32;

/**
 * Validates stored data as a task envelope for `taskId`. Throws UnsupportedVersionError for an envelope of another
 * schema or machine version, CorruptTaskError (with the first problem's path) for anything else, including an
 * envelope that lacks any field the current machine needs.
 */
export function parseEnvelope(taskId: string, raw: unknown): TaskEnvelope {
  if (typeof raw === 'string') {
    try {
      raw = JSON.parse(raw);
    } catch (error) {
      throw new CorruptTaskError(taskId, `stored data is not JSON (${(error as Error).message})`);
    }
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new CorruptTaskError(taskId, 'stored data is not an object');
  const { schemaVersion, machineVersion } = raw as { schemaVersion?: unknown; machineVersion?: unknown };
  if (schemaVersion !== ENVELOPE_SCHEMA_VERSION) {
    throw new UnsupportedVersionError(
      taskId,
      `envelope schema version ${JSON.stringify(schemaVersion)} is not supported; this build reads ${ENVELOPE_SCHEMA_VERSION}`,
    );
  }
  if (
    typeof machineVersion !== 'string' ||
    !(SUPPORTED_MACHINE_VERSIONS as readonly string[]).includes(machineVersion)
  ) {
    throw new UnsupportedVersionError(
      taskId,
      `machine version ${JSON.stringify(machineVersion)} is not supported; this build restores ${SUPPORTED_MACHINE_VERSIONS.join(', ')}`,
    );
  }
  const current =
    machineVersion === AGENT_MACHINE_VERSION ? raw : migrate(taskId, machineVersion, raw as Record<string, unknown>);
  reads += 1;
  let envelope: TaskEnvelope;
  try {
    envelope = (reads > COMPILE_AFTER_READS ? envelopeChecks.fast(current) : null) ?? fullParse(taskId, current);
  } catch (error) {
    // Nested deeper than the stack lets zod check (JSON.parse takes far more): corrupt data, which a load quarantines,
    // not an error that fails every load and every listing of the store again.
    if (error instanceof RangeError) throw new CorruptTaskError(taskId, 'invalid envelope: nested too deeply to check');
    throw error;
  }
  if (envelope.taskId !== taskId || envelope.snapshot.context.taskId !== taskId) {
    throw new CorruptTaskError(taskId, `the stored envelope belongs to task ${JSON.stringify(envelope.taskId)}`);
  }
  return envelope;
}

/** The envelope as zod's interpreter parses it, or CorruptTaskError with the first problem's path. */
function fullParse(taskId: string, value: unknown): TaskEnvelope {
  const parsed = envelopeChecks.full(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new CorruptTaskError(taskId, `invalid envelope at ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  return parsed.data as TaskEnvelope;
}
