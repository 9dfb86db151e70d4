/**
 * What a host configures, the defaults, and the validation of everything it passes in. The input schemas are the
 * machine's own (`machines/context.ts`): a start request the orchestrator accepts is one the store can read back.
 */
import type { Dispatch } from './dispatch.js';
import type { WorkflowDefinition } from '../../machines/workflows.js';
import { DEFAULT_RETENTION_SWEEP_MS } from './retentionSweeper.js';
import type { PrivacyOptions } from '../privacy/privacy.js';
import type { InspectionEvent } from 'xstate';
import { z } from 'zod';
import {
  type BudgetLimits,
  type Policy,
  agentInputSchema,
  budgetLimitsSchema,
  policySchema,
  principalSchema,
  successCriterionSchema,
} from '../../machines/context.js';
import type { Principal } from '../../machines/context.js';
import type { OfferRule } from '../../machines/toolkit.js';
import { INPUT_LIMITS } from '../../machines/limits.js';
import type { Clock } from '../clock.js';
import { DEFAULT_LIMITS, DEFAULT_POLICY } from '../defaults.js';
import { type Loosen, loosenedPolicy } from './loosen.js';
import type { MandateKind } from '../mandate.js';
import type { RateLimitOptions } from '../runtime/rateLimits.js';
import { HostRequestError } from '../errors.js';
import type { AgentModel } from '../model/agentModel.js';
import type { ConversationCompaction, HostSummariser } from '../model/summariser.js';
import type { CompactionSettings } from '../../machines/context.js';
import type { TaskStore } from '../store/taskStore.js';
import type { Tool } from '../tool.js';
import type { Logger, TaskHooks } from './hooks.js';
import type { Tracing } from '../runtime/tracing.js';

export { DEFAULT_LIMITS, DEFAULT_POLICY };

