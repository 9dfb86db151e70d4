/**
 * The retention sweep, a sibling of the expiry sweep: on a timer, the store's `sweepRetention` erases finished
 * tasks past the store's retention period and removes tombstones past theirs (the periods are the store's options,
 * so every process sharing the store applies the same ones). Each pass sweeps until the store reports nothing more
 * is due, or `maxBatches` batches, so a large backlog is worked off over several passes instead of in one long one.
 * Finished tasks are never driven, so nothing here races with a running task.
 */
import type { Clock } from '../clock.js';
import type { RetentionReport } from '../store/erasure.js';
import type { TaskStore } from '../store/taskStore.js';
import { isErasable } from '../store/taskStore.js';

/** Default period of the retention sweep: retention periods are days, so hourly is plenty. */
export const DEFAULT_RETENTION_SWEEP_MS = 3_600_000;

export interface RetentionSweepOptions {
  /** Period of the sweep (default 1 h); 0 disables the timer (call `sweep()` yourself). */
  everyMs?: number;
  /** Tasks (and, apart, tombstones) per store call (default 1000). */
  batch?: number;
  /** Store calls per pass at most (default 10). */
  maxBatches?: number;
  /** What a failed pass threw; the next pass tries again. */
  onError?: (error: unknown) => void;
  /** The timer stops itself once this answers true (its owner was closed). */
  stopWhen?: () => boolean;
}

export class RetentionSweeper {
  private timer: ReturnType<typeof setInterval> | null = null;
  private running: Promise<RetentionReport> | null = null;
  private readonly batch: number;
  private readonly maxBatches: number;

  constructor(
    private readonly store: TaskStore,
    private readonly clock: Clock,
    options: RetentionSweepOptions = {},
  ) {
    this.batch = options.batch ?? 1000;
    this.maxBatches = options.maxBatches ?? 10;
    const everyMs = options.everyMs ?? DEFAULT_RETENTION_SWEEP_MS;
    if (everyMs > 0 && isErasable(store)) {
      this.timer = setInterval(() => {
        if (options.stopWhen?.()) return this.stop();
        void this.sweep().catch((error: unknown) => options.onError?.(error));
      }, everyMs);
      this.timer.unref();
    }
  }

  /** One pass at the clock's now; a pass already under way is joined, not doubled. */
  sweep(): Promise<RetentionReport> {
    this.running ??= this.pass().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private async pass(): Promise<RetentionReport> {
    const total: RetentionReport = { erased: [], tombstonesRemoved: 0, more: false };
    if (!isErasable(this.store)) return total;
    const now = this.clock.now();
    for (let n = 0; n < this.maxBatches; n++) {
      const report = await this.store.sweepRetention(now, { limit: this.batch });
      total.erased.push(...report.erased);
      total.tombstonesRemoved += report.tombstonesRemoved;
      total.more = report.more;
      if (!report.more) break;
    }
    return total;
  }
}
