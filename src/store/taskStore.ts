/**
 * The persistence port. A task is one versioned envelope (the XState snapshot plus a summary for listing) and
 * two append-only journals (audit, transcript) that the envelope references by length. A save is one atomic
 * compare-and-set: it succeeds only if the stored revision is the expected one (and, with leases, the fencing
 * token is current), and it appends the new journal entries in the same step. Shaped so a Redis Lua script can
 * implement it: check revision + fence, SET the envelope, RPUSH the entries, update the indexes.
 */
import type { TaskEnvelope, TaskSummary } from './envelope.js';

export type JournalStream = 'audit' | 'transcript';

export interface SaveRequest {
  /** The new envelope; its `revision` must be `expectedRevision + 1`. */
  envelope: TaskEnvelope;
  /** 0 creates the task (and fails if it exists). */
  expectedRevision: number;
  /** Entries to append; the envelope's journal lengths already count them. */
  append: { audit: unknown[]; transcript: unknown[] };
  /**
   * With leases: the fencing token this writer holds. A store with leases refuses a token older than the newest
   * acquisition (FencedOutError), and refuses a save without a token while someone holds the lease.
   */
  fence?: string;
}

export interface ListQuery {
  /** Only tasks in these states. */
  states?: TaskSummary['state'][];
  /** Only tasks whose `wakeAt` is at or before this time (confirmations due to expire). */
  dueBefore?: number;
  limit?: number;
}

/** The right to drive one task, held by one process at a time. */
export interface Lease {
  taskId: string;
  /** Random, identifies this holder; renew and release compare it. */
  token: string;
  /** Monotonic fencing token: each acquisition gets a larger one; saves carry it and stale ones are refused. */
  fence: string;
  /** Absolute expiry (ms since epoch) as last set. */
  expiresAt: number;
}

export interface LeaseManager {
  /** Takes the lease if nobody holds it (SET NX PX); null when another holder has it. */
  acquire(taskId: string, ttlMs: number): Promise<Lease | null>;
  /** Extends the lease if still held by this token; false if it was lost. */
  renew(lease: Lease, ttlMs: number): Promise<boolean>;
  /** Gives the lease up if still held by this token. */
  release(lease: Lease): Promise<void>;
}

export interface TaskStore {
  /** Present on stores that can coordinate several processes (one driver per task). */
  readonly leases?: LeaseManager;
  /** "memory", "file", "redis"... */
  readonly kind: string;
  /** The validated envelope, or null if there is no such task. Throws CorruptTaskError for unreadable data. */
  load(taskId: string): Promise<TaskEnvelope | null>;
  /** Atomic compare-and-set plus journal append. Throws RevisionConflictError, FencedOutError, StoreUnavailableError. */
  save(request: SaveRequest): Promise<void>;
  /** Summaries of stored tasks, most recently updated first. */
  list(query?: ListQuery): Promise<TaskSummary[]>;
  /** Committed journal entries [from, to) of a task (only up to the lengths its envelope references). */
  readJournal(taskId: string, stream: JournalStream, from?: number, to?: number): Promise<unknown[]>;
  /** Marks a task that cannot be restored, with a visible reason; it is skipped by recovery. */
  quarantine(taskId: string, reason: string): Promise<void>;
  /** The quarantine reason of a task, or null. */
  quarantined(taskId: string): Promise<string | null>;
  close(): Promise<void>;
}