export interface OrchestratorOptions {
  /** Every tool tasks may use. The model is offered only those the task's principal holds scopes for. */
  tools: readonly Tool[];
  /**
   * Tools per step: which of the principal's tools the model is offered in a turn, from where the task is (the turn,
   * the tools that returned a trusted result so far, the mandate's kind): search first, book once a room was found.
   * A call to a tool not offered is refused (`not_offered`); the offer is recorded in the turn's audit. Pure and
   * synchronous; a rule that throws offers nothing. Default: every tool the principal may use, every turn.
   */
  offer?: OfferRule;
  /**
   * Fixed workflows a task may follow (`start({ workflow: name })`): the program's calls and the model's decisions,
   * step by step (`defineWorkflow`). Checked when the orchestrator is made (steps, tools, rules).
   */
  workflows?: readonly WorkflowDefinition[];
  model: AgentModel;
  /**
   * Compaction of long conversations as a state of the chart (`compacting`): past `atTokens` (default 4/5 of the
   * model's declared window) older turns are summarised before the next model turn, by the host's facts note
   * (default), the model, or a host function; the host's structured facts stay verbatim. See docs/models.md.
   */
  compaction?: ConversationCompaction;
  /** Where tasks persist. Default: an in-memory store (lost with the process). */
  store?: TaskStore;
  /**
   * Host policy; persisted with each task at start. Tightening goes here; a field that would loosen a safe default
   * (`unconfirmedMoneyUpTo`, `ruleOfTwo`) is refused: use `loosen`, which takes a reason. `planning` (plan-and-execute)
   * is merged over its defaults: `{ planning: { mode: 'plan_first' } }` keeps the default approval and bounds.
   */
  policy?: Partial<Omit<Policy, 'planning'>> & { planning?: Partial<Policy['planning']> };
  /**
   * Safe defaults loosened on purpose, each with its reason, recorded in the audit of every task started under it:
   * `unconfirmedMoney: { upTo, reason }` (money-moving writes up to that total run unconfirmed when their tool's rule
   * does not ask), `ruleOfTwo: { off: true, reason }`.
   */
  loosen?: Loosen;
  /** Default budget limits of new tasks. */
  limits?: Partial<BudgetLimits>;
  clock?: Clock;
  /** Randomness for backoff jitter. */
  random?: () => number;
  /** Per model call (default 60 s). */
  modelTimeoutMs?: number;
  /** Backoff of model transport retries and repeated lookups (default 200 ms doubling to 5 s). */
  backoff?: { baseDelayMs: number; maxDelayMs: number };
  /** Retries of a save that failed because the store was unreachable (default 8, about 10 s in all). */
  saveRetries?: number;
  /**
   * Period of the retention sweep (default 1 h; 0 disables it): erases finished tasks and tombstones past the store's
   * `retention` periods. Does nothing on a store without retention options.
   */
  retentionSweepMs?: number;
  /**
   * Interval of the sweep that expires due confirmations, from the store's index of deadlines (so it also catches
   * tasks that expired while no process ran). Default 5 s; 0 disables it (call `expireDue()` yourself).
   */
  expirySweepMs?: number;
  /**
   * Interval of the orphan sweep: on a store with leases (Redis, and MemoryStore within a process), running tasks
   * whose lease expired (their process died) are taken over here by themselves, as `recover()` does. Default: the
   * lease TTL (15 s), jittered ±20%, so a dead process's tasks resume within about two TTLs. 0 disables it. With a
   * `dispatch` there is none: the queue hands a dead worker's jobs on.
   */
  orphanSweepMs?: number;
  /** Receives XState inspection events of every task actor (see `statechart-agent/inspect`). */
  inspect?: (event: InspectionEvent) => void;
  /** A principal with this scope may cancel other users' tasks in its tenant. */
  adminScope?: string;
  /** The kinds of mandate tasks may start with (`defineMandate`); a start request's mandate must be one of them. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- kinds of all term types share one list
  mandates?: readonly MandateKind<any>[];
  /**
   * The task's principal as the host's session sees it now, asked right before every write: scopes revoked since the
   * task started refuse the write. Return null when the session is gone. Default: the principal given at start.
   */
  refreshPrincipal?: (principal: Principal) => Promise<Principal | null> | Principal | null;
  /** Where tools' per-tenant rate limits are counted: in this process (default), or on a Redis shared by all. */
  rateLimits?: RateLimitOptions;
  /** Makes task ids (default: "task_" + random UUID). */
  newTaskId?: () => string;
  /** Typed listeners, called after the save that made each event durable; one that throws is logged, not fatal. */
  hooks?: TaskHooks;
  /**
   * Where the library reports what went wrong outside a task's own outcome (a hook that threw, a task that stopped
   * being driven here, a failed expiry sweep). Pino-compatible; silent by default: the library never writes to the
   * console.
   */
  logger?: Logger;
  /**
   * Spans for each run of a task, model turn, tool call and lookup, with gate decisions and confirmations as events
   * (`otelTracing(tracer)` from `statechart-agent/otel`). Default: none.
   */
  tracing?: Tracing;
  /**
   * How much this process takes on (backpressure): at most `maxRunningTasks` running tasks in all, and
   * `maxRunningPerTenant` per tenant (one tenant cannot take every slot). `start` beyond either throws
   * CapacityError (`overloaded`, `tenant_at_capacity`; HTTP 503 and 429) before anything is stored; events for
   * tasks that exist are never refused for capacity. Waiting and ended tasks do not count. Default: no limit.
   * `maxLoopDelayMs` (default: none): a `start` is also refused (`overloaded`) while this process's event loop lagged
   * more than that in the last second, before its store calls start timing out. Off by default: one stall (a GC, a
   * descheduled process on a loaded host) would refuse starts for a second; a service sets it (1,000-2,000 ms).
   * `maxStartingTasks` (default 200): starts under way at once (from `start` until the task's first state is saved);
   * one more is refused (`overloaded`) at once, before anything is stored, so that a burst of starts cannot starve
   * the event loop into store timeouts. `Number.POSITIVE_INFINITY` turns the bound off.
   * `tenantCap` (default: none): at most that many running tasks per tenant across every process on the store
   * (Redis: counted atomically in the store, so two processes cannot both take the last slot; MemoryStore: the
   * orchestrators sharing it). A `start` past it is refused (`tenant_at_capacity`, HTTP 429 with Retry-After). A
   * task's slot is held while it runs, renewed with its lease, given back when it waits, ends, stops here or the
   * process closes; a killed process's slots free after the lease TTL. Needs a store with `tenantSlots`.
   */
  capacity?: {
    maxRunningTasks?: number;
    maxRunningPerTenant?: number;
    maxLoopDelayMs?: number;
    maxStartingTasks?: number;
    tenantCap?: number;
  };
  /**
   * Sensitive values kept out of everything persisted and streamed: the host's redactors (`cardNumbers()`...) seal
   * matches in any text, tools' `sensitive` fields are sealed whole, and the sealer decides where the values live
   * (`memorySealer()`, the default, in this process only; `keyedSealer({ key })` encrypted, so durable).
   */
  privacy?: PrivacyOptions;
  /**
   * A job queue (`bullmqDispatch(...)` from `statechart-agent/bullmq`): API calls record jobs and user events
   * instead of driving tasks here, and workers (`orchestrator.createWorker()`) drive them, in this process or any
   * other on the same store. Needs a store with leases and inboxes (RedisStore). Default: none (this process drives
   * the tasks it starts or gets events for).
   */
  dispatch?: Dispatch;
  /**
   * Leases, used when the store has them (Redis): a process must hold a task's lease to drive it, every save
   * carries its fencing token, and a process that lost its lease stops. Times are real milliseconds.
   */
  lease?: {
    /** How long a lease lasts without renewal (default 15 s): the time recovery waits after a crash. */
    ttlMs?: number;
    /** Renewal period (default ttl / 3). */
    renewEveryMs?: number;
    /** How long an API call waits for another process to release a task (default 2 s), then TaskBusyError. */
    acquireTimeoutMs?: number;
  };
}

