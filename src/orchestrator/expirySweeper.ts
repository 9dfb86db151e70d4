/**
 * The expiry sweeper: confirmations whose deadline passed are expired from the store's index of deadlines, so a
 * confirmation also expires when no process held its task at the time. A `timer.confirmationExpired` event is the
 * only way expiry enters a task; the chart then asks again or gives up.
 */
import type { Clock } from '../clock.js';
import { AgentError } from '../errors.js';
import type { TaskStore } from '../store/taskStore.js';
import type { LiveTasks } from './liveTasks.js';

export class ExpirySweeper {
  private timer: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly store: TaskStore,
    private readonly live: LiveTasks,
    private readonly clock: Clock,
    everyMs: number,
  ) {
    if (everyMs > 0) {
      this.timer = setInterval(() => void this.expireDue().catch(() => {}), everyMs);
      this.timer.unref();
    }
  }

  /** Expires confirmations whose deadline passed (also while no process was running). Returns how many. */
  async expireDue(): Promise<number> {
    const now = this.clock.now();
    const due = await this.store.list({ states: ['waiting_for_confirmation'], dueBefore: now });
    let expired = 0;
    for (const summary of due) {
      try {
        await this.live.exclusive(summary.taskId, async () => {
          const task = await this.live.hydrate(summary.taskId);
          const pending = task.context().pendingConfirmation;
          if (!pending || pending.expiresAt > now) return;
          task.send({ type: 'timer.confirmationExpired', at: now, confirmationId: pending.id });
          await task.barrier();
          this.live.releaseIfSettled(task);
          expired += 1;
        });
      } catch (error) {
        // Busy elsewhere, quarantined, gone: the next sweep (or another process) deals with it.
        if (!(error instanceof AgentError)) throw error;
      }
    }
    return expired;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
