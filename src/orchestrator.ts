/**
 * The public API for an embedding backend: start tasks for a trusted principal, deliver the user's decisions,
 * read status, outcome and audit, resume persisted tasks.
 *
 * @example
 * const orchestrator = createOrchestrator({ tools, model, store: new FileStore('.data/tasks') });
 * const started = await orchestrator.start({ principal: session.principal, goal: 'Book a room for 3 at 14:00' });
 * const status = await orchestrator.settled(started.taskId);
 * if (status.pendingConfirmation) {
 *   await orchestrator.confirm(status.taskId, status.pendingConfirmation, session.principal);
 * }
 */
import { randomUUID } from 'node:crypto';
import type { InspectionEvent } from 'xstate';
import { z } from 'zod';
import { HOST_EVENT_TYPES, type HostEvent, hostEventSchema } from '../machines/agentEvents.js';
import type {
  AgentContext,
  AgentInput,
  BudgetCounters,
  BudgetLimits,
  Evidence,
  Observation,
  Outcome,
  PendingConfirmation,
  Policy,
  Principal,
  SuccessCriterion,
} from '../machines/agentTypes.js';
import type { AuditEntry, TranscriptEntry } from '../machines/journal.js';
import { type AgentMachine, agentMachine } from '../machines/agentMachine.js';
import { remaining } from '../machines/budget.js';
import { type ConfirmationRefusal, REFUSAL_MESSAGES } from '../machines/confirmation.js';
import { type Clock, systemClock } from './clock.js';
import {
  AgentError,
  CorruptTaskError,
  FencedOutError,
  HostRequestError,
  TaskBusyError,
  TaskExistsError,
  TaskNotFoundError,
  TaskQuarantinedError,
  UnsupportedVersionError,
} from './errors.js';
import type { AgentModel } from './model/agentModel.js';
import type { TaskPort } from './runtime/actorHost.js';
import { LiveTask } from './runtime/liveTask.js';
import { unrestorableReason } from './runtime/restore.js';
import { createRuntimeActors } from './runtime/runtimeActors.js';
import { ToolRegistry } from './runtime/toolRegistry.js';
import { type TaskEnvelope, type TaskState, type TaskSummary, summarize } from './store/envelope.js';
import { MemoryStore } from './store/memoryStore.js';
import type { Lease, ListQuery, TaskStore } from './store/taskStore.js';
import type { Tool } from './tool.js';

export const DEFAULT_POLICY: Policy = {
  version: '1',
  maxCallsPerBatch: 8,
  maxArgumentBytes: 16_384,
  maxRejectedTurns: 3,
  maxInvalidOutputs: 2,
  confirmationTtlMs: 15 * 60_000,
  maxConfirmationRequests: 3,
  maxReconcileAttempts: 3,
  observationCapBytes: 8_192,
};

export const DEFAULT_LIMITS: BudgetLimits = {
  modelTurns: 12,
  toolCalls: 24,
  writes: 4,
  retries: 8,
  tokens: 200_000,
  costMicros: 2_000_000,
  wallClockMs: 10 * 60_000,
};

