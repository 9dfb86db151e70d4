/**
 * An orchestrator with a dispatch (`dispatch.ts`): what its API calls do instead of driving tasks here (record a
 * start job, record user events in the inbox, enqueue wakes for resume, recovery and due deadlines), and the
 * workers it runs (`createWorker`), which drive tasks through the TaskDriver.
 */
import type { AgentInput } from '../../machines/context.js';
import { systemClock, type Clock } from '../clock.js';
import { HostRequestError } from '../errors.js';
import type { TaskInbox, TaskStore } from '../store/taskStore.js';
import type { Dispatch, DispatchWorker, DispatchWorkerOptions } from './dispatch.js';
import type { ExpirySweeper } from './expirySweeper.js';
import type { Logger } from './hooks.js';
import type { HostEvents } from './hostEvents.js';
import { InboxEvents, queued } from './inboxEvents.js';
import type { LiveTasks } from './liveTasks.js';
import type { RecoveryReport } from './recovery.js';
import type { TaskStatus } from './status.js';
import { claimMandate, releaseClaim } from './startTask.js';
import { TaskDriver } from './taskDriver.js';

export interface DispatchedDeps {
  dispatch: Dispatch;
  store: TaskStore;
  live: LiveTasks;
  events: HostEvents;
  /** The task clock (deadlines); waits use real time. */
  clock: Clock;
  logger: Logger;
  create: (input: AgentInput) => Promise<unknown>;
  /** Whether tasks may hold sealed values (`needed`), and whether every process can open them (`durable`). */
  sealing: { needed: boolean; durable: boolean };
}

export class Dispatched {
  private readonly inbox: TaskInbox;
  private readonly events: InboxEvents;
  private readonly driver: TaskDriver;
  private readonly workers = new Set<DispatchWorker>();
  private unsubscribe: (() => void) | null = null;

  constructor(private readonly deps: DispatchedDeps) {
    const { store, dispatch } = deps;
    if (!store.leases || !store.inbox) {
      throw new HostRequestError(
        'invalid_request',
        `dispatch needs a store with leases and inboxes (RedisStore); the ${store.kind} store has ${store.leases ? 'no inboxes' : 'no leases'}`,
      );
    }
    if (deps.sealing.needed && !deps.sealing.durable) {
      // The API process seals a goal or an answer; a worker must be able to open it for the tool that takes it.
      throw new HostRequestError(
        'invalid_request',
        'dispatch with sensitive data (redactors, or tools with sensitive fields) needs a durable sealer shared by every process: privacy: { sealer: keyedSealer({ key }) }; memorySealer keeps values in the process that sealed them',
      );
    }
    this.inbox = store.inbox;
    this.events = new InboxEvents({
      store,
      inbox: this.inbox,
      events: deps.events,
      dispatch,
      clock: systemClock,
      ...dispatch.waits,
    });
    deps.events.inbox = this.events;
    this.driver = new TaskDriver({
      live: deps.live,
      store,
      inbox: this.inbox,
      events: deps.events,
      dispatch,
      clock: deps.clock,
      logger: deps.logger,
      create: deps.create,
    });
  }

  /**
   * Records the start job; the status is the task's first, at revision 0, until a worker has created it. The id is
   * reserved in the store first (atomically: of two starts of one id, one gets TaskExistsError), and given back if
   * the job could not be recorded.
   */
  async start(input: AgentInput): Promise<TaskStatus> {
    const { dispatch, store } = this.deps;
    await dispatch.assertRoom();
    // Claimed here, so that a second start with the mandate is refused now, before anything is queued.
    const claim = await claimMandate(store, input);
    try {
      await this.inbox.reserve(input.taskId);
    } catch (error) {
      await releaseClaim(store, input, claim);
      throw error;
    }
    // The tenant's cap (capacity.tenantCap) is checked here, after the id (a retried start is told the task exists):
    // the slot is taken for the worker that will create the task, so a caller at the cap is refused now, not queued.
    let giveBack = async () => {};
    try {
      giveBack = (await this.deps.live.tenantCap?.reserve(input.principal.tenantId, input.taskId)) ?? giveBack;
    } catch (error) {
      await this.inbox.reserve(input.taskId, true).catch(() => {});
      await releaseClaim(store, input, claim);
      throw error;
    }
    try {
      await dispatch.enqueue({ kind: 'start', taskId: input.taskId, input });
    } catch (error) {
      // Given back only if the job is not there: a reply lost after the job was written must not free the id.
      const queued = await dispatch
        .pendingStart(input.taskId)
        .catch(() => dispatch.pendingStart(input.taskId))
        .catch(() => undefined);
      if (queued === null) {
        await this.inbox.reserve(input.taskId, true).catch(() => {});
        await releaseClaim(store, input, claim);
        await giveBack();
      }
      throw error;
    }
    return queued(input).status;
  }

