/**
 * Erasure at the orchestrator: the careful counterpart of the store's unconditional `erase`. It never erases a
 * task while something drives it: a task running in this process is refused (TaskRunningError) unless the host
 * asks to cancel it first, and a task whose lease another process holds is refused (TaskBusyError). In between it
 * holds the task's exclusive section here and its lease, so no event, timer or recovery in any process can move
 * the task while it is erased. After the erasure the store answers every read and write of the id with
 * TaskErasedError, so `status`, `audit`, `resume`, the user events and `start` with that id all say so.
 *
 * With `cancelRunning`, the task gets a `task.cancelled` event (the host's decision, not a user's: no authorization
 * check), and is erased once that is durable and the task has settled: a write in flight is reconciled first, so
 * the erasure never cuts a side effect off from its record while it can still be learned.
 */
import type { Clock } from '../clock.js';
import { AgentError, FencedOutError, TaskBusyError, TaskErasedError, TaskRunningError } from '../errors.js';
import { type EraseRequest, type TaskOwner, type Tombstone, checkEraseRequest, checkOwner } from '../store/erasure.js';
import { type ErasableTaskStore, type TaskStore, isErasable } from '../store/taskStore.js';
import type { LiveTasks } from './liveTasks.js';

/** A host's request to erase a task (or a user's tasks) through the orchestrator. */
export interface EraseTaskRequest {
  /** Why, as a short code ("gdpr_erasure"): kept in the tombstone, so no personal data. */
  reason: string;
  /** Who asked: the host's id of the operator or of the erasure request. */
  by?: string;
  /** When (default: the orchestrator's clock). */
  at?: number;
  /**
   * Cancel a task running in this process first (a write in flight is reconciled), then erase it. Default false:
   * TaskRunningError. A task driven by another process is refused either way (TaskBusyError).
   */
  cancelRunning?: boolean;
}

/** What the orchestrator's `eraseUser` did. */
export interface UserErasureReport {
  /** One tombstone per task erased by this call. */
  erased: Tombstone[];
  /** Tasks left in place: running here (without `cancelRunning`), or driven by another process. Retry them. */
  skipped: { taskId: string; code: string; message: string }[];
}

/** How often `eraseUser` lists the user's tasks again: tasks started while it erases are erased too. */
const USER_PASSES = 3;

export class TaskEraser {
  constructor(
    private readonly store: TaskStore,
    private readonly live: LiveTasks,
    private readonly clock: Clock,
    /** With a dispatch: whether the task's start is queued (it counts as existing while a worker creates it). */
    private readonly queued?: (taskId: string) => Promise<boolean>,
  ) {}

  async erase(taskId: string, options: EraseTaskRequest): Promise<Tombstone> {
    const store = this.erasable();
    const request = this.request(`erase of task ${taskId}`, options);
    return this.live.exclusive(taskId, async () => {
      const task = this.live.get(taskId);
      if (task && !task.isSettled()) {
        if (!options.cancelRunning) throw new TaskRunningError(taskId);
        task.send({
          type: 'task.cancelled',
          at: request.at,
          reason: `erasure: ${request.reason}`,
          by: request.by ?? 'erasure',
        });
        await task.settled().catch((error: unknown) => {
          // Another process took the task over while the cancel was being saved: it drives the task now, as above.
          if (error instanceof FencedOutError) throw new TaskBusyError(taskId);
          throw error;
        });
      }
      const earlier = await store.tombstone(taskId);
      if (earlier) return earlier;
      // Held here already when the task is live here; otherwise another process may drive it.
      try {
        await this.live.leases.take(taskId, false);
      } catch (error) {
        if (error instanceof TaskErasedError) return (await store.tombstone(taskId)) ?? Promise.reject(error);
        const queued = this.queued;
        if (error instanceof TaskBusyError)
          return this.live.refuseBusy(taskId, error, queued && (() => queued(taskId)));
        throw error;
      }
      try {
        return await store.erase(taskId, request);
      } finally {
        // Nothing of the task may stay in memory here: a status read must not answer from it.
        task?.stop();
        await this.live.releaseLease(taskId);
      }
    });
  }

  async eraseUser(owner: TaskOwner, options: EraseTaskRequest): Promise<UserErasureReport> {
    const store = this.erasable();
    const user = checkOwner(owner);
    const request = this.request('eraseUser', options);
    const report: UserErasureReport = { erased: [], skipped: [] };
    const skipped = new Set<string>();
    for (let pass = 0; pass < USER_PASSES; pass++) {
      const ids = (await store.list({ owner: user })).map((s) => s.taskId).filter((id) => !skipped.has(id));
      if (ids.length === 0) break;
      for (const taskId of ids) {
        try {
          report.erased.push(await this.erase(taskId, { ...options, at: request.at }));
        } catch (error) {
          // Driven by someone else, or lost to another process while being cancelled: left for a retry.
          if (!(error instanceof TaskRunningError || error instanceof TaskBusyError || error instanceof FencedOutError))
            throw error;
          skipped.add(taskId);
          report.skipped.push({ taskId, code: error.code, message: error.message });
        }
      }
    }
    return report;
  }

  private erasable(): ErasableTaskStore {
    if (!isErasable(this.store)) {
      throw new AgentError(
        'erasure_unsupported',
        `the ${this.store.kind} store cannot erase tasks (it has no erase, eraseUser, tombstone and sweepRetention)`,
      );
    }
    return this.store;
  }

  private request(what: string, options: EraseTaskRequest): EraseRequest {
    const { reason, by, at = this.clock.now() } = options;
    return checkEraseRequest(what, { reason, at, ...(by !== undefined ? { by } : {}) });
  }
}