export interface OrchestratorOptions {
  /** Every tool tasks may use. The model is offered only those the task's principal holds scopes for. */
  tools: readonly Tool[];
  model: AgentModel;
  /** Where tasks persist. Default: an in-memory store (lost with the process). */
  store?: TaskStore;
  /** Host policy; persisted with each task at start. */
  policy?: Partial<Policy>;
  /** Default budget limits of new tasks. */
  limits?: Partial<BudgetLimits>;
  clock?: Clock;
  /** Randomness for backoff jitter. */
  random?: () => number;
  /** Per model call (default 60 s). */
  modelTimeoutMs?: number;
  /** Backoff of model transport retries and repeated lookups. */
  backoff?: { baseDelayMs: number; maxDelayMs: number };
  /** Retries of a save that failed because the store was unreachable (default 8, about 10 s in all). */
  saveRetries?: number;
  /**
   * Interval of the sweep that expires due confirmations, from the store's index of deadlines (so it also catches
   * tasks that expired while no process ran). Default 5 s; 0 disables it (call `expireDue()` yourself).
   */
  expirySweepMs?: number;
  /** Receives XState inspection events of every task actor (see `src/inspect`). */
  inspect?: (event: InspectionEvent) => void;
  /** A principal with this scope may cancel other users' tasks in its tenant. */
  adminScope?: string;
  /** Makes task ids (default: "task_" + random UUID). */
  newTaskId?: () => string;
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

export interface RecoveryReport {
  /** Running tasks this process took over (their lease had expired or was free). */
  resumed: string[];
  /** Running tasks another live process drives. */
  busy: string[];
  /** Tasks that cannot be restored, with the reason now recorded on them. */
  quarantined: { taskId: string; reason: string }[];
  /** Confirmations that had expired while no process was running. */
  expired: number;
}

export interface StartTaskRequest {
  /** From the host's authenticated session. */
  principal: Principal;
  goal: string;
  /** Overrides of the default budget limits. */
  limits?: Partial<BudgetLimits>;
  /** What counts as success; without it, any final answer ends the task as done. */
  success?: SuccessCriterion;
  taskId?: string;
}

export interface TaskStatus {
  taskId: string;
  state: TaskState;
  stateValue: string;
  revision: number;
  goal: string;
  /** The principal the task runs for, as the host gave it at start. */
  principal: Principal;
  turn: number;
  outcome: Outcome | null;
  pendingConfirmation: PendingConfirmation | null;
  question: string | null;
  budget: { limits: BudgetLimits; used: BudgetCounters; remaining: BudgetCounters; deadlineAt: number };
  evidence: Evidence[];
  /** Results of the last batch, paired by call id. */
  observations: Observation[];
  createdAt: number;
  updatedAt: number;
}

export interface UserEventResult {
  /** True when the event changed the task (a confirmation granted, an answer taken, a cancel applied). */
  accepted: boolean;
  /** Why not, or what happened: arguments_changed, confirmation_expired, wrong_user, not_waiting... */
  code: string | null;
  message: string;
  status: TaskStatus;
}

export type AuditRecord = AuditEntry & { seq: number };

const principalSchema = z.strictObject({
  userId: z.string().min(1).max(256),
  tenantId: z.string().min(1).max(256),
  scopes: z.array(z.string().min(1)).max(256),
});

/** As the envelope stores it: a criterion it could not read back would quarantine the task at its first reload. */
const successSchema = z.strictObject({
  tool: z.string().min(1),
  match: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
  require: z.array(z.string()).optional(),
  description: z.string().optional(),
});

const taskIdSchema = z.string().min(1).max(512);

/** What the envelope accepts back, and a version `confirm` can carry (it must be non-empty). */
const policySchema = z
  .strictObject({
    version: z.string().min(1),
    maxCallsPerBatch: z.number().int().positive(),
    maxArgumentBytes: z.number().int().positive(),
    maxRejectedTurns: z.number().int().nonnegative(),
    maxInvalidOutputs: z.number().int().nonnegative(),
    confirmationTtlMs: z.number().int().positive(),
    maxConfirmationRequests: z.number().int().positive(),
    maxReconcileAttempts: z.number().int().nonnegative(),
    observationCapBytes: z.number().int().positive(),
  })
  .partial();

const limitsSchema = z
  .strictObject({
    modelTurns: z.number().int().nonnegative(),
    toolCalls: z.number().int().nonnegative(),
    writes: z.number().int().nonnegative(),
    retries: z.number().int().nonnegative(),
    tokens: z.number().int().nonnegative(),
    costMicros: z.number().int().nonnegative(),
    wallClockMs: z.number().int().positive(),
  })
  .partial();

export class Orchestrator {
  readonly store: TaskStore;
  readonly registry: ToolRegistry;
  readonly policy: Policy;
  private readonly limits: BudgetLimits;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly machine: AgentMachine;
  private readonly live = new Map<string, LiveTask>();
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly ownsStore: boolean;
  private sweeper: ReturnType<typeof setInterval> | null = null;
  private renewer: ReturnType<typeof setInterval> | null = null;
  private readonly leases = new Map<string, Lease>();
  private readonly savedListeners = new Set<(summary: TaskSummary) => void>();
  private readonly leaseTtlMs: number;
  private closed = false;

