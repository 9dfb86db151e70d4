/**
 * The worker's side of dispatch: one job, one task driven until it waits or ends. The job's task is created (a
 * start) or restored under its lease, its inbox is applied in order, a due deadline delivered, and the job ends when
 * the task is at rest and its lease given up; then the inbox is read once more, because an event recorded while this
 * process held the task found the lease taken and left it to the holder. A lost lease taken back here, or an event
 * recorded meanwhile, drives it again in the same job.
 *
 * Several jobs of one task in one process: the first drives it, the others hand their event to it and end.
 */
import { AgentError, FencedOutError, StoreUnavailableError, TaskBusyError, TaskExistsError, TaskNotFoundError, TaskQuarantinedError } from '../errors.js';
import type { Principal } from '../../machines/context.js';
import type { HostEvent } from '../../machines/events.js';
import type { Clock } from '../clock.js';
import type { LiveTask } from '../runtime/liveTask.js';
import type { TaskEnvelope } from '../store/envelope.js';
import type { TaskInbox, TaskStore } from '../store/taskStore.js';
import { safeErrorText } from '../../machines/lib/text.js';
import type { Dispatch, DriveJob, DriveOutcome } from './dispatch.js';
import { dueEvent } from './expirySweeper.js';
import type { Logger } from './hooks.js';
import type { HostEvents } from './hostEvents.js';
import type { LiveTasks } from './liveTasks.js';
import { statusOfLive } from './status.js';

/** What one inbox entry holds: the event (sealed, with the caller's session), who sent it, and its id for the reply. */
export interface InboxRecord {
  eventId: string;
  by: Principal;
  event: HostEvent;
}

/** How often one job drives its task again (taken back, events that came while it was held) before it gives up. */
const MAX_ROUNDS = 50;

/** The job could not finish here (the process stops, the store failed): the queue tries it again, elsewhere too. */
export class HandedBackError extends AgentError {
  constructor(taskId: string, why: string) {
    super('task_handed_back', `task ${JSON.stringify(taskId)} goes back to the queue: ${why}`);
  }
}

export interface TaskDriverDeps {
  live: LiveTasks;
  store: TaskStore;
  inbox: TaskInbox;
  events: HostEvents;
  dispatch: Dispatch;
  clock: Clock;
  logger: Logger;
  /** Creates and starts the task of a start job (the orchestrator's createTask, with its capacity). */
  create: (input: Extract<DriveJob, { kind: 'start' }>['input']) => Promise<unknown>;
}

export class TaskDriver {
  /** Tasks a job of this process drives right now. */
  private readonly driving = new Set<string>();

  constructor(private readonly deps: TaskDriverDeps) {}

  /** Handles one job of the queue. */
  async handle(job: DriveJob): Promise<DriveOutcome> {
    const { taskId } = job;
    if (this.driving.has(taskId)) {
      // Another job of this process drives the task: it gets the event now, and it reads the inbox once more at the end.
      await this.poke(taskId);
      return 'done';
    }
    this.driving.add(taskId);
    try {
      return await this.drive(job);
    } finally {
      this.driving.delete(taskId);
    }
  }

  /** An event was recorded for a task this process may drive: applied now if it does (else its job will). */
  async poke(taskId: string): Promise<void> {
    const task = this.deps.live.get(taskId);
    if (task) await this.deliver(task).catch((error: unknown) => this.deps.logger.warn({ taskId, err: safeErrorText(error) }, 'applying the inbox failed; the job applies it'));
  }

  private async drive(job: DriveJob): Promise<DriveOutcome> {
    const { live, inbox } = this.deps;
    const { taskId } = job;
    if (job.kind === 'start') {
      try {
        await this.deps.create(job.input);
      } catch (error) {
        // Created by an earlier delivery of this job (its worker died, or its ack was lost): drive what is stored.
        if (!(error instanceof TaskExistsError)) throw error;
      }
    }
    for (let round = 0; round < MAX_ROUNDS; round++) {
      let task = live.get(taskId);
      if (!task) {
        try {
          task = await live.exclusive(taskId, () => live.hydrate(taskId));
        } catch (error) {
          if (error instanceof TaskBusyError) return 'busy';
          // Erased, never created, or not restorable (quarantined, with the reason recorded): nothing to drive.
          if (error instanceof TaskNotFoundError || error instanceof TaskQuarantinedError) return 'done';
          throw error;
        }
      }
      await this.deliver(task);
      await task.settled().catch(() => {});
      // A lease lost to a stall is being taken back here: wait for it.
      await live.retaking(taskId);
      // At rest: dropped from memory and its lease given up. Still here after that: it runs here again (taken back).
      await live.park(taskId);
      if (live.get(taskId)) continue;
      const stored = await this.storedOrNull(taskId);
      if (!stored) return 'done';
      if (stored.summary.wakeAt !== null) await this.scheduleWake(job, stored.summary.wakeAt);
      const pending = await inbox.after(taskId, stored.inbox?.applied ?? 0);
      if (pending.length > 0) continue;
      if (stored.summary.state !== 'running') return 'done';
      // Still running, and not here: another process took it (its lease fenced this one out), or it stopped here.
      const failure = task.failed;
      if (failure instanceof FencedOutError) return 'done';
      if (failure instanceof AgentError && failure.code === 'task_stopped') throw new HandedBackError(taskId, 'this process stopped driving it');
      if (failure instanceof StoreUnavailableError) throw failure;
      if (failure) return 'done';
    }
    throw new HandedBackError(taskId, `it was driven ${MAX_ROUNDS} times in one job`);
  }

  /** Applies the due deadline, if any, and the inbox after the task's cursor, each event saved before the next. */
  private deliver(task: LiveTask): Promise<void> {
    const { live, inbox, events, clock } = this.deps;
    return live.exclusive(task.taskId, async () => {
      if (live.get(task.taskId) !== task) return;
      const due = dueEvent(task.context(), statusOfLive(task).state, clock.now());
      if (due) {
        task.send(due);
        await task.barrier();
      }
      const entries = await inbox.after(task.taskId, task.inboxApplied());
      for (const entry of entries) {
        if (task.failed || entry.seq <= task.inboxApplied()) continue;
        const record = entry.data as Partial<InboxRecord> | null;
        const reply =
          record && typeof record.eventId === 'string' && record.by && record.event
            ? events.apply(task, record.by, record.event)
            : { accepted: false, code: null, message: `inbox entry ${entry.seq} is not an event; it was skipped` };
        task.recordInbox({ eventId: record?.eventId ?? `unknown-${entry.seq}`, seq: entry.seq, ...reply });
        await task.barrier();
      }
      if (entries.length > 0) await inbox.trim(task.taskId, task.inboxApplied()).catch(() => {});
    });
  }

  /** A deadline of a task at rest becomes a delayed job (one per task and time). */
  private async scheduleWake(job: DriveJob, at: number): Promise<void> {
    const now = this.deps.clock.now();
    // The job in hand is this very wake, come a little early: the next one needs an id of its own.
    const again = job.kind === 'wake' && job.at === at;
    await this.deps.dispatch.enqueue({ kind: 'wake', taskId: job.taskId, at }, { delayMs: Math.max(0, at - now), ...(again ? { idSuffix: `.${now}` } : {}) });
  }

  private async storedOrNull(taskId: string): Promise<TaskEnvelope | null> {
    try {
      return await this.deps.store.load(taskId);
    } catch (error) {
      if (error instanceof TaskNotFoundError) return null;
      throw error;
    }
  }
}
