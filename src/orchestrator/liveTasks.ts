/**
 * The table of tasks this process drives right now, and how a task gets into it: created, or loaded, validated and
 * restored under its lease (what is checked first: `admission.ts`). Waiting and finished tasks are not kept: they are
 * reloaded when an event arrives. Every operation on one task runs in that task's exclusive section (one at a time per task, in this process).
 *
 * A task whose lease this process lost (a renewal came too late or found it gone) stops here at once; then this
 * process tries to take the lease back, and resumes the task from the store if nobody else saved it meanwhile. The
 * new lease comes with a new fence, so whatever the stopped run still had in flight can no longer be saved.
 */
import type { AgentInput, Catalog } from '../../machines/context.js';
import {
  AgentError,
  type CatalogDifference,
  type CatalogMismatchError,
  FencedOutError,
  MachineError,
  StoreUnavailableError,
  TaskBusyError,
} from '../errors.js';
import { LiveTask, type LiveTaskDeps, type SavedBatch } from '../runtime/liveTask.js';
import { MoveRecorder } from '../runtime/moveRecorder.js';
import { isFinished } from '../store/erasure.js';
import type { Lease } from '../store/taskStore.js';
import type { TaskSummary } from '../store/summary.js';
import { NO_TRACING, type Tracing } from '../runtime/tracing.js';
import { assertCatalog, loadRestorable, refuseBusy } from './admission.js';
import { LeaseKeeper } from './leaseKeeper.js';
import type { TenantCap } from './tenantCap.js';

/** What every live task needs (the fencing token comes from the lease keeper), plus the lease settings. */
export interface LiveTasksDeps extends Omit<LiveTaskDeps, 'fence'> {
  lease: { ttlMs: number; renewEveryMs: number; acquireTimeoutMs: number };
  /** Called after every save of a task driven here. */
  onSaved: (summary: TaskSummary, saved: SavedBatch) => void;
  /** A task stopped being driven here for a reason other than a plain stop (fenced out, store failure, a bug). */
  onTaskFailure?: (taskId: string, error: Error) => void;
  /** This process took a lost lease back and drives the task again. */
  onTakenBack?: (taskId: string) => void;
  /**
   * How this process's tools differ from a task's catalog (`catalogBinding.ts`): a task with any difference is not
   * driven here (CatalogMismatchError). Without it, every task is.
   */
  catalogDifferences?: (catalog: Catalog) => CatalogDifference[];
  /** A task was refused here for its catalog (called once per refusal, before the error is thrown). */
  onCatalogMismatch?: (error: CatalogMismatchError) => void;
  /** Runs of tasks as spans, their gate decisions and confirmations as events. */
  tracing: Tracing;
  /** The tenant cap across processes (`capacity.tenantCap`): a task running here holds its tenant slot. */
  tenantCap?: TenantCap | null;
}

/** How many recent task failures are remembered for `settled()`. */
const RECENT_FAILURES = 1_000;

/** How often, at most, a lost lease is tried again before the task is left to `recover()` (or another process). */
const RETAKE_ATTEMPTS = 5;

/** What this process holds right now: tasks in memory, and leases (a lease is taken before its task is loaded). */
export interface InFlight {
  live: number;
  leases: number;
}

