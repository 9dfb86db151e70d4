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
import { type Principal, agentInputSchema } from '../../machines/context.js';
import { TaskNotFoundError } from '../errors.js';
import { forkPlan } from './fork.js';
import type { TaskSummary } from '../store/summary.js';
import { type ListQuery, type TaskChange, type TaskWatch } from '../store/taskStore.js';
import { OrchestratorBase } from './orchestratorBase.js';
import type { DispatchWorker, DispatchWorkerOptions, QueueBacklog } from './dispatch.js';
import type { ReviewResolution } from './hostEvents.js';
import type { InFlight } from './liveTasks.js';
import { type May, amountOfCall, mayOf } from './may.js';
import { type OrchestratorStats, fleetStats } from './fleetStats.js';
import { type OrchestratorOptions, type StartTaskRequest, parseOrThrow, principalSchema } from './options.js';
import type { RecoveryReport } from './recovery.js';
import { taskInput } from './startTask.js';
import { type TaskStatus, type UserEventResult, statusOfLive } from './status.js';
import { watchTask } from './watchTask.js';
import { type FoundTask, type TaskSearch, searchTasks } from './taskSearch.js';
import { type ModelTextListener, type ModelTextWatchOptions } from '../runtime/modelText.js';

/** Tasks and their user events; what every orchestrator holds, and closing, journals and erasure, are its base's. */
export class Orchestrator extends OrchestratorBase {
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

  /**
   * An operator forks task `taskId` from step `step` (its first `step` audit entries, as time travel numbers them)
   * into a new task: same tenant, run for `by` (the operator's session, never the original user), its transcript the
   * original's model turns before the one that step was in (that turn is asked again), offered only the original's
   * read tools, marked `forkedFrom: { taskId, step }`. A task with a mandate, a sub-task and a task following a
   * workflow are not forked (ForkNotAllowedError, `fork_not_allowed` with its `reason`): a copy must never authorise
   * a write. The copy gets the orchestrator's default limits and no success criterion.
   *
   * @example
   * const copy = await orchestrator.fork('refund-7', operator, { step: 12 });
   */
  async fork(taskId: string, by: Principal, options: { step: number; taskId?: string }): Promise<TaskStatus> {
    this.assertOpen();
    parseOrThrow(principalSchema, by, 'principal');
    const context = this.live.get(taskId)?.context() ?? (await this.store.load(taskId))?.snapshot.context;
    if (!context) throw new TaskNotFoundError(taskId);
    const [audit, transcript] = await Promise.all([this.audit(taskId), this.transcript(taskId)]);
    const plan = forkPlan(
      { context, audit, transcript },
      by,
      options.step,
      this.settings.adminScope,
      this.registry.catalog(),
    );
    const input = taskInput(
      { principal: by, goal: context.goal, ...(options.taskId !== undefined ? { taskId: options.taskId } : {}) },
      {
        settings: this.settings,
        registry: this.registry,
        policy: this.policy,
        reservation: this.reservation,
        provenance: this.provenance,
      },
    );
    const fork = { from: { taskId, step: options.step }, turns: plan.turns, transcript: plan.transcript };
    return this.mode.start(parseOrThrow(agentInputSchema, { ...input, tools: plan.tools, fork }, 'fork'));
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
   * (`stream: true`), wherever the task is driven: in this process, or by a worker elsewhere on the same Redis (the
   * store's `liveMessages`: pub/sub, published only while some process watches). Redacted as the stored text is,
   * held back to line and sentence ends to make that sound (see `src/runtime/modelText.ts`). With `calls: true`,
   * also the tool calls being written (`kind: 'call'`): unvetted proposals, redacted, never a decision. Ephemeral:
   * never persisted or replayed, and a failed attempt's text is voided by a `discarded` event. The listener must not
   * throw. Returns an unsubscribe function.
   */
  watchModelText(taskId: string, listener: ModelTextListener, options: ModelTextWatchOptions = {}): () => void {
    return this.modelText.watch(taskId, listener, options);
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
   * An operator of the task's tenant (`by` holds `adminScope`) asks the model again now, for a task waiting out a
   * model outage (`waiting_for_model`), instead of at its wake-up time. It spends one retry of the task's budget and
   * the turn's token and cost reservation, checked first. Refused with `operator_only`, `wrong_tenant`,
   * `not_waiting_for_model` or `budget_exhausted`; the audit names who asked, accepted or not. With a dispatch, the
   * event goes through the task's inbox like every user event.
   */
  retryModelNow(taskId: string, by: Principal): Promise<UserEventResult> {
    return this.events.retryModel(taskId, by, this.now());
  }

  /**
   * Delivers what is due (also while no process was running): confirmations and questions whose deadline passed,
   * model retries whose wake-up time came. Returns how many tasks it moved.
   */
  expireDue(): Promise<number> {
    return this.sweeper.expireDue();
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
export { ForkNotAllowedError, type ForkRefusal } from './fork.js';
export { DEFAULT_LIMITS, DEFAULT_POLICY } from './options.js';