  constructor(private readonly options: OrchestratorOptions) {
    this.registry = new ToolRegistry(options.tools);
    this.store = options.store ?? new MemoryStore();
    this.ownsStore = options.store === undefined;
    this.policy = { ...DEFAULT_POLICY, ...parseOrThrow(policySchema, options.policy ?? {}, 'policy') };
    this.limits = { ...DEFAULT_LIMITS, ...limitsSchema.parse(options.limits ?? {}) };
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    const actors = createRuntimeActors({
      registry: this.registry,
      model: options.model,
      clock: this.clock,
      random: this.random,
      modelTimeoutMs: options.modelTimeoutMs ?? 60_000,
      backoff: options.backoff ?? { baseDelayMs: 200, maxDelayMs: 5_000 },
      task: (taskId) => this.port(taskId),
    });
    this.machine = agentMachine.provide({ actors }) as AgentMachine;
    this.leaseTtlMs = options.lease?.ttlMs ?? 15_000;
    if (this.store.leases) {
      this.renewer = setInterval(() => void this.renewLeases(), options.lease?.renewEveryMs ?? this.leaseTtlMs / 3);
      this.renewer.unref();
    }
    const sweepMs = options.expirySweepMs ?? 5_000;
    if (sweepMs > 0) {
      this.sweeper = setInterval(() => void this.expireDue().catch(() => {}), sweepMs);
      this.sweeper.unref();
    }
  }

  // --- tasks ----------------------------------------------------------------------------------------------

  /** Creates and persists a task, then lets it run. Resolves once its first state is saved. */
  async start(request: StartTaskRequest): Promise<TaskStatus> {
    this.assertOpen();
    const principal = parseOrThrow(principalSchema, request.principal, 'principal');
    if (typeof request.goal !== 'string' || request.goal.trim() === '' || request.goal.length > 16_384) {
      throw new HostRequestError('invalid_request', 'start: goal must be a non-empty string of at most 16,384 characters');
    }
    const success = request.success === undefined ? null : parseOrThrow(successSchema, request.success, 'success');
    if (success && !this.registry.get(success.tool)) {
      throw new HostRequestError('invalid_request', `start: success criterion names unknown tool ${success.tool}`);
    }
    const taskId = parseOrThrow(taskIdSchema, request.taskId ?? this.options.newTaskId?.() ?? `task_${randomUUID()}`, 'taskId');
    const input: AgentInput = {
      taskId,
      goal: request.goal,
      principal,
      catalog: this.registry.catalog(),
      policy: this.policy,
      limits: { ...this.limits, ...parseOrThrow(limitsSchema, request.limits ?? {}, 'limits') },
      modelReservation: this.options.model.reservation ?? { tokens: 4_000, costMicros: 0 },
      success,
      startedAt: this.clock.now(),
    };
    return this.exclusive(taskId, async () => {
      if (this.live.has(taskId)) throw new TaskExistsError(taskId);
      await this.takeLease(taskId);
      try {
        // Unreadable data under this id still means the id is taken; a store that cannot answer is not a clash.
        const existing = await this.store.load(taskId).catch((error: unknown) => {
          if (error instanceof CorruptTaskError || error instanceof UnsupportedVersionError) return true;
          throw error;
        });
        if (existing) throw new TaskExistsError(taskId);
      } catch (error) {
        await this.releaseLease(taskId);
        throw error;
      }
      const task = this.attach(new LiveTask(this.liveDeps(taskId), { kind: 'new', input }));
      task.start();
      await task.barrier();
      return this.statusOf(task);
    });
  }

  /** Starts a task and waits until it needs a human or has finished. */
  async run(request: StartTaskRequest): Promise<TaskStatus> {
    const started = await this.start(request);
    return this.settled(started.taskId);
  }

  /**
   * Resolves when the task waits for a human or has finished, with that state persisted. A task that is not
   * running in this process resolves with its stored status (use `resume` to drive an interrupted one).
   */
  async settled(taskId: string): Promise<TaskStatus> {
    const task = this.live.get(taskId);
    if (task && !task.failed) {
      await task.settled();
      return this.statusOf(task);
    }
    return this.status(taskId);
  }

