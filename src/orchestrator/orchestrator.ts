/**
 * The public API for an embedding backend: start tasks for a trusted principal, deliver the user's decisions,
 * read status, outcome and audit, resume persisted tasks. The work is done by the pieces next to this file: the
 * table of live tasks and their leases, host events and their authorization, the status projection, the expiry
 * sweeper and recovery. Whether tasks run in this process or are dispatched to workers is decided once, in the
 * constructor: the calls that differ go to the chosen `TaskMode` (`taskMode.ts`).
 *
 * @example
 * const orchestrator = createOrchestrator({ tools, model, store: new FileStore('.data/tasks') });
 * const status = await orchestrator.run({ principal: session.principal, goal: 'Book a room for 3 at 14:00' });
 * if (status.pendingConfirmation) {
 *   await orchestrator.confirm(status.taskId, session.principal, status.pendingConfirmation);
 * }
 */
import type { ModelReservation, Policy, Principal, Provenance } from '../../machines/context.js';
import type { TranscriptEntry } from '../../machines/journal.js';
import { safeErrorText } from '../../machines/lib/text.js';
import { AgentError } from '../errors.js';
import type { ToolRegistry } from '../runtime/toolRegistry.js';
import type { RetentionReport, TaskOwner, Tombstone } from '../store/erasure.js';
import type { TaskSummary } from '../store/summary.js';
import { type ListQuery, type TaskChange, type TaskStore, type TaskWatch, isErasable } from '../store/taskStore.js';
import { assembleOrchestrator } from './assemble.js';
import type { Capacity } from './capacity.js';
import type { Dispatch, DispatchWorker, DispatchWorkerOptions, QueueBacklog } from './dispatch.js';
import type { EraseTaskRequest, UserErasureReport } from './erasure.js';
import type { ExpirySweeper } from './expirySweeper.js';
import type { HostEvents, ReviewResolution } from './hostEvents.js';
import type { InFlight, LiveTasks } from './liveTasks.js';
import { type May, amountOfCall, mayOf } from './may.js';
import { type OrchestratorStats, fleetStats } from './fleetStats.js';
import type { OrchestratorOptions, Settings, StartTaskRequest } from './options.js';
import type { OrphanSweeper } from './orphanSweeper.js';
import type { Records } from './records.js';
import type { Subtasks } from './subtasks.js';
import type { RecoveryReport } from './recovery.js';
import type { RetentionSweepOptions } from './retentionSweeper.js';
import { taskInput } from './startTask.js';
import { type AuditRecord, type TaskStatus, type UserEventResult, statusOfLive } from './status.js';
import type { TaskMode } from './taskMode.js';
import { watchTask } from './watchTask.js';
import { type FoundTask, type TaskSearch, searchTasks } from './taskSearch.js';
import { ModelTextBus, type ModelTextListener } from '../runtime/modelText.js';
import { auditRecords, transcriptEntries } from './journalReads.js';

/** See `Orchestrator.stats()`. Counts are since the orchestrator was created. */
export class Orchestrator {
  /** Where this orchestrator's tasks persist. */
  readonly store: TaskStore;
  /** The host policy every new task is started with. */
  readonly policy: Policy;
  private readonly settings: Settings;
  private readonly registry: ToolRegistry;
  private readonly live: LiveTasks;
  private readonly events: HostEvents;
  private readonly sweeper: ExpirySweeper;
  private readonly orphans: OrphanSweeper | null;
  private readonly savedListeners = new Set<(summary: TaskSummary) => void>();
  private readonly modelText = new ModelTextBus();
  private readonly ownsStore: boolean;
  private readonly reservation: ModelReservation;
  private readonly provenance: Provenance;
  private closed = false;
  private readonly capacity: Capacity;
  /** Local or dispatched, chosen once in `assemble.ts`: what the calls that differ between the two do. */
  private readonly mode: TaskMode;
  private readonly records: Records;
  private readonly subtasks: Subtasks;
  private readonly recoveries: { resumed: number; quarantined: number };
  /** The queue, for `queueStats()` (null: tasks run here). */
  private readonly dispatch: Dispatch | null;

