/**
 * Recovery: tasks left running by a process that died are resumed here when their lease is free (or expired); a
 * write that was in flight is reconciled by its idempotency key, never re-run blindly. A task that settled between
 * the list and its lease is not kept: nothing would ever release it.
 */
import { CatalogMismatchError, TaskBusyError, TaskNotFoundError, TaskQuarantinedError } from '../errors.js';
import type { TaskStore } from '../store/taskStore.js';
import type { ExpirySweeper } from './expirySweeper.js';
import type { LiveTasks } from './liveTasks.js';

export interface RecoveryReport {
  /** Running tasks this process took over (their lease had expired or was free; still running when loaded). */
  resumed: string[];
  /** Running tasks another live process drives. */
  busy: string[];
  /** Tasks that cannot be restored, with the reason now recorded on them. */
  quarantined: { taskId: string; reason: string }[];
  /**
   * Running tasks left alone because this process does not have the tools they were started with (as they were):
   * a process that has them recovers them. Nothing is recorded on them.
   */
  catalogMismatch: { taskId: string; reason: string }[];
  /** Confirmations that had expired while no process was running. */
  expired: number;
}

export async function recover(store: TaskStore, live: LiveTasks, sweeper: ExpirySweeper): Promise<RecoveryReport> {
  const report: RecoveryReport = { resumed: [], busy: [], quarantined: [], catalogMismatch: [], expired: 0 };
  for (const summary of await store.list({ states: ['running'] })) {
    if (live.has(summary.taskId)) continue;
    try {
      // Finished or came to rest between the list and the lease: it is dropped again, and its lease released.
      if (await live.exclusive(summary.taskId, () => live.takeOver(summary.taskId)))
        report.resumed.push(summary.taskId);
    } catch (error) {
      if (error instanceof TaskBusyError) report.busy.push(summary.taskId);
      else if (error instanceof TaskQuarantinedError)
        report.quarantined.push({ taskId: summary.taskId, reason: error.reason });
      else if (error instanceof CatalogMismatchError)
        report.catalogMismatch.push({ taskId: summary.taskId, reason: error.message });
      // Erased (or gone) between the list and the load: nothing left to recover.
      else if (error instanceof TaskNotFoundError) continue;
      else throw error;
    }
  }
  report.expired = await sweeper.expireDue();
  return report;
}