  async status(taskId: string): Promise<TaskStatus> {
    const task = this.live.get(taskId);
    if (task && !task.failed) return this.statusOf(task);
    const envelope = await this.store.load(taskId);
    if (!envelope) throw new TaskNotFoundError(taskId);
    return statusFrom(envelope.snapshot.context, envelope.summary);
  }

  /** Restores a persisted task into this process and lets it continue (a no-op for a live one). */
  async resume(taskId: string): Promise<TaskStatus> {
    this.assertOpen();
    return this.exclusive(taskId, async () => {
      const task = await this.hydrate(taskId);
      this.releaseIfSettled(task);
      return this.statusOf(task);
    });
  }

  /**
   * Takes over tasks left running by a process that died: every stored task in the running state whose lease is
   * free (or expired) is resumed here; in-flight writes are reconciled, never re-run blindly. Then expires due
   * confirmations. Safe to run in several processes at once on a store with leases (Redis): the lease decides who
   * drives each task. The file store has no leases: run recovery in one process only.
   */
  async recover(): Promise<RecoveryReport> {
    const report: RecoveryReport = { resumed: [], busy: [], quarantined: [], expired: 0 };
    for (const summary of await this.store.list({ states: ['running'] })) {
      if (this.live.has(summary.taskId)) continue;
      try {
        await this.exclusive(summary.taskId, async () => {
          await this.hydrate(summary.taskId, { wait: false });
        });
        report.resumed.push(summary.taskId);
      } catch (error) {
        if (error instanceof TaskBusyError) report.busy.push(summary.taskId);
        else if (error instanceof TaskQuarantinedError) report.quarantined.push({ taskId: summary.taskId, reason: error.reason });
        else throw error;
      }
    }
    report.expired = await this.expireDue();
    return report;
  }

  list(query?: ListQuery): Promise<TaskSummary[]> {
    return this.store.list(query);
  }

  /**
   * Calls `listener` after every save of a task driven by this process (a transition is acknowledged when this
   * fires). For progress views and tests; the listener must not throw. Returns an unsubscribe function.
   */
  onSaved(listener: (summary: TaskSummary) => void): () => void {
    this.savedListeners.add(listener);
    return () => this.savedListeners.delete(listener);
  }

  // --- user events ----------------------------------------------------------------------------------------

  /** Confirms the pending call. Must name the pending confirmation id and the hash of the exact arguments. */
  confirm(
    taskId: string,
    confirmation: { id: string; argsHash: string },
    by: Principal,
  ): Promise<UserEventResult> {
    return this.deliver(taskId, by, {
      type: 'user.confirmed',
      at: this.clock.now(),
      confirmationId: confirmation.id,
      argsHash: confirmation.argsHash,
      userId: by.userId,
      policyVersion: this.policy.version,
    });
  }

  reject(taskId: string, confirmation: { id: string; reason?: string }, by: Principal): Promise<UserEventResult> {
    return this.deliver(taskId, by, {
      type: 'user.rejected',
      at: this.clock.now(),
      confirmationId: confirmation.id,
      userId: by.userId,
      reason: confirmation.reason ?? null,
    });
  }

  answer(taskId: string, text: string, by: Principal): Promise<UserEventResult> {
    return this.deliver(taskId, by, { type: 'user.answered', at: this.clock.now(), text, userId: by.userId });
  }

  /** Cancels the task. A write in flight is first reconciled; then the task ends as cancelled. */
  cancel(taskId: string, by: Principal, reason = ''): Promise<UserEventResult> {
    return this.deliver(taskId, by, { type: 'task.cancelled', at: this.clock.now(), reason, by: by.userId });
  }

  /** Expires confirmations whose deadline passed (also while no process was running). Returns how many. */
  async expireDue(): Promise<number> {
    const now = this.clock.now();
    const due = await this.store.list({ states: ['waiting_for_confirmation'], dueBefore: now });
    let expired = 0;
    for (const summary of due) {
      try {
        await this.exclusive(summary.taskId, async () => {
          const task = await this.hydrate(summary.taskId);
          const pending = task.context().pendingConfirmation;
          if (!pending || pending.expiresAt > now) return;
          task.send({ type: 'timer.confirmationExpired', at: now, confirmationId: pending.id });
          await task.barrier();
          this.releaseIfSettled(task);
          expired += 1;
        });
      } catch (error) {
        if (!(error instanceof AgentError)) throw error;
      }
    }
    return expired;
  }