export class LiveTasks {
  private readonly live = new Map<string, LiveTask>();
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Lost leases being taken back, by task, so that `close` (and a worker's job) can wait for them. */
  private readonly retakes = new Map<string, Promise<void>>();
  /** Leases being given up after their task stopped here, by task (a worker checks the inbox after it). */
  private readonly releasing = new Map<string, Promise<void>>();
  /** Recent reasons this process stopped driving a task (bounded). */
  private readonly failures = new Map<string, Error>();
  /** Wakes the retakes that wait for their next attempt, when closing. */
  private readonly wakers = new Set<() => void>();
  private closed = false;
  readonly leases: LeaseKeeper;
  /** Null without `capacity.tenantCap`. */
  readonly tenantCap: TenantCap | null;

  constructor(private readonly deps: LiveTasksDeps) {
    const { store } = deps;
    // The chart's transition tokens are read once per machine: here, not inside the first task's restore.
    MoveRecorder.prepare(deps.machine);
    this.tenantCap = deps.tenantCap ?? null;
    this.leases = new LeaseKeeper(
      store.leases,
      deps.lease,
      (taskId) => this.lostLease(taskId),
      store.acquireAndRead?.bind(store),
    );
  }

  get size(): number {
    return this.live.size;
  }

  /** Tasks running here (not waiting, not ended), in all or of one tenant. */
  running(tenantId?: string): number {
    let count = 0;
    for (const task of this.live.values()) {
      if (task.failed || task.isSettled()) continue;
      if (tenantId === undefined || task.context().principal.tenantId === tenantId) count += 1;
    }
    return count;
  }

  /** Resolves when every task running here has come to rest (or stopped), or after `timeoutMs`: the ones still running. */
  async quiesce(timeoutMs: number): Promise<string[]> {
    const running = [...this.live.values()].filter((task) => !task.failed && !task.isSettled());
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
      timer.unref();
    });
    await Promise.race([Promise.allSettled(running.map((task) => task.settled())), deadline]);
    clearTimeout(timer);
    // Every task still running now, also one that started running (an event, a take-back) while this waited.
    return [...this.live.values()].filter((task) => !task.failed && !task.isSettled()).map((task) => task.taskId);
  }

  /** Read-only counts, for tests and metrics: a settled task holds neither once its eviction ran. */
  inFlight(): InFlight {
    return { live: this.live.size, leases: this.leases.size };
  }

  /** The task if this process drives it and can still save it. */
  get(taskId: string): LiveTask | undefined {
    const task = this.live.get(taskId);
    return task && !task.failed ? task : undefined;
  }

  has(taskId: string): boolean {
    return this.live.has(taskId);
  }

  /**
   * Right before a task is attached, after the awaits that took its lease and loaded it: refuses when this process
   * closed meanwhile (a task attached after close would run on with no lease), or when its lease was found lost in
   * between (it would never be renewed again, and another process may take the task).
   */
  private assertMayDrive(taskId: string): void {
    if (this.closed) throw new AgentError('orchestrator_closed', 'this orchestrator was closed');
    if (!this.leases.drives(taskId)) throw new TaskBusyError(taskId);
  }

  /** Refuses a task whose catalog names tools this process does not have as they were (`admission.ts`). */
  private assertCatalog(taskId: string, catalog: Catalog): void {
    assertCatalog(taskId, catalog, this.deps.catalogDifferences, this.deps.onCatalogMismatch);
  }

  /** Runs `fn` with exclusive access to one task in this process. */
  exclusive<T>(taskId: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(taskId) ?? Promise.resolve();
    const next = previous.then(fn, fn);
    const tail = next.catch(() => {});
    this.locks.set(taskId, tail);
    void tail.then(() => {
      if (this.locks.get(taskId) === tail) this.locks.delete(taskId);
    });
    return next;
  }

  /** Creates a task (its lease already taken) and starts it. */
  create(input: AgentInput): LiveTask {
    this.assertMayDrive(input.taskId);
    // A start recorded by another process (a dispatch job) carries that process's catalog.
    this.assertCatalog(input.taskId, input.catalog);
    const task = this.attach(new LiveTask(this.liveDeps(input.taskId), { kind: 'new', input }));
    task.start();
    return task;
  }

  /** Makes the task live here: takes its lease (if the store has leases), validates and restores it. */
  async hydrate(taskId: string, options: { wait?: boolean } = {}): Promise<LiveTask> {
    const existing = this.live.get(taskId);
    if (existing && !existing.failed) return existing;
    if (existing) this.live.delete(taskId);
    const taken = await this.leases
      .take(taskId, options.wait ?? true, true)
      .catch((error: unknown) =>
        error instanceof TaskBusyError ? this.refuseBusy(taskId, error) : Promise.reject(error),
      );
    try {
      const envelope = await loadRestorable(this.deps.store, this.deps.machine, taskId, taken);
      // A finished task runs nothing more: it is loaded to be read, or to refuse an event.
      if (!isFinished(envelope.summary.state)) this.assertCatalog(taskId, envelope.snapshot.context.catalog);
      this.assertMayDrive(taskId);
      const task = this.attach(new LiveTask(this.liveDeps(taskId), { kind: 'restored', envelope }));
      // Running again here (taken over, or resumed mid-run): it counts against its tenant's cap, never refused.
      if (envelope.summary.state === 'running') this.tenantCap?.hold(envelope.summary.tenantId, taskId);
      task.start();
      return task;
    } catch (error) {
      await this.releaseLease(taskId);
      throw error;
    }
  }

  /** TaskBusyError for a task that exists, TaskNotFoundError for one never created (`admission.ts`). */
  refuseBusy(taskId: string, busy: TaskBusyError, queued?: () => Promise<boolean>): Promise<never> {
    return refuseBusy(this.deps.store, taskId, busy, queued);
  }

  /**
   * Inside an exclusive section: takes over a task whose lease is free (recovery, a lease taken back) without
   * waiting. True when it is driven here now; false when it had come to rest meanwhile (finished, or waiting for
   * someone): then it is dropped again, lease and all, as nothing drives a settled task.
   */
  async takeOver(taskId: string): Promise<boolean> {
    const task = await this.hydrate(taskId, { wait: false });
    this.releaseIfSettled(task);
    return this.live.get(taskId) === task;
  }

  /**
   * Inside an exclusive section: a task that was loaded only to read it or to refuse an event, and needs nothing
   * more, is dropped again (no save follows to trigger the usual eviction).
   */
  releaseIfSettled(task: LiveTask): void {
    if (this.live.get(task.taskId) === task && task.isSettled()) task.stop();
  }

  /** Gives the lease up unless the task is (again) driven here; with `only`, just that lease object. */
  async releaseLease(taskId: string, only?: Lease): Promise<void> {
    if (!this.live.has(taskId)) await this.leases.release(taskId, only);
  }

  /** Resolves when a lost lease of the task is no longer being taken back here (at once if none is). */
  async retaking(taskId: string): Promise<void> {
    await this.retakes.get(taskId);
  }

  /**
   * For a worker whose task came to rest: drops the task from memory if it is settled, and resolves once its lease
   * is given up, so that what the worker reads afterwards was recorded while nobody here held the task.
   */
  async park(taskId: string): Promise<void> {
    await this.exclusive(taskId, async () => {
      const task = this.live.get(taskId);
      if (task) this.releaseIfSettled(task);
    });
    await this.releasing.get(taskId);
  }

  /**
   * Stops driving every task here; what is durable stays, and a later resume continues from it. Resolves once every
   * lease is given back: a host that closes the store next (the documented order) must not drop the releases, or
   * the next process's recover() finds each task busy until its lease expires.
   */
  async close(): Promise<void> {
    this.closed = true;
    for (const wake of [...this.wakers]) wake();
    for (const task of [...this.live.values()]) task.stop();
    this.live.clear();
    await Promise.allSettled([...this.retakes.values()]);
    // A stopped task gives its lease up on its own (after a quarantine, if its machine failed): wait for those too.
    await Promise.allSettled([...this.releasing.values()]);
    await this.leases.close();
    await this.tenantCap?.close();
  }

  /** A renewal found the task's lease lost: it stops here now, and if it was running, the lease is taken back. */
  private lostLease(taskId: string): void {
    const task = this.live.get(taskId);
    if (!task) return;
    task.fail(new FencedOutError(taskId, 'this process lost the lease'));
    if (task.summary?.state !== 'running' || this.closed) return;
    const retake = this.retake(task).finally(() => {
      if (this.retakes.get(taskId) === retake) this.retakes.delete(taskId);
    });
    this.retakes.set(taskId, retake);
  }

  /**
   * Takes a lost lease back, with backoff, while the store cannot answer; gives up when another process holds it,
   * when someone saved the task since (it is theirs, or recovery's), or after RETAKE_ATTEMPTS. Never throws.
   */
  private async retake(stopped: LiveTask): Promise<void> {
    for (let attempt = 0; attempt < RETAKE_ATTEMPTS && !this.closed; attempt++) {
      if (attempt > 0) await this.pause(Math.min(50 * 2 ** attempt, 1_000));
      try {
        await this.exclusive(stopped.taskId, () => this.retakeOnce(stopped));
        return;
      } catch (error) {
        // Only an unavailable store is worth another attempt. TaskBusyError: another process holds it and drives it.
        if (!(error instanceof StoreUnavailableError)) return;
      }
    }
  }

  private async retakeOnce(stopped: LiveTask): Promise<void> {
    const { taskId } = stopped;
    // Driven here again already (a host event, a resume), or closing: nothing to take back.
    if (this.closed || this.live.has(taskId)) return;
    await this.leases.take(taskId, false);
    try {
      // Under the new lease no save with an older fence can land any more: what is stored now stays until we save.
      const stored = this.closed ? null : await this.deps.store.load(taskId);
      // The revision this process saved last (a save still in flight when the lease was lost counts once it landed).
      const ours = stored !== null && stored.revision === stopped.summary?.revision;
      if (!ours || this.closed || !(await this.takeOver(taskId))) await this.releaseLease(taskId);
      else this.deps.onTakenBack?.(taskId);
    } catch (error) {
      await this.releaseLease(taskId);
      throw error;
    }
  }

  /** Waits `ms` of real time, or until `close`. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      timer.unref();
      this.wakers.add(wake);
    });
  }

  private attach(task: LiveTask): LiveTask {
    this.live.set(task.taskId, task);
    this.failures.delete(task.taskId);
    const { tracing } = this.deps;
    const run = (summary: TaskSummary) => ({
      'statechart_agent.task_id': summary.taskId,
      'statechart_agent.tenant_id': summary.tenantId,
      'statechart_agent.state': summary.state,
    });
    const traced = tracing !== NO_TRACING;
    task.onSaved((summary, saved) => {
      // Nothing is built for tracing on the hot path when nobody traces.
      if (traced) {
        if (summary.state === 'running') tracing.runStarted(task.taskId, run(summary));
        tracing.recorded(task.taskId, saved.audit);
        if (summary.state !== 'running')
          tracing.runEnded(task.taskId, { ...run(summary), 'statechart_agent.state_value': summary.stateValue });
      }
      this.deps.onSaved(summary, saved);
      // A tenant slot is held while the task runs: waiting or ended, it goes back.
      if (summary.state === 'running') this.tenantCap?.hold(summary.tenantId, task.taskId);
      else this.tenantCap?.release(task.taskId);
      if (summary.state !== 'running') void this.evictIfIdle(task);
    });
    // Stopped, fenced out, store failure or a machine that threw: this process no longer drives the task.
    task.onFailure((error) => {
      // The lease it ran under (a lease taken again afterwards is not this task's to give up).
      const lease = this.leases.holding(task.taskId);
      if (this.live.get(task.taskId) === task) this.live.delete(task.taskId);
      // Not driven here any more (unless a newer run of it is): its tenant slot goes back.
      if (!this.live.has(task.taskId)) this.tenantCap?.release(task.taskId);
      const stopped = error instanceof AgentError && error.code === 'task_stopped';
      // Fenced out: another process drives it, and what it stores is the answer. Anything else is news for settled().
      if (!stopped && !(error instanceof FencedOutError)) this.rememberFailure(task.taskId, error);
      tracing.runEnded(task.taskId, { 'statechart_agent.task_id': task.taskId }, stopped ? undefined : error.message);
      if (!stopped) this.deps.onTaskFailure?.(task.taskId, error);
      const quarantined =
        error instanceof MachineError
          ? this.deps.store.quarantine(task.taskId, error.message).catch(() => {})
          : Promise.resolve();
      const released = quarantined.then(() => this.releaseLease(task.taskId, lease)).catch(() => {});
      this.releasing.set(task.taskId, released);
      void released.then(() => {
        if (this.releasing.get(task.taskId) === released) this.releasing.delete(task.taskId);
      });
    });
    return task;
  }

  /**
   * Why this process stopped driving a task (a store that failed, a machine that threw), if it did recently
   * and has not driven it again since: `settled()` of such a task rejects with it instead of reporting what is stored.
   */
  failureOf(taskId: string): Error | undefined {
    return this.failures.get(taskId);
  }

  private rememberFailure(taskId: string, error: Error): void {
    if (this.failures.size >= RECENT_FAILURES) this.failures.delete(this.failures.keys().next().value!);
    this.failures.set(taskId, error);
  }

  /** A waiting or finished task holds no memory here: it is reloaded when an event arrives. */
  private evictIfIdle(task: LiveTask): Promise<void> {
    return this.exclusive(task.taskId, async () => this.releaseIfSettled(task));
  }

  /** The task presents the fence of the lease it was created under, for good: a lease taken later is another run's. */
  private liveDeps(taskId: string): LiveTaskDeps {
    const fence = this.leases.fence(taskId);
    // Every field a task reads (`LiveTaskDeps`) is one of these deps', by the same name: none is left behind.
    return { ...this.deps, fence: () => fence };
  }
}
