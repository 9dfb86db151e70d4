/**
 * The orchestrator's erasure and retention (its `erase`, `eraseUser`, `tombstone`, `sweepRetention` and
 * `startRetentionSweep`): erasures through `TaskEraser` (never while something drives the task), queued tasks of a
 * dispatch included, and what a memory sealer kept of the erased tasks dropped with them.
 */
import type { Clock } from '../clock.js';
import { FencedOutError, TaskBusyError, TaskRunningError } from '../errors.js';
import type { Privacy } from '../privacy/privacy.js';
import type { RetentionReport, TaskOwner, Tombstone } from '../store/erasure.js';
import { type TaskStore, isErasable } from '../store/taskStore.js';
import type { Dispatched } from './dispatched.js';
import { type EraseTaskRequest, TaskEraser, type UserErasureReport } from './erasure.js';
import type { LiveTasks } from './liveTasks.js';
import { RetentionSweeper, type RetentionSweepOptions } from './retentionSweeper.js';

export interface RecordsDeps {
  store: TaskStore;
  live: LiveTasks;
  clock: Clock;
  privacy: Privacy;
  dispatched: Dispatched | null;
  isClosed: () => boolean;
}

export class Records {
  /** The periodic retention sweep, once started. */
  private sweeper: RetentionSweeper | null = null;

  constructor(private readonly deps: RecordsDeps) {}

  async erase(taskId: string, request: EraseTaskRequest): Promise<Tombstone> {
    // A task whose start is queued: its job (holding its input) goes first; its reservation leaves the tombstone.
    await this.deps.dispatched?.forgetStart(taskId);
    const tombstone = await this.eraser().erase(taskId, request);
    this.forgetSealed([tombstone]);
    return tombstone;
  }

  async eraseUser(owner: TaskOwner, request: EraseTaskRequest): Promise<UserErasureReport> {
    // Tasks whose start is still queued are in no owner index yet: found by their jobs. Those a worker has created
    // meanwhile are left to the pass over the owner index below, which skips (and reports) what is driven.
    const queued: Tombstone[] = [];
    const skipped: UserErasureReport['skipped'] = [];
    for (const taskId of (await this.deps.dispatched?.queuedOf(owner)) ?? []) {
      if (await this.deps.store.load(taskId).catch(() => null)) continue;
      try {
        queued.push(await this.erase(taskId, request));
      } catch (error) {
        // A worker creating it right now holds its lease: retry later, as for any task driven elsewhere.
        if (!(error instanceof TaskBusyError || error instanceof TaskRunningError || error instanceof FencedOutError))
          throw error;
        skipped.push({ taskId, code: error.code, message: error.message });
      }
    }
    const report = await this.eraser().eraseUser(owner, request);
    this.forgetSealed(report.erased);
    return {
      erased: [...queued, ...report.erased],
      skipped: [...skipped, ...report.skipped.filter((s) => !skipped.some((q) => q.taskId === s.taskId))],
    };
  }

  async tombstone(taskId: string): Promise<Tombstone | null> {
    return isErasable(this.deps.store) ? this.deps.store.tombstone(taskId) : null;
  }

  async sweepRetention(): Promise<RetentionReport> {
    const report = await (
      this.sweeper ?? new RetentionSweeper(this.deps.store, this.deps.clock, { everyMs: 0 })
    ).sweep();
    this.forgetSealed(report.erased);
    return report;
  }

  startRetentionSweep(options: RetentionSweepOptions = {}): () => void {
    this.sweeper?.stop();
    const sweeper = new RetentionSweeper(this.deps.store, this.deps.clock, {
      ...options,
      stopWhen: this.deps.isClosed,
    });
    this.sweeper = sweeper;
    return () => {
      sweeper.stop();
      if (this.sweeper === sweeper) this.sweeper = null;
    };
  }

  stop(): void {
    this.sweeper?.stop();
  }

  private eraser(): TaskEraser {
    const { dispatched } = this.deps;
    return new TaskEraser(
      this.deps.store,
      this.deps.live,
      this.deps.clock,
      dispatched ? (taskId) => dispatched.isQueued(taskId) : undefined,
    );
  }

  /** Sealed values this process keeps for erased tasks go with them (a memory sealer's). */
  private forgetSealed(erased: readonly Tombstone[]): void {
    for (const tombstone of erased) this.deps.privacy.sealer.forget?.(tombstone.taskId);
  }
}
