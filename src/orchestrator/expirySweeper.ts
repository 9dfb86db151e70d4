/**
 * The timer sweep: whatever is due (a confirmation or a question that expired, a model retry whose wake-up time came)
 * is delivered from the store's index of deadlines, so it also happens when no process held the task at the time.
 * A `timer.*` event is the only way time enters a task; the chart decides what it does.
 */
import type { AgentContext } from '../../machines/context.js';
import type { HostEvent } from '../../machines/events.js';
import type { Clock } from '../clock.js';
import { AgentError } from '../errors.js';
import type { TaskStore } from '../store/taskStore.js';
import { safeErrorText } from '../../machines/lib/text.js';
import { type Logger, SILENT_LOGGER } from './hooks.js';
import type { LiveTasks } from './liveTasks.js';
import { statusOfLive } from './status.js';

/** The timer event due for a task at `now`, or null when nothing is. */
export function dueEvent(context: AgentContext, state: string, now: number): HostEvent | null {
  const pending = context.pendingConfirmation;
  if (state === 'waiting_for_confirmation' && pending && pending.expiresAt <= now) {
    return { type: 'timer.confirmationExpired', at: now, confirmationId: pending.id };
  }
  if (state === 'waiting_for_user' && context.questionExpiresAt !== null && context.questionExpiresAt <= now) {
    return { type: 'timer.answerExpired', at: now };
  }
  if (state === 'waiting_for_model' && context.outage && context.outage.wakeAt <= now)
    return { type: 'timer.modelRetryDue', at: now };
  if (state === 'paused' && context.away && context.away.expiresAt <= now)
    return { type: 'timer.awayExpired', at: now };
  return null;
}

export class ExpirySweeper {
  private timer: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly store: TaskStore,
    private readonly live: LiveTasks,
    private readonly clock: Clock,
    everyMs: number,
    logger: Logger = SILENT_LOGGER,
    /**
     * With a dispatch: a due task is handed to the queue (a wake job) instead of being driven here, and `also` runs
     * with each sweep (the re-announcement of events whose job was lost).
     */
    private readonly dispatched?: { wake: (taskId: string, at: number) => Promise<void>; also: () => Promise<unknown> },
  ) {
    if (everyMs > 0) {
      // The next sweep tries again; the host hears why this one failed.
      this.timer = setInterval(
        () =>
          void this.expireDue().catch((error: unknown) =>
            logger.warn({ err: safeErrorText(error) }, 'the expiry sweep failed'),
          ),
        everyMs,
      );
      this.timer.unref();
    }
  }

  /** Delivers every timer event due now (also for tasks whose deadline passed while no process ran). */
  async expireDue(): Promise<number> {
    const now = this.clock.now();
    const due = await this.store.list({ dueBefore: now });
    let delivered = 0;
    for (const summary of due) {
      if (this.dispatched) {
        await this.dispatched.wake(summary.taskId, summary.wakeAt ?? now);
        delivered += 1;
        continue;
      }
      try {
        await this.live.exclusive(summary.taskId, async () => {
          const task = await this.live.hydrate(summary.taskId);
          const event = dueEvent(task.context(), statusOfLive(task).state, now);
          if (event) {
            task.send(event);
            await task.barrier();
            delivered += 1;
          }
          this.live.releaseIfSettled(task);
        });
      } catch (error) {
        // Busy elsewhere, quarantined, gone: the next sweep (or another process) deals with it.
        if (!(error instanceof AgentError)) throw error;
      }
    }
    await this.dispatched?.also();
    return delivered;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