  // --- journal --------------------------------------------------------------------------------------------

  /** Every decision of the task, in order. */
  async audit(taskId: string): Promise<AuditRecord[]> {
    const entries = (await this.journal(taskId, 'audit')) as AuditEntry[];
    return entries.map((entry, seq) => ({ seq, ...entry }));
  }

  /** What the model was shown, in order. */
  async transcript(taskId: string): Promise<TranscriptEntry[]> {
    return (await this.journal(taskId, 'transcript')) as TranscriptEntry[];
  }

  private async journal(taskId: string, stream: 'audit' | 'transcript'): Promise<unknown[]> {
    const task = this.live.get(taskId);
    if (task && !task.failed) await task.barrier().catch(() => {});
    const envelope = await this.store.load(taskId);
    if (!envelope) throw new TaskNotFoundError(taskId);
    return this.store.readJournal(taskId, stream, 0, envelope.journal[stream]);
  }

  /** Stops driving tasks in this process. In-flight work is abandoned; resume reconciles it. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.sweeper) clearInterval(this.sweeper);
    if (this.renewer) clearInterval(this.renewer);
    for (const task of [...this.live.values()]) task.stop();
    this.live.clear();
    await Promise.all([...this.leases.keys()].map((taskId) => this.releaseLease(taskId)));
    if (this.ownsStore) await this.store.close();
  }

  // --- internals ------------------------------------------------------------------------------------------

  private async deliver(taskId: string, by: Principal, event: HostEvent): Promise<UserEventResult> {
    this.assertOpen();
    parseOrThrow(principalSchema, by, 'principal');
    if (!HOST_EVENT_TYPES.includes(event.type)) throw new HostRequestError('invalid_event', `event ${event.type} is not allowed`);
    parseOrThrow(hostEventSchema, event, event.type);
    return this.exclusive(taskId, async () => {
      const task = await this.hydrate(taskId);
      try {
        return await this.apply(task, by, event);
      } finally {
        // Loaded only for this event (refused, or leaving it waiting/finished): do not keep it in memory.
        this.releaseIfSettled(task);
      }
    });
  }

  /** Checks what the host knows (tenant, finished, current scopes, who may cancel), then sends the event. */
  private async apply(task: LiveTask, by: Principal, event: HostEvent): Promise<UserEventResult> {
    const context = task.context();
    const refuse = (code: string, message: string): UserEventResult => ({ accepted: false, code, message, status: this.statusOf(task) });
    if (by.tenantId !== context.principal.tenantId) return refuse('wrong_tenant', 'the task belongs to another tenant');
    if (context.outcome) return refuse('task_finished', `the task already ended (${context.outcome.status})`);
    if (event.type === 'user.confirmed' && context.pendingConfirmation?.userId === by.userId) {
      // The confirming user must still hold the scopes the tool needs, not only have held them at task start.
      const tool = this.registry.get(context.pendingConfirmation.tool);
      const missing = tool?.scopes.filter((scope) => !by.scopes.includes(scope)) ?? [];
      if (missing.length > 0) return refuse('permission_denied', `the confirming session lacks scope ${missing.join(', ')}`);
    }
    if (
      event.type === 'task.cancelled' &&
      by.userId !== context.principal.userId &&
      !(this.options.adminScope && by.scopes.includes(this.options.adminScope))
    ) {
      return refuse('wrong_user', 'only the task user or an administrator may cancel it');
    }
    const before = task.currentSnapshot();
    const emitted = task.send(event);
    await task.barrier();
    const changed = task.currentSnapshot() !== before;
    return { ...interpret(event, emitted, changed), status: this.statusOf(task) };
  }

  private attach(task: LiveTask): LiveTask {
    this.live.set(task.taskId, task);
    task.onSaved((summary) => {
      for (const listener of this.savedListeners) listener(summary);
      if (summary.state !== 'running') void this.evictIfIdle(task);
    });
    // Stopped, fenced out or store failure: this process no longer drives the task.
    task.onFailure(() => {
      if (this.live.get(task.taskId) === task) this.live.delete(task.taskId);
      void this.releaseLease(task.taskId);
    });
    return task;
  }

