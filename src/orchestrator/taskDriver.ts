/**
 * The worker's side of dispatch: one job, one task driven until it waits or ends. The job's task is created (a
 * start) or restored under its lease, its inbox is applied in order, a due deadline delivered, and the job ends when
 * the task is at rest and its lease given up; then the inbox is read once more, because an event recorded while this
 * process held the task found the lease taken and left it to the holder. A lost lease taken back here, or an event
 * recorded meanwhile, drives it again in the same job.
 *
 * Several jobs of one task in one process: the first drives it, the others hand their event to it and end; the
 * driving job then reads the inbox again before it ends, so an event that came after its last read is not left
 * without a job.
 */
import {
  AgentError,
  CapacityError,
  FencedOutError,
  StoreUnavailableError,
  TaskBusyError,
  TaskExistsError,
  TaskNotFoundError,
  TaskQuarantinedError,
} from '../errors.js';
import type { Principal } from '../../machines/context.js';
import { HOST_EVENT_TYPES, type HostEvent } from '../../machines/events.js';
import type { Clock } from '../clock.js';
import type { LiveTask } from '../runtime/liveTask.js';
import type { TaskEnvelope } from '../store/envelope.js';
import type { InboxEntry, TaskInbox, TaskStore } from '../store/taskStore.js';
import { safeErrorText } from '../../machines/lib/text.js';
import type { Dispatch, DriveJob, DriveOutcome } from './dispatch.js';
import { dueEvent } from './expirySweeper.js';
import type { Logger } from './hooks.js';
import { checkedEvent, type HostEvents } from './hostEvents.js';
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
export class HandedBackError extends AgentError<'task_handed_back'> {
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
  /** Tasks driven here that another job (an event) came for since the driving job last read the inbox. */
  private readonly poked = new Set<string>();

  constructor(private readonly deps: TaskDriverDeps) {}

  /** Handles one job of the queue. */
  async handle(job: DriveJob): Promise<DriveOutcome> {
    const { taskId } = job;
    if (this.driving.has(taskId)) {
      // Another job of this process drives the task: it gets the event now, and reads the inbox once more at the end.
      this.poked.add(taskId);
      await this.poke(taskId);
      return 'done';
    }
    this.driving.add(taskId);
    try {
      return await this.drive(job);
    } finally {
      this.driving.delete(taskId);
      this.poked.delete(taskId);
    }
  }

  /** An event was recorded for a task this process may drive: applied now if it does (else its job will). */
  async poke(taskId: string): Promise<void> {
    const task = this.deps.live.get(taskId);
    if (task)
      await this.deliver(task).catch((error: unknown) =>
        this.deps.logger.warn({ taskId, err: safeErrorText(error) }, 'applying the inbox failed; the job applies it'),
      );
  }