/** The options with every default applied and every value checked. */
export interface Settings {
  policy: Policy;
  limits: BudgetLimits;
  clock: Clock;
  random: () => number;
  modelTimeoutMs: number;
  backoff: { baseDelayMs: number; maxDelayMs: number };
  saveRetries: number;
  expirySweepMs: number;
  /** null: the lease TTL. */
  orphanSweepMs: number | null;
  retentionSweepMs: number;
  adminScope: string | null;
  mandates: ReadonlyMap<string, MandateKind<unknown>>;
  newTaskId: () => string;
  lease: { ttlMs: number; renewEveryMs: number; acquireTimeoutMs: number };
  /** What new tasks start with (`compacting`), and the host's summariser when it is a function. */
  compaction: { settings: CompactionSettings; summariser?: HostSummariser };
  capacity: {
    maxRunningTasks: number;
    maxRunningPerTenant: number;
    maxLoopDelayMs: number;
    maxStartingTasks: number;
    /** Running tasks per tenant across every process on the store (Infinity: none). */
    tenantCap: number;
  };
}

/** How long the event loop may have lagged (in the last second) for a start to be taken: by default, any time. */
export const DEFAULT_MAX_LOOP_DELAY_MS = Number.POSITIVE_INFINITY;

/**
 * Starts under way at once in one process. Measured on 2 cores with a local Redis: a burst of 3,000 unbounded starts
 * lagged the loop 1.5-4 s (past the store's 3 s command timeout on a loaded host); 200 at once kept it near 0.1 s.
 */
export const DEFAULT_MAX_STARTING_TASKS = 200;

const positive = z.number().int().positive();
const settingsSchema = z.strictObject({
  modelTimeoutMs: positive.optional(),
  saveRetries: z.number().int().nonnegative().optional(),
  expirySweepMs: z.number().int().nonnegative().optional(),
  orphanSweepMs: z.number().int().nonnegative().optional(),
  retentionSweepMs: z.number().int().nonnegative().optional(),
  backoff: z.strictObject({ baseDelayMs: z.number().nonnegative(), maxDelayMs: z.number().nonnegative() }).optional(),
  lease: z
    .strictObject({
      ttlMs: positive.optional(),
      renewEveryMs: positive.optional(),
      acquireTimeoutMs: z.number().int().nonnegative().optional(),
    })
    .optional(),
  capacity: z
    .strictObject({
      maxRunningTasks: positive.optional(),
      maxRunningPerTenant: positive.optional(),
      maxLoopDelayMs: positive.or(z.literal(Number.POSITIVE_INFINITY)).optional(),
      maxStartingTasks: positive.or(z.literal(Number.POSITIVE_INFINITY)).optional(),
      tenantCap: positive.optional(),
    })
    .optional(),
});

/** The chart's compaction settings from the options and the model's declared window; throws for bad values. */
function compactionOf(options: OrchestratorOptions): Settings['compaction'] {
  const given = options.compaction ?? {};
  const window = options.model.window;
  const atTokens =
    given.atTokens !== undefined
      ? given.atTokens
      : window
        ? Math.max(1, Math.floor((window.maxPromptTokens * 4) / 5))
        : null;
  if (atTokens !== null && !(Number.isInteger(atTokens) && atTokens > 0))
    throw new HostRequestError('invalid_request', 'options.compaction.atTokens must be a positive integer or null');
  const summarise = given.summarise ?? 'facts';
  if (typeof summarise !== 'function' && summarise !== 'facts' && summarise !== 'model')
    throw new HostRequestError(
      'invalid_request',
      "options.compaction.summarise must be 'facts', 'model' or a function (older, context) => summary",
    );
  const resultBytes = window?.maxToolResultBytes ?? DEFAULT_POLICY.observationCapBytes;
  return typeof summarise === 'function'
    ? { settings: { atTokens, resultBytes, summariser: 'host' }, summariser: summarise }
    : { settings: { atTokens, resultBytes, summariser: summarise } };
}

