/**
 * The orphan sweep: on a store with leases, each process looks for running tasks whose process died (their lease
 * expired) and takes them over, by itself, every `everyMs` or so (jittered, so a fleet's processes do not all look at
 * once; one sweep at a time). A task whose process died is resumed within about one lease TTL plus one interval, with
 * no host code calling `recover()`. A take-over is decided by the lease, so several processes sweeping at once
 * resume each task once.
 */
import { safeErrorText } from '../../machines/lib/text.js';
import type { Logger } from './hooks.js';
import type { RecoveryReport } from './recovery.js';

export class OrphanSweeper {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;

  constructor(
    private readonly sweep: () => Promise<RecoveryReport>,
    private readonly everyMs: number,
    private readonly random: () => number,
    private readonly logger: Logger,
    /** Told of each sweep that took something over or quarantined something. */
    private readonly onReport?: (report: RecoveryReport) => void,
  ) {
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped) return;
    // 0.8x to 1.2x the interval.
    const delay = Math.round(this.everyMs * (0.8 + 0.4 * this.random()));
    this.timer = setTimeout(() => void this.once(), delay);
    this.timer.unref();
  }

  private async once(): Promise<void> {
    try {
      const report = await this.sweep();
      if (report.resumed.length > 0 || report.quarantined.length > 0) this.onReport?.(report);
    } catch (error) {
      // The store went away or the process is closing: the next sweep tries again.
      if (!this.stopped) this.logger.warn({ err: safeErrorText(error) }, 'the orphan sweep failed');
    } finally {
      this.schedule();
    }
  }
}
