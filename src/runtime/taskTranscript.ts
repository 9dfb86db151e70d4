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
        if (saved && this.committed) for (const entry of entries) this.committed.push(entry);
      },
    };
  }

  /** Committed, then in flight, then pending. */
  async all(): Promise<TranscriptEntry[]> {
    for (let attempt = 0; !this.committed; attempt++) {
      const length = this.length();
      const read = await this.readCommitted(length);
      if (this.committed) break;
      // A save landed while reading: what it appended is not in `read`, so read again (or, past a few tries, answer
      // without keeping anything).
      if (this.length() === length) this.committed = read;
      else if (attempt >= 2) return [...read, ...this.saving, ...this.pending];
    }
    return [...this.committed, ...this.saving, ...this.pending];
  }
}
