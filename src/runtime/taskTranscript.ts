/**
 * A live task's transcript: the entries the chart emitted that no save has taken yet, those of the save in flight,
 * and the committed ones. The committed transcript is read from the store when a model turn first asks, then kept
 * here: every save appends what it made durable, so a model turn does not read the whole history again (it grows
 * with every round). Until something asks, nothing is kept (a model that never reads its history costs no memory).
 */
import type { TranscriptEntry } from '../../machines/journal.js';

export class TaskTranscript {
  /** Emitted, not yet taken by a save. */
  private pending: TranscriptEntry[] = [];
  /** Taken by the save in flight. */
  private saving: TranscriptEntry[] = [];
  /** The store's transcript up to the committed length, once something read it. */
  private committed: TranscriptEntry[] | null = null;
  /** While the first read is in flight: what saves made durable meanwhile. */
  private landed: TranscriptEntry[] | null = null;
  private reading: Promise<void> | null = null;

  constructor(
    /** The committed length (the task's journal position). */
    private readonly length: () => number,
    private readonly readCommitted: (length: number) => Promise<TranscriptEntry[]>,
  ) {}

  emitted(entry: TranscriptEntry): void {
    this.pending.push(entry);
  }

  get pendingCount(): number {
    return this.pending.length;
  }

  /** A save takes the pending entries; `settle` says whether it made them durable. */
  take(): { entries: TranscriptEntry[]; settle: (saved: boolean) => void } {
    const entries = this.pending;
    this.pending = [];
    this.saving = entries;
    return {
      entries,
      settle: (saved) => {
        this.saving = [];
        if (!saved) return;
        if (this.committed) for (const entry of entries) this.committed.push(entry);
        else if (this.landed) for (const entry of entries) this.landed.push(entry);
      },
    };
  }

  /** Committed, then in flight, then pending. The entries are shared with the task: a model must not change them. */
  async all(): Promise<TranscriptEntry[]> {
    if (!this.committed) {
      this.reading ??= this.readOnce().finally(() => (this.reading = null));
      await this.reading;
    }
    return [...this.committed!, ...this.saving, ...this.pending];
  }

  /**
   * Reads the first `length` entries, the committed ones when the read starts. A save that lands meanwhile comes
   * after them (saves settle in order, each moving the length past its entries): its entries are kept in `landed`
   * and follow what was read.
   */
  private async readOnce(): Promise<void> {
    const length = this.length();
    this.landed = [];
    try {
      const read = await this.readCommitted(length);
      this.committed = [...read, ...this.landed];
    } finally {
      this.landed = null;
    }
  }
}