  /** Before an erasure: the task's start job goes (with the input it holds), unless a worker is creating the task. */
  forgetStart(taskId: string): Promise<boolean> {
    return this.deps.dispatch.forgetStart(taskId);
  }

  /** Whether the task's start job is queued or being created by a worker. */
  async isQueued(taskId: string): Promise<boolean> {
    return (await this.deps.dispatch.pendingStart(taskId)) !== null;
  }

  /** Tasks of `owner` whose start is queued (not yet created), for `eraseUser`. */
  queuedOf(owner: { tenantId: string; userId: string }): Promise<string[]> {
    return this.deps.dispatch.pendingStarts(owner);
  }

  /**
   * Events recorded more than a reply's wait ago and not yet applied get their job again (deduplicated if it is
   * still queued): the job of an event can be lost (its enqueue failed after the event was recorded; it was tried
   * for as long as another process held the task, and that process died). Returns how many were announced.
   */
  async announceStranded(limit = 1_000): Promise<number> {
    const ids = await this.inbox.pending(systemClock.now() - this.deps.dispatch.waits.replyTimeoutMs, limit);
    let announced = 0;
    for (const taskId of ids) {
      const last = (await this.inbox.after(taskId, 0)).at(-1);
      if (!last) continue;
      await this.deps.dispatch.enqueue({ kind: 'event', taskId, seq: last.seq });
      announced += 1;
    }
    return announced;
  }

  current(taskId: string) {
    return this.events.current(taskId);
  }

  settled(taskId: string, timeoutMs: number): Promise<TaskStatus> {
    return this.events.settled(taskId, timeoutMs);
  }

  /** A wake job for the task: it is driven by a worker if it has anything to do. */
  async resume(taskId: string): Promise<TaskStatus> {
    const { status } = await this.current(taskId);
    if (status.revision > 0) await this.wake(taskId, status.updatedAt);
    return status;
  }

  /** A due deadline, or a task found running with nobody driving it: a wake job (one per task and time). */
  readonly wake = async (taskId: string, at: number): Promise<void> => {
    await this.deps.dispatch.enqueue(
      { kind: 'wake', taskId, at },
      { delayMs: Math.max(0, at - this.deps.clock.now()) },
    );
  };

  /**
   * The bounded sweep: running tasks (at most `limit`) get a wake job, which is dropped when another job's task
   * already holds it (the queue's dedupe, then the lease); due deadlines get theirs.
   */
  async recover(sweeper: ExpirySweeper, limit = 1_000): Promise<RecoveryReport> {
    // The workers judge each task's catalog when they take its job.
    const report: RecoveryReport = { resumed: [], busy: [], quarantined: [], catalogMismatch: [], expired: 0 };
    for (const summary of await this.deps.store.list({ states: ['running'], limit })) {
      if (this.deps.live.has(summary.taskId)) continue;
      await this.deps.dispatch.enqueue({ kind: 'wake', taskId: summary.taskId, at: summary.updatedAt });
      report.resumed.push(summary.taskId);
    }
    report.expired = await sweeper.expireDue();
    // Start jobs that failed for good (the store was down for all their tries) are queued again.
    await this.deps.dispatch.retryFailedStarts(limit);
    return report;
  }

  createWorker(options: DispatchWorkerOptions): DispatchWorker {
    const { dispatch } = this.deps;
    // Events recorded anywhere for a task driven here reach it at once (its job would otherwise wait for the lease).
    this.unsubscribe ??= dispatch.onEvent((taskId) => void this.driver.poke(taskId));
    const worker = dispatch.work((job) => this.driver.handle(job), options);
    const handle: DispatchWorker = {
      close: async (closeOptions) => {
        this.workers.delete(handle);
        await worker.close(closeOptions);
        if (this.workers.size === 0) this.stopListening();
      },
      pause: () => worker.pause(),
    };
    this.workers.add(handle);
    return handle;
  }

  /** Stops every worker from taking new jobs (draining); the jobs in hand go on. */
  async pause(): Promise<void> {
    await Promise.all([...this.workers].map((worker) => worker.pause()));
  }

  /** Closes every worker: resolves once the jobs in hand ended (their tasks are stopped by the orchestrator's close). */
  async stopTaking(): Promise<void> {
    await Promise.all([...this.workers].map((worker) => worker.close()));
    this.stopListening();
  }

  private stopListening(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
  }
}