export function resolveSettings(options: OrchestratorOptions, systemClock: Clock, newId: () => string): Settings {
  const checked = parseOrThrow(
    settingsSchema,
    pick(options, [
      'modelTimeoutMs',
      'saveRetries',
      'expirySweepMs',
      'orphanSweepMs',
      'retentionSweepMs',
      'backoff',
      'lease',
      'capacity',
    ]),
    'options',
  );
  const ttlMs = checked.lease?.ttlMs ?? 15_000;
  return {
    policy: policyOf(options),
    limits: parseOrThrow(budgetLimitsSchema, { ...DEFAULT_LIMITS, ...options.limits }, 'limits'),
    clock: options.clock ?? systemClock,
    random: options.random ?? Math.random,
    modelTimeoutMs: checked.modelTimeoutMs ?? 60_000,
    backoff: checked.backoff ?? { baseDelayMs: 200, maxDelayMs: 5_000 },
    saveRetries: checked.saveRetries ?? 8,
    expirySweepMs: checked.expirySweepMs ?? 5_000,
    orphanSweepMs: checked.orphanSweepMs ?? null,
    retentionSweepMs: checked.retentionSweepMs ?? DEFAULT_RETENTION_SWEEP_MS,
    adminScope: options.adminScope ?? null,
    mandates: mandateKinds(options.mandates ?? []),
    newTaskId: options.newTaskId ?? newId,
    compaction: compactionOf(options),
    lease: {
      ttlMs,
      renewEveryMs: checked.lease?.renewEveryMs ?? Math.max(1, Math.floor(ttlMs / 3)),
      acquireTimeoutMs: checked.lease?.acquireTimeoutMs ?? 2_000,
    },
    capacity: {
      maxRunningTasks: checked.capacity?.maxRunningTasks ?? Number.POSITIVE_INFINITY,
      maxRunningPerTenant: checked.capacity?.maxRunningPerTenant ?? Number.POSITIVE_INFINITY,
      maxLoopDelayMs: checked.capacity?.maxLoopDelayMs ?? DEFAULT_MAX_LOOP_DELAY_MS,
      maxStartingTasks: checked.capacity?.maxStartingTasks ?? DEFAULT_MAX_STARTING_TASKS,
      tenantCap: checked.capacity?.tenantCap ?? Number.POSITIVE_INFINITY,
    },
  };
}

/** The host's policy over the defaults, with what `loosen` moved and its record. */
function policyOf(options: OrchestratorOptions): Policy {
  const { fields, loosened } = loosenedPolicy(options.policy as Partial<Policy> | undefined, options.loosen);
  const planning = { ...DEFAULT_POLICY.planning, ...options.policy?.planning };
  return parseOrThrow(policySchema, { ...DEFAULT_POLICY, ...options.policy, planning, ...fields, loosened }, 'policy');
}

function mandateKinds(kinds: readonly MandateKind<unknown>[]): Map<string, MandateKind<unknown>> {
  const map = new Map<string, MandateKind<unknown>>();
  for (const kind of kinds) {
    if (map.has(kind.kind))
      throw new HostRequestError('invalid_request', `options: two mandate kinds are named ${kind.kind}`);
    map.set(kind.kind, kind);
  }
  return map;
}

function pick<T extends object, K extends keyof T>(value: T, keys: K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const key of keys) if (value[key] !== undefined) out[key] = value[key];
  return out;
}

/** A start request as the host sends it; every part is checked against the schema the task is stored with. */
export const startRequestSchema = z.strictObject({
  /** From the host's authenticated session. */
  principal: principalSchema,
  goal: z
    .string()
    .min(1)
    .max(INPUT_LIMITS.goal)
    .refine((goal) => goal.trim() !== '', 'must not be blank'),
  /** Overrides of the default budget limits. */
  limits: budgetLimitsSchema.partial().optional(),
  /**
   * What counts as success: a trusted result of a tool that meets it ends the task `done`. Without it, a final answer
   * ends the task `answered` (never `done`), listing the writes that succeeded.
   */
  success: successCriterionSchema.optional(),
  /**
   * What the user asked for, as structured terms of an installed mandate kind (`defineMandate(...).of(terms)`, whose
   * id makes it single-use); persisted, never changed.
   */
  mandate: z
    .strictObject({ kind: z.string().min(1).max(256), terms: z.unknown(), id: z.string().min(1).max(128).optional() })
    .optional(),
  taskId: agentInputSchema.shape.taskId.max(INPUT_LIMITS.taskId).optional(),
  /** The name of an installed workflow the task follows (the host's flow; the model only decides within it). */
  workflow: z.string().min(1).max(256).optional(),
});

export type StartTaskRequest = z.input<typeof startRequestSchema>;

/** Parses host input, or throws HostRequestError naming the first problem's path. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new HostRequestError('invalid_request', `${what}: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
}

export { principalSchema };
