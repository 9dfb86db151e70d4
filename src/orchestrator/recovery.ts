/**
 * Recovery: tasks left running by a process that died are resumed here when their lease is free (or expired); a
 * write that was in flight is reconciled by its idempotency key, never re-run blindly. A task that settled between
 * the list and its lease is not kept: nothing would ever release it.
 */
import {
  CatalogMismatchError,
  HostRequestError,
  TaskBusyError,
  TaskNotFoundError,
  TaskQuarantinedError,
} from '../errors.js';
import type { TaskStore } from '../store/taskStore.js';
import type { RecoveryReport } from './recoveryReport.js';
import type { ExpirySweeper } from './expirySweeper.js';
import type { LiveTasks } from './liveTasks.js';

export type { RecoveryReport } from './recoveryReport.js';

/** How many take-overs run at once by default: each waits on the store (lease, then load), not on this process. */
export const RECOVERY_CONCURRENCY = 32;

/** Orphans one sweep takes over at most; the next sweep takes the rest. */
const ORPHAN_SWEEP_LIMIT = 10_000;

/**
 * Takes over the running tasks no live process drives, `concurrency` at a time (default 32): on a store one network
 * round trip away, one after another would pay every task's round trips in sequence. The report lists each task
 * once; its order is not the store's.
 */
export async function recover(
  store: TaskStore,
  live: LiveTasks,
  sweeper: ExpirySweeper,
  concurrency = RECOVERY_CONCURRENCY,
): Promise<RecoveryReport> {
  const report = await takeOverOrphans(store, live, concurrency);
  report.expired = await sweeper.expireDue();
  return report;
}

/** The take-overs of `recover()` without the expiry of due confirmations (the orphan sweep's part). */
export async function takeOverOrphans(
  store: TaskStore,
  live: LiveTasks,
  concurrency = RECOVERY_CONCURRENCY,
  options: { onlyOrphans?: boolean } = {},
): Promise<RecoveryReport> {
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new HostRequestError(
      'invalid_request',
      `recover: concurrency must be a whole number of 1 or more, not ${concurrency}`,
    );
  const report: RecoveryReport = { resumed: [], busy: [], quarantined: [], catalogMismatch: [], expired: 0 };
  // The sweep looks only at tasks nobody holds, where the store can tell (one listing, no lease tried per task);
  // recover() tries every running task, and reports those another process holds as busy.
  const running =
    options.onlyOrphans && store.leases?.orphans
      ? await store.leases.orphans(ORPHAN_SWEEP_LIMIT)
      : (await store.list({ states: ['running'] })).map((summary) => summary.taskId);
  let next = 0;
  // The first failure (the store went away) stops new take-overs; those under way finish, then it is thrown.
  let failed: { error: unknown } | null = null;
  const worker = async () => {
    while (!failed && next < running.length) {
      await recoverOne(running[next++]!, live, report).catch((error: unknown) => (failed ??= { error }));
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, running.length) }, worker));
  if (failed) throw (failed as { error: unknown }).error;
  return report;
}

async function recoverOne(taskId: string, live: LiveTasks, report: RecoveryReport): Promise<void> {
  if (live.has(taskId)) return;
  try {
    // Finished or came to rest between the list and the lease: it is dropped again, and its lease released.
    if (await live.exclusive(taskId, () => live.takeOver(taskId))) report.resumed.push(taskId);
  } catch (error) {
    if (error instanceof TaskBusyError) report.busy.push(taskId);
    else if (error instanceof TaskQuarantinedError) report.quarantined.push({ taskId, reason: error.reason });
    else if (error instanceof CatalogMismatchError) report.catalogMismatch.push({ taskId, reason: error.message });
    // Erased (or gone) between the list and the load: nothing left to recover.
    else if (!(error instanceof TaskNotFoundError)) throw error;
  }
}