  /** Tasks driven by this process right now (waiting and finished ones are not kept). */
  get liveTasks(): number {
    return this.live.size;
  }

  /**
   * Inside an exclusive section: a task that was loaded only to read it or to refuse an event, and needs nothing
   * more, is dropped again (no save follows to trigger the usual eviction).
   */
  private releaseIfSettled(task: LiveTask): void {
    if (this.live.get(task.taskId) === task && task.isSettled()) task.stop();
  }

  /** A waiting or finished task holds no memory here: it is reloaded when an event arrives. */
  private evictIfIdle(task: LiveTask): Promise<void> {
    return this.exclusive(task.taskId, async () => {
      if (this.live.get(task.taskId) === task && task.isSettled()) task.stop();
    });
  }

  /** Makes the task live here: takes its lease (if the store has leases), validates and restores it. */
  private async hydrate(taskId: string, options: { wait?: boolean } = {}): Promise<LiveTask> {
    const existing = this.live.get(taskId);
    if (existing && !existing.failed) return existing;
    if (existing) this.live.delete(taskId);
    await this.takeLease(taskId, options.wait ?? true);
    try {
      const envelope = await this.loadRestorable(taskId);
      const task = this.attach(new LiveTask(this.liveDeps(taskId), { kind: 'restored', envelope }));
      task.start();
      return task;
    } catch (error) {
      await this.releaseLease(taskId);
      throw error;
    }
  }

  private async loadRestorable(taskId: string): Promise<TaskEnvelope> {
    const quarantined = await this.store.quarantined(taskId);
    if (quarantined) throw new TaskQuarantinedError(taskId, quarantined);
    let envelope;
    try {
      envelope = await this.store.load(taskId);
    } catch (error) {
      if (error instanceof CorruptTaskError || error instanceof UnsupportedVersionError) {
        await this.store.quarantine(taskId, error.message);
        throw new TaskQuarantinedError(taskId, error.message);
      }
      throw error;
    }
    if (!envelope) throw new TaskNotFoundError(taskId);
    const reason = unrestorableReason(this.machine, envelope);
    if (reason) {
      await this.store.quarantine(taskId, reason);
      throw new TaskQuarantinedError(taskId, reason);
    }
    return envelope;
  }

  private liveDeps(taskId: string) {
    return {
      store: this.store,
      machine: this.machine,
      clock: this.clock,
      random: this.random,
      inspect: this.options.inspect,
      saveRetries: this.options.saveRetries ?? 8,
      fence: () => this.leases.get(taskId)?.fence,
    };
  }

  // --- leases ---------------------------------------------------------------------------------------------

  /** Takes the task's lease when the store has leases; waits up to acquireTimeoutMs (real time) unless told not to. */
  private async takeLease(taskId: string, wait = true): Promise<void> {
    const leases = this.store.leases;
    if (!leases || this.leases.has(taskId)) return;
    const deadline = Date.now() + (wait ? (this.options.lease?.acquireTimeoutMs ?? 2_000) : 0);
    for (let attempt = 0; ; attempt++) {
      const lease = await leases.acquire(taskId, this.leaseTtlMs);
      if (lease) {
        this.leases.set(taskId, lease);
        return;
      }
      if (Date.now() >= deadline) throw new TaskBusyError(taskId);
      await new Promise((resolve) => setTimeout(resolve, Math.min(25 * 2 ** attempt, 250)));
    }
  }

  private async releaseLease(taskId: string): Promise<void> {
    const lease = this.leases.get(taskId);
    if (!lease || this.live.has(taskId)) return;
    this.leases.delete(taskId);
    await this.store.leases?.release(lease).catch(() => {});
  }

  /** Renews every lease held; a task whose lease is lost (or may be, past its expiry) stops being driven here. */
  private async renewLeases(): Promise<void> {
    for (const [taskId, lease] of [...this.leases]) {
      let kept: boolean;
      try {
        kept = await this.store.leases!.renew(lease, this.leaseTtlMs);
      } catch {
        kept = Date.now() < lease.expiresAt;
      }
      if (!kept) this.live.get(taskId)?.fail(new FencedOutError(taskId, 'this process lost the lease'));
    }
  }