  constructor(options: OrchestratorOptions) {
    const parts = assembleOrchestrator(options, this.savedListeners, () => this.closed, this.modelText);
    this.dispatch = options.dispatch ?? null;
    ({
      settings: this.settings,
      reservation: this.reservation,
      provenance: this.provenance,
      policy: this.policy,
      registry: this.registry,
      store: this.store,
      ownsStore: this.ownsStore,
      live: this.live,
      capacity: this.capacity,
      events: this.events,
      mode: this.mode,
      sweeper: this.sweeper,
      orphans: this.orphans,
      records: this.records,
      subtasks: this.subtasks,
      recoveries: this.recoveries,
    } = parts);
    if (this.settings.retentionSweepMs > 0 && isErasable(this.store)) {
      this.startRetentionSweep({
        everyMs: this.settings.retentionSweepMs,
        onError: (error) => parts.logger.warn({ err: safeErrorText(error) }, 'the retention sweep failed'),
      });
    }
  }

  // --- tasks ----------------------------------------------------------------------------------------------

  /** Creates and persists a task, then lets it run. Resolves once its first state is saved. */
  async start(request: StartTaskRequest): Promise<TaskStatus> {
    this.assertOpen();
    const input = taskInput(request, {
      settings: this.settings,
      registry: this.registry,
      policy: this.policy,
      reservation: this.reservation,
      provenance: this.provenance,
    });
    return this.mode.start(input);
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
  async settled(taskId: string, options: { timeoutMs?: number } = {}): Promise<TaskStatus> {
    const task = this.live.get(taskId);
    if (!task) return this.mode.settledNotHere(taskId, options.timeoutMs ?? 300_000);
    await task.settled();
    return statusOfLive(task);
  }

  async status(taskId: string): Promise<TaskStatus> {
    const task = this.live.get(taskId);
    if (task) return statusOfLive(task);
    return this.mode.statusNotHere(taskId);
  }

  /** Restores a persisted task into this process and lets it continue (a no-op for a live one). */
  async resume(taskId: string): Promise<TaskStatus> {
    this.assertOpen();
    return this.mode.resume(taskId);
  }

  /**
   * Takes over tasks left running by a process that died: every stored task in the running state whose lease is
   * free (or expired) is resumed here; in-flight writes are reconciled, never re-run blindly. Then expires due
   * confirmations. Safe to run in several processes at once on a store with leases (Redis): the lease decides who
   * drives each task. The file store has no leases: run recovery in one process only. Take-overs run `concurrency`
   * at a time (default 32); `limit` bounds the dispatched sweep.
   */
  async recover(options: { limit?: number; concurrency?: number } = {}): Promise<RecoveryReport> {
    this.assertOpen();
    const report = await this.mode.recover(this.sweeper, options);
    // A child that ended while its parent's process was down: the waiting parent gets the outcome now.
    if (this.registry.hasSubtasks()) await this.subtasks.settleAll();
    this.recoveries.resumed += report.resumed.length;
    this.recoveries.quarantined += report.quarantined.length;
    return report;
  }

  /**
   * Takes jobs from the dispatch and drives their tasks in this process, `concurrency` at a time (default 10). Needs
   * the `dispatch` option. Close it (or the orchestrator, or `drain()`) to stop; several workers may run at once.
   *
   * @example
   * const worker = orchestrator.createWorker({ concurrency: 50 });
   */
  createWorker(options: Partial<DispatchWorkerOptions> = {}): DispatchWorker {
    this.assertOpen();
    return this.mode.createWorker({ concurrency: options.concurrency ?? 10 });
  }

  /** What this process holds now: tasks in memory and leases (a task that waits or ended holds neither). */
  inFlight(): InFlight {
    return this.live.inFlight();
  }

  /**
   * This process's load and what it did about it, for dashboards and `statechart-agent/otel`'s `otelMetrics`: tasks
   * and leases held now, the event loop's longest lag in the last second, tasks taken over (by `recover()` or the
   * orphan sweep) and starts refused for capacity, by reason, since the orchestrator was created.
   */
  stats(): OrchestratorStats {
    return fleetStats(this.live, this.capacity, this.recoveries);
  }

  /**
   * The dispatch queue's backlog, shared by the fleet (not this process's): jobs no worker has taken yet, by state
   * (waiting, delayed, prioritized), and how long the oldest waiting job has waited. Async, unlike `stats()`: it reads
   * the queue (at most about once a second; callers within that share the read). Null without a dispatch, or with
   * one that cannot tell. Rejects when the queue cannot be read.
   *
   * @example
   * const backlog = await orchestrator.queueStats(); // { waiting: 3, delayed: 1, prioritized: 0, oldestWaitingMs: 840 }
   */
  async queueStats(): Promise<QueueBacklog | null> {
    return this.dispatch?.backlog ? this.dispatch.backlog() : null;
  }

  list(query?: ListQuery): Promise<TaskSummary[]> {
    return this.store.list(query);
  }

  /**
   * One tenant's tasks for an operator's console: by state, by what they wait for (`approval`, `review`, `model`...)
   * and the tool they wait on, by user, id and age, paged; each with what it waits for (`taskSearch.ts`).
   *
   * @example
   * const stuck = await orchestrator.search({ tenantId: 'acme', waitingFor: ['review'], tool: 'refund_order' });
   */
  search(query: TaskSearch): Promise<FoundTask[]> {
    return searchTasks({ list: (q) => this.list(q), status: (id) => this.status(id) }, query);
  }

  /**
   * Calls `listener` after every save of a task driven by this process (a transition is acknowledged when this
   * fires). For progress views and tests; the listener must not throw. Returns an unsubscribe function.
   */
  onSaved(listener: (summary: TaskSummary) => void): () => void {
    this.savedListeners.add(listener);
    return () => this.savedListeners.delete(listener);
  }

  /**
   * Calls `listener` when task `taskId` may have new journal entries, wherever it is driven: on a store with change
   * notifications (`store.changes`: Redis across processes, MemoryStore within one) after every save by any process,
   * else after the saves this process acknowledges. While `live` is false, saves elsewhere may go unannounced: poll
   * `audit(taskId, from)`. For live views (the service's event streams); the listener must not throw.
   */
  watchTask(taskId: string, listener: (change: TaskChange) => void): TaskWatch {
    return watchTask(this.store, (saved) => this.onSaved(saved), taskId, listener);
  }

  /**
   * Calls `listener` with the text of task `taskId`'s model turns as it is written, when the model adapter streams
   * (`stream: true`) and this process drives the task (with dispatch to workers, the workers do: nothing arrives
   * here). Redacted as the stored text is, held back to line and sentence ends to make that sound (see
   * `src/runtime/modelText.ts`); tool calls' arguments never appear. Ephemeral: never persisted or replayed, and a
   * failed attempt's text is voided by a `discarded` event. The listener must not throw. Returns an unsubscribe
   * function.
   */
  watchModelText(taskId: string, listener: ModelTextListener): () => void {
    return this.modelText.watch(taskId, listener);
  }

  /** Tasks driven by this process right now (waiting and finished ones are not kept). */
  get liveTasks(): number {
    return this.live.size;
  }

  // --- user events: (taskId, the caller's principal, what they decided) ---------------------------------

  /**
   * Confirms the pending call. Must name the pending confirmation id and the hash of the exact arguments. `by` is the
   * deciding session's principal: the task's user, or (when the tool's rule asks for approvers) someone else holding
   * the approver scope; each approval is one call, and the call runs after the last one needed.
   */
  confirm(taskId: string, by: Principal, confirmation: { id: string; argsHash: string }): Promise<UserEventResult> {
    return this.events.confirm(taskId, by, confirmation, this.now());
  }

  /**
   * Rejects the pending call (the task's user, or an approver): it will not run, and the model is told (with the
   * reason, if given), or the task is cancelled when the tool's policy says so.
   */
  reject(taskId: string, by: Principal, confirmation: { id: string; reason?: string }): Promise<UserEventResult> {
    return this.events.reject(taskId, by, confirmation, this.now());
  }

  /** The scope of an administrator (`options.adminScope`): may cancel any task of their tenant; null when unset. */
  get adminScope(): string | null {
    return this.settings.adminScope;
  }

  /**
   * What `by` may do on the task now (confirm, reject, cancel, answer), asked of the same host refusals and chart
   * guards that decide when they act, with the refusal for each decision the task's state offers but not to them.
   * Reads nothing: pass the status you hold.
   */
  may(status: TaskStatus, by: Principal): May {
    return mayOf(status, by, this.now(), {
      adminScope: this.settings.adminScope,
      toolScopes: (tool) => this.registry.get(tool)?.scopes,
    });
  }

  /**
   * The money (minor units) a call of `tool` with `args` moves, by the tool's `amount` rule: 0 when the tool declares
   * none, null when it is unknown or the arguments do not parse (redacted arguments, for instance).
   */
  amountOf(tool: string, args: unknown): number | null {
    return amountOfCall(this.registry.get(tool), args);
  }

  /** Answers the model's question (only the task's user can). */
  answer(taskId: string, by: Principal, text: string): Promise<UserEventResult> {
    return this.events.deliver(taskId, by, { type: 'user.answered', at: this.now(), text, userId: by.userId });
  }

  /**
   * The task's user went away (their session closed): say so from the host's session layer, with the user's own
   * principal. The task finishes what runs now, then pauses before its next model turn and before any write; a pause
   * longer than the policy's `awayTtlMs` (a day) cancels it, undoing its writes where their tools say how.
   */
  userLeft(taskId: string, by: Principal): Promise<UserEventResult> {
    return this.events.deliver(taskId, by, { type: 'user.left', at: this.now(), userId: by.userId });
  }

  /** The task's user is back: a paused task resumes where it paused. */
  userReturned(taskId: string, by: Principal): Promise<UserEventResult> {
    return this.events.deliver(taskId, by, { type: 'user.returned', at: this.now(), userId: by.userId });
  }

  /** Cancels the task. A write in flight is first reconciled; a write held for review, resolved. */
  cancel(taskId: string, by: Principal, reason = ''): Promise<UserEventResult> {
    return this.events.deliver(taskId, by, { type: 'task.cancelled', at: this.now(), reason, by: by.userId });
  }

  /**
   * A reviewer's finding about the write a task waits on (state `review_required`; `list({ states:
   * ['review_required'] })` is the queue). `by` must hold the policy's review scope and not be the task's user.
   * `happened` needs the `result` the reviewer found (it must match the tool's output schema and becomes the write's
   * trusted result); `not_happened` tells the model; `retry` sends the write again with the same idempotency key
   * (only for tools that never duplicate on one).
   */
  resolveReview(taskId: string, by: Principal, resolution: ReviewResolution): Promise<UserEventResult> {
    return this.events.resolveReview(taskId, by, resolution, this.now());
  }

  /**
   * Delivers what is due (also while no process was running): confirmations and questions whose deadline passed,
   * model retries whose wake-up time came. Returns how many tasks it moved.
   */
  expireDue(): Promise<number> {
    return this.sweeper.expireDue();
  }

  // --- journal --------------------------------------------------------------------------------------------

  /**
   * Every decision of the task, in order; with `from`, only the durable ones from that position on (each record
   * keeps its `seq`), so a follower that saw `seq` N reads on from N + 1.
   */
  async audit(taskId: string, from = 0): Promise<AuditRecord[]> {
    return auditRecords(this.live, this.store, taskId, from);
  }

  /** What the model was shown, in order. */
  async transcript(taskId: string): Promise<TranscriptEntry[]> {
    return transcriptEntries(this.live, this.store, taskId);
  }

  /** Stops driving tasks in this process. In-flight work is abandoned; resume reconciles it. */
  async close(): Promise<void> {
    this.closed = true;
    this.sweeper.stop();
    this.orphans?.stop();
    this.records.stop();
    // Workers stop taking jobs first; the jobs in hand end when their tasks stop below (and go back to the queue).
    const workers = this.mode.stopTaking();
    await this.live.close();
    await workers;
    if (this.ownsStore) await this.store.close();
  }

  /**
   * Stops taking new tasks (`start` throws `orchestrator_draining`), waits up to `timeoutMs` (default 30 s) for the
   * tasks running here to come to rest, then closes: tasks still running stop where they were last saved and their
   * leases are released, so another process (its `recover()`) carries them on. Events for existing tasks are taken
   * until the close.
   */
  async drain(options: { timeoutMs?: number } = {}): Promise<{ handedBack: string[] }> {
    this.assertOpen();
    this.capacity.drain();
    await this.mode.pause();
    const handedBack = await this.live.quiesce(options.timeoutMs ?? 30_000);
    await this.close();
    return { handedBack };
  }

  private now(): number {
    this.assertOpen();
    return this.settings.clock.now();
  }

  private assertOpen(): void {
    if (this.closed) throw new AgentError('orchestrator_closed', 'this orchestrator was closed');
  }

  // --- erasure and retention (`records.ts`) -------------------------------------------------------------------

  /**
   * Erases a task: its envelope, both journals, its index entries, quarantine marker and lease go, and a minimal
   * tombstone stays (when, why, who asked, how much; nothing about the person). Afterwards every read and write of
   * the id (`status`, `audit`, the user events, `resume`, `start` with that id) throws TaskErasedError. Refuses a
   * task running in this process (TaskRunningError) unless `cancelRunning` (cancelled, reconciled, then erased),
   * and one another process drives (TaskBusyError). Idempotent: an erased task gives its first tombstone.
   *
   * @example
   * const tombstone = await orchestrator.erase(taskId, { reason: 'gdpr_erasure', by: request.ticketId });
   */
  async erase(taskId: string, request: EraseTaskRequest): Promise<Tombstone> {
    this.assertOpen();
    return this.records.erase(taskId, request);
  }

  /**
   * Erases every task of one user of one tenant, each as `erase` does; tasks it must leave (running, driven
   * elsewhere) are listed in `skipped` for a retry. On Redis, tasks saved by a version before owner indexes are
   * found only after `RedisStore.indexOwners()`.
   */
  async eraseUser(owner: TaskOwner, request: EraseTaskRequest): Promise<UserErasureReport> {
    this.assertOpen();
    return this.records.eraseUser(owner, request);
  }

  /** The tombstone of an erased task, or null (also on a store that cannot erase). */
  async tombstone(taskId: string): Promise<Tombstone | null> {
    return this.records.tombstone(taskId);
  }

  /**
   * Applies the store's retention periods now (see the store's `retention` option): finished tasks past theirs are
   * erased (tombstones with reason "retention"), tombstones past theirs removed. Nothing without retention options.
   */
  async sweepRetention(): Promise<RetentionReport> {
    this.assertOpen();
    return this.records.sweepRetention();
  }

  /**
   * Runs `sweepRetention` every `everyMs` (default 1 h; 0: never) until `close()` or the returned stop function.
   * Starting it again replaces the running one. Safe in several processes at once: each erasure is atomic.
   */
  startRetentionSweep(options: RetentionSweepOptions = {}): () => void {
    this.assertOpen();
    return this.records.startRetentionSweep(options);
  }
}

/** Creates an orchestrator. */
export function createOrchestrator(options: OrchestratorOptions): Orchestrator {
  return new Orchestrator(options);
}

export type { OrchestratorOptions, StartTaskRequest } from './options.js';
export type { OrchestratorStats } from './fleetStats.js';
export type { AuditRecord, TaskStatus, UserEventResult } from './status.js';
export type { ReviewResolution } from './hostEvents.js';
export { WAITING_REASONS, type FoundTask, type TaskSearch, type WaitingReason } from './taskSearch.js';
export type { RecoveryReport } from './recovery.js';
export { DEFAULT_LIMITS, DEFAULT_POLICY } from './options.js';