  private async drive(job: DriveJob): Promise<DriveOutcome> {
    const { taskId } = job;
    if (job.kind === 'start') {
      try {
        await this.deps.create(job.input);
      } catch (error) {
        // Created by an earlier delivery of this job (its worker died, or its ack was lost): drive what is stored.
        if (error instanceof TaskExistsError) {
          // go on
        } else if (error instanceof TaskNotFoundError) {
          // Erased while queued (TaskErasedError): nothing to create, ever.
          return 'done';
        } else if (
          error instanceof CapacityError ||
          (error instanceof AgentError &&
            (error.code === 'orchestrator_draining' || error.code === 'orchestrator_closed'))
        ) {
          // No room here now: back to the queue, not counted as a failure.
          return 'later';
        } else {
          throw error;
        }
      }
    }
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const outcome = await this.round(job).catch(async (error: unknown) => {
        // Whatever failed, this job no longer drives the task: it must not stay in memory holding its lease.
        this.deps.live.get(taskId)?.stop();
        await this.deps.live.park(taskId);
        throw error;
      });
      if (outcome !== 'again') return outcome;
    }
    throw new HandedBackError(taskId, `it was driven ${MAX_ROUNDS} times in one job`);
  }

  /** One round: drive the task until it rests, give it up, and say whether something is left to do. */
  private async round(job: DriveJob): Promise<DriveOutcome | 'again'> {
    const { live, inbox } = this.deps;
    const { taskId } = job;
    this.poked.delete(taskId);
    let task = live.get(taskId);
    if (!task) {
      try {
        task = await live.exclusive(taskId, () => live.hydrate(taskId));
      } catch (error) {
        if (error instanceof TaskBusyError) return 'busy';
        // Erased, never created, or not restorable (quarantined, with the reason recorded): nothing to drive, and its
        // events can never be applied: the sweep of stranded events stops announcing them (they are kept).
        if (error instanceof TaskNotFoundError || error instanceof TaskQuarantinedError) {
          await inbox.forget(taskId).catch(() => {});
          return 'done';
        }
        throw error;
      }
    }
    await this.deliver(task);
    await task.settled().catch(() => {});
    // A lease lost to a stall is being taken back here: wait for it.
    await live.retaking(taskId);
    // At rest: dropped from memory and its lease given up. Still here after that: it runs here again (taken back).
    await live.park(taskId);
    if (live.get(taskId)) return 'again';
    const stored = await this.storedOrNull(taskId);
    if (!stored) {
      await inbox.forget(taskId).catch(() => {});
      return 'done';
    }
    if (stored.summary.wakeAt !== null) await this.scheduleWake(job, stored.summary.wakeAt);
    // Applied entries left behind (a trim that failed) go now, and the task leaves the index of unapplied inboxes.
    if (job.kind === 'event') await inbox.trim(taskId, stored.inbox?.applied ?? 0).catch(() => {});
    const pending = await inbox.after(taskId, stored.inbox?.applied ?? 0);
    // An event job of this process came after the read above could see its event: read again. Checked after the last
    // await of the round, right before the job ends, so a later one finds this job gone and drives the task itself.
    if (pending.length > 0 || this.poked.has(taskId)) return 'again';
    if (stored.summary.state !== 'running') return 'done';
    // Still running, and not here: another process took it (its lease fenced this one out), or it stopped here.
    const failure = task.failed;
    if (failure instanceof FencedOutError) return 'done';
    if (failure instanceof AgentError && failure.code === 'task_stopped')
      throw new HandedBackError(taskId, 'this process stopped driving it');
    if (failure instanceof StoreUnavailableError) throw failure;
    return 'done';
  }

  /**
   * Applies the inbox after the task's cursor, in order, each event saved before the next, and a due deadline at its
   * place in time: before an event recorded after it, after one recorded before it (a confirmation recorded in time
   * and applied late still counts).
   */
  private deliver(task: LiveTask): Promise<void> {
    const { live, inbox, clock } = this.deps;
    return live.exclusive(task.taskId, async () => {
      if (live.get(task.taskId) !== task) return;
      const entries = await inbox.after(task.taskId, task.inboxApplied());
      for (const entry of entries) {
        if (task.failed || entry.seq <= task.inboxApplied()) continue;
        const record = inboxRecord(entry);
        if (record) await this.deliverDue(task, record.event.at);
        const reply = record
          ? this.deps.events.apply(task, record.by, record.event)
          : {
              accepted: false,
              code: null,
              message: `inbox entry ${entry.seq} is not an event this build takes; it was skipped`,
            };
        if (!record)
          this.deps.logger.warn({ taskId: task.taskId, seq: entry.seq }, 'skipped an inbox entry that is not an event');
        task.recordInbox({ eventId: record?.eventId ?? `unreadable-${entry.seq}`, seq: entry.seq, ...reply });
        await task.barrier();
      }
      await this.deliverDue(task, clock.now());
      if (entries.length > 0 && !task.failed) await inbox.trim(task.taskId, task.inboxApplied()).catch(() => {});
    });
  }

  /** Sends the timer event due at `at`, if one is. */
  private async deliverDue(task: LiveTask, at: number): Promise<void> {
    if (task.failed) return;
    const due = dueEvent(task.context(), statusOfLive(task).state, at);
    if (!due) return;
    task.send(due);
    await task.barrier();
  }

  /** A deadline of a task at rest becomes a delayed job (one per task and time). */
  private async scheduleWake(job: DriveJob, at: number): Promise<void> {
    const now = this.deps.clock.now();
    const same = job.kind === 'wake' && job.at === at;
    if (same && at <= now) {
      // This wake delivered what was due, and the deadline did not move: another wake would do the same again.
      this.deps.logger.warn(
        { taskId: job.taskId, wakeAt: at },
        'a deadline stayed due after its timer event; the expiry sweep tries it again',
      );
      return;
    }
    // The job in hand is this very wake, come a little early: the next one needs an id of its own.
    await this.deps.dispatch.enqueue(
      { kind: 'wake', taskId: job.taskId, at },
      { delayMs: Math.max(0, at - now), ...(same ? { idSuffix: `.${now}` } : {}) },
    );
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

/**
 * The record of an inbox entry checked again here (the worker may run another build than the API, and the entry
 * came through Redis): a user's event, valid for its type, with a well-formed caller. Null for anything else.
 */
function inboxRecord(entry: InboxEntry): InboxRecord | null {
  const record = entry.data as Partial<InboxRecord> | null;
  if (!record || typeof record !== 'object' || typeof record.eventId !== 'string' || !record.by || !record.event)
    return null;
  // Time enters a task only through its deadlines, never through an inbox.
  const type = (record.event as { type?: unknown }).type;
  if (typeof type !== 'string' || type.startsWith('timer.') || !(HOST_EVENT_TYPES as readonly string[]).includes(type))
    return null;
  try {
    return { eventId: record.eventId, by: record.by, event: checkedEvent(record.by, record.event) };
  } catch {
    return null;
  }
}