  private port(taskId: string): TaskPort {
    const task = this.live.get(taskId);
    if (!task) throw new AgentError('task_not_live', `task ${taskId} is not running in this process`);
    return task;
  }

  private statusOf(task: LiveTask): TaskStatus {
    const snapshot = task.currentSnapshot();
    const saved = task.summary;
    const summary = summarize(snapshot as never, {
      revision: saved?.revision ?? 0,
      createdAt: saved?.createdAt ?? snapshot.context.startedAt,
      updatedAt: saved?.updatedAt ?? snapshot.context.startedAt,
    });
    return statusFrom(snapshot.context as AgentContext, summary);
  }

  /** Runs `fn` with exclusive access to one task in this process. */
  private exclusive<T>(taskId: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(taskId) ?? Promise.resolve();
    const next = previous.then(fn, fn);
    const tail = next.catch(() => {});
    this.locks.set(taskId, tail);
    void tail.then(() => {
      if (this.locks.get(taskId) === tail) this.locks.delete(taskId);
    });
    return next;
  }

  private assertOpen(): void {
    if (this.closed) throw new AgentError('orchestrator_closed', 'this orchestrator was closed');
  }
}

/** Creates an orchestrator. */
export function createOrchestrator(options: OrchestratorOptions): Orchestrator {
  return new Orchestrator(options);
}

function statusFrom(context: AgentContext, summary: TaskSummary): TaskStatus {
  return {
    taskId: context.taskId,
    state: summary.state,
    stateValue: summary.stateValue,
    revision: summary.revision,
    goal: context.goal,
    principal: { userId: context.principal.userId, tenantId: context.principal.tenantId, scopes: [...context.principal.scopes] },
    turn: context.turn,
    outcome: context.outcome,
    pendingConfirmation: context.pendingConfirmation,
    question: context.question,
    budget: {
      limits: context.budget.limits,
      used: context.budget.used,
      remaining: remaining(context.budget),
      deadlineAt: context.budget.deadlineAt,
    },
    evidence: context.evidence,
    observations: context.batch?.calls.flatMap((c) => (c.observation ? [c.observation] : [])) ?? [],
    createdAt: summary.createdAt,
    updatedAt: summary.updatedAt,
  };
}

/** What a delivered event did, read from the audit entries its processing emitted. */
function interpret(event: HostEvent, emitted: AuditEntry[], changed: boolean): Omit<UserEventResult, 'status'> {
  const confirmation = emitted.filter((e) => e.kind === 'confirmation');
  switch (event.type) {
    case 'user.confirmed': {
      const granted = confirmation.find((e) => e.action === 'granted');
      if (granted) return { accepted: true, code: null, message: 'confirmed; the call runs now' };
      const refused = confirmation.find((e) => e.action === 'refused');
      if (refused) {
        const asked = confirmation.find((e) => e.action === 'requested');
        const why = REFUSAL_MESSAGES[refused.code as ConfirmationRefusal] ?? refused.code;
        return {
          accepted: false,
          code: refused.code,
          message: asked ? `refused: ${why} (now ${asked.confirmationId})` : `refused: ${why}`,
        };
      }
      return { accepted: false, code: 'not_waiting_for_confirmation', message: 'the task is not waiting for a confirmation' };
    }
    case 'user.rejected':
      return confirmation.some((e) => e.action === 'rejected')
        ? { accepted: true, code: null, message: 'rejected; the call will not run and the model is told' }
        : { accepted: false, code: 'unknown_confirmation', message: 'no pending confirmation matches this id and user' };
    case 'user.answered':
      return emitted.some((e) => e.kind === 'user_answered')
        ? { accepted: true, code: null, message: 'answer passed to the model' }
        : { accepted: false, code: 'not_waiting_for_answer', message: 'the task is not waiting for this user to answer' };
    case 'task.cancelled':
      return changed
        ? { accepted: true, code: null, message: emitted.some((e) => e.kind === 'cancel_requested') ? 'cancel requested; it applies once the write in flight is reconciled' : 'cancelled' }
        : { accepted: false, code: 'not_cancellable', message: 'the task could not be cancelled now' };
    case 'timer.confirmationExpired':
      return { accepted: changed, code: null, message: 'expiry processed' };
  }
}

function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new HostRequestError('invalid_request', `${what}: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
}
