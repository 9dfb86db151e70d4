/**
 * The persistence port. A task is one versioned envelope (the XState snapshot plus a summary for listing) and
 * two append-only journals (audit, transcript) that the envelope references by length. A save is one atomic
 * compare-and-set: it succeeds only if the stored revision is the expected one (and, with leases, the fencing
 * token is current), and it appends the new journal entries in the same step. Shaped so a Redis Lua script can
 * implement it: check revision + fence, SET the envelope, RPUSH the entries, update the indexes.
 *
 * Erasure (`erase`, `eraseUser`, `tombstone`, `sweepRetention`) removes every byte of a task and leaves a minimal
 * tombstone (`erasure.ts`). Once a task id has a tombstone, the store refuses every write to it with
 * TaskErasedError, a create included, and `load` answers TaskErasedError instead of null: a writer that was
 * driving the task when it was erased cannot bring it back. The erasure methods are optional in the type so that
 * wrapping and third-party stores keep compiling; every built-in store has them (`ErasableTaskStore`).
 */
import type { TaskEnvelope, TaskSummary } from './envelope.js';
import type { EraseRequest, RetentionReport, SweepOptions, TaskOwner, Tombstone, UserErasure } from './erasure.js';

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
  /** Only tasks of this user (of this tenant). */
  owner?: TaskOwner;
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

/** What a store read of a task in the step that took its lease (`TaskStore.acquireAndRead`). */
export interface ReadWithLease {
  /** What `quarantined` would answer. */
  quarantined: string | null;
  /** What `load` would give, parsed on demand: the envelope, null when there is none; throws as `load` would. */
  load(): TaskEnvelope | null;
}

/** A lease just taken (`TaskStore.acquireAndRead`), with what the store held for the task at that moment. */
export interface TakenTask {
  lease: Lease;
  /** Null when the store could not read in that step (a key of another type): `load` and `quarantined` say why. */
  read: ReadWithLease | null;
}

export interface LeaseManager {
  /** Takes the lease if nobody holds it (SET NX PX); null when another holder has it. TaskErasedError for an erased task. */
  acquire(taskId: string, ttlMs: number): Promise<Lease | null>;
  /** Extends the lease if still held by this token; false if it was lost. */
  renew(lease: Lease, ttlMs: number): Promise<boolean>;
  /** Gives the lease up if still held by this token. */
  release(lease: Lease): Promise<void>;
  /**
   * Ids of running tasks whose lease nobody holds (their process died or closed) and that are not quarantined, at
   * most `limit`: what the orphan
   * sweep takes over, found without reading a summary or trying a lease per task. Optional: without it the sweep
   * tries every running task.
   */
  orphans?(limit: number): Promise<string[]>;
}

/** One recorded event of a task's inbox: its sequence number (1, 2, ... per task) and what was recorded. */
export interface InboxEntry {
  seq: number;
  data: unknown;
}

/**
 * A task's inbox, on stores that can serve dispatch (Redis): host events recorded by any process, applied in order
 * by whichever process drives the task. How far it was applied is saved with the task's envelope (`inbox`), so an
 * event is applied exactly once; the entries up to there are trimmed afterwards.
 */
export interface TaskInbox {
  /**
   * Records an entry; resolves with its sequence number once durable. TaskErasedError for an erased task;
   * QueueFullError when `maxUnapplied` entries wait already.
   */
  append(taskId: string, data: unknown, maxUnapplied: number): Promise<number>;
  /** The entries after `seq`, oldest first. */
  after(taskId: string, seq: number): Promise<InboxEntry[]>;
  /** Drops the entries up to `seq` (applied and saved). */
  trim(taskId: string, seq: number): Promise<void>;
  /**
   * Reserves the id of a task whose start is queued (not yet created): TaskExistsError if a task or a reservation
   * has it, TaskErasedError for an erased id, and (a store that detects data loss) StoreDataLostError once its data
   * set is gone, as a create would be. `undo` gives back a reservation whose start could not be queued.
   */
  reserve(taskId: string, undo?: boolean): Promise<void>;
  /**
   * Ids of tasks with events not yet applied whose inbox made no progress since `before` (ms), oldest first, at most
   * `limit`.
   */
  pending(before: number, limit: number): Promise<string[]>;
  /** Takes a task out of `pending` (its events can never be applied: it is quarantined, or gone); they are kept. */
  forget(taskId: string): Promise<void>;
}

/**
 * Slots of a tenant's running tasks, shared by every process on the store (`capacity.tenantCap`): per tenant, a set
 * of task ids, each with an expiry. A slot lasts `ttlMs` unless taken again (renewed), so the slots of a process
 * that died free themselves; counting, dropping expired slots and adding are one atomic step.
 */
export interface TenantSlots {
  /**
   * Takes the task's slot among the tenant's, or renews it: `'taken'` (new), `'held'` (the task held it already:
   * renewed), or null when `cap` unexpired slots of other tasks are held (nothing changed). Without `cap`, never
   * refused: a task that runs already (taken over, renewed after a stall) counts whatever the others hold.
   */
  take(tenantId: string, taskId: string, ttlMs: number, cap?: number): Promise<'taken' | 'held' | null>;
  /** Gives the task's slot back (nothing if it holds none). */
  release(tenantId: string, taskId: string): Promise<void>;
  /** How many unexpired slots the tenant's tasks hold now. */
  count(tenantId: string): Promise<number>;
}

/**
 * Word that a task's journals grew: sent after a save by any process (`'saved'`, with the lengths the save
 * committed), or when the store may have missed some (`'resync'`: a subscription was just confirmed, or its
 * connection came back after a break), so a listener reads what it has not seen yet. A hint, never the data: the
 * journals stay the source of truth, and a listener reads them from where it stands.
 */
export type TaskChange =
  | { kind: 'saved'; taskId: string; revision: number; audit: number; transcript: number }
  | { kind: 'resync'; taskId: string };

/** A listener's registration with `TaskChanges.watch`. */
export interface TaskWatch {
  /**
   * Whether notifications reach this listener now (the store's subscription for the task is confirmed and its
   * connection is up). While false, a caller should poll at its fast rate; once true again, a `'resync'` follows.
   */
  readonly live: boolean;
  /** Stops the notifications (idempotent). */
  stop(): void;
}

/**
 * Notifications of saved journal entries, for live views in every process that shares the store (Redis: pub/sub on
 * a channel per task, published by the save script itself; MemoryStore: within the process).
 */
export interface TaskChanges {
  /** Calls `listener` (never synchronously inside `watch`) whenever task `taskId` may have new entries. */
  watch(taskId: string, listener: (change: TaskChange) => void): TaskWatch;
}

/**
 * Ephemeral word about a task between processes: the live text of its model turns, written by the worker that
 * drives it, for the viewers connected to another process (`src/runtime/modelText.ts`). Never stored, journaled or
 * replayed; lost when nobody listens. Only what a live view may see is ever published (redacted text).
 */
export interface LiveMessages {
  /**
   * Watching side: marks the task as watched (for every process, while the returned stop is not called) and calls
   * `listener` with each message that another process publishes for it.
   */
  watch(taskId: string, listener: (message: unknown) => void): () => void;
  /**
   * Driving side: whether some process watches the task, as last checked. Never waits: a check that is stale starts
   * in the background (so the first call for a task answers false, and the answer follows within a round trip).
   */
  wanted(taskId: string): boolean;
  /** Driving side: sends `message` to the task's watchers in the other processes. Never throws, never waits. */
  publish(taskId: string, message: object): void;
}

export interface TaskStore {
  /** Present on stores that can coordinate several processes (one driver per task). */
  readonly leases?: LeaseManager;
  /**
   * Present on stores that can count a tenant's running tasks for every process at once (`capacity.tenantCap`):
   * Redis across processes, MemoryStore within one.
   */
  readonly tenantSlots?: TenantSlots;
  /**
   * Optional, on stores with leases where a round trip counts: `leases.acquire`, and in the same step the reads that
   * driving the task starts with (`quarantined`, `load`), as they stand once the lease is taken, when nobody else
   * can save any more. Null when another holder has the lease. A store that wraps another and changes what `load` or
   * `quarantined` return must implement it itself, or leave it out (the orchestrator then calls them).
   */
  acquireAndRead?(taskId: string, ttlMs: number): Promise<TakenTask | null>;
  /** Present on stores that can hold tasks' inboxes for dispatch across processes. */
  readonly inbox?: TaskInbox;
  /**
   * Present on stores that tell every process about saves (Redis, MemoryStore within its process): live views
   * (`GET /api/tasks/:id/events`) subscribe instead of polling quickly. Without it they poll the store.
   */
  readonly changes?: TaskChanges;
  /**
   * Present on stores shared by several processes (Redis): carries the live model text of a task from the process
   * that drives it to the viewers connected to another one (pub/sub, only while someone watches).
   */
  readonly liveMessages?: LiveMessages;
  /** "memory", "file", "redis"... */
  readonly kind: string;
  /**
   * The validated envelope, or null if there is no such task. Throws CorruptTaskError for unreadable data,
   * TaskErasedError for an erased task.
   */
  load(taskId: string): Promise<TaskEnvelope | null>;
  /**
   * Atomic compare-and-set plus journal append. Throws RevisionConflictError, FencedOutError, StoreUnavailableError,
   * TaskErasedError (any save of an erased task id), AgentError `invalid_save` (also for a save that would change
   * the task's owner: it never changes).
   */
  save(request: SaveRequest): Promise<void>;
  /** Summaries of stored tasks, most recently updated first. */
  list(query?: ListQuery): Promise<TaskSummary[]>;
  /** Committed journal entries [from, to) of a task (only up to the lengths its envelope references); none when erased. */
  readJournal(taskId: string, stream: JournalStream, from?: number, to?: number): Promise<unknown[]>;
  /** Marks a task that cannot be restored, with a visible reason; it is skipped by recovery. TaskErasedError when erased. */
  quarantine(taskId: string, reason: string): Promise<void>;
  /** The quarantine reason of a task, or null. */
  quarantined(taskId: string): Promise<string | null>;
  close(): Promise<void>;

  /**
   * Claims the mandate `mandateId` for the task `taskId`, before anything of the task is stored: a mandate authorises
   * one task. Atomic per mandate: MandateUsedError when another task holds it. `'held'` when this task holds it
   * already (a retried start of the same task), `'claimed'` when this call took it. TaskExistsError when the task
   * holds another mandate. The claim goes with the task's erasure (and so with retention). Optional in the type so
   * that wrapping and third-party stores keep compiling; the orchestrator refuses a start with a mandate on a store
   * without it. Every built-in store has it.
   */
  claimMandate?(mandateId: string, taskId: string): Promise<'claimed' | 'held'>;
  /** Gives back the claim of `mandateId` if `taskId` holds it: its start did not happen (nothing of it was stored). */
  releaseMandate?(mandateId: string, taskId: string): Promise<void>;

  /**
   * Removes everything stored for the task (envelope, both journals, its entries in every index, its quarantine
   * marker, its lease and fencing counter) and leaves its tombstone, in one atomic step (the file store: see its
   * header for the order). Unconditional: it neither waits for nor respects a lease; a process still driving the
   * task has its next save refused with TaskErasedError and stops (the orchestrator's `erase` is the careful one).
   * Idempotent: erasing an erased task returns its first tombstone (and removes whatever a crash left). Throws
   * TaskNotFoundError when nothing is stored under the id.
   */
  erase?(taskId: string, request: EraseRequest): Promise<Tombstone>;
  /** Erases every task of one user of one tenant, as `erase` does (unconditionally, running ones included). */
  eraseUser?(owner: TaskOwner, request: EraseRequest): Promise<UserErasure>;
  /** The tombstone of an erased task, or null. */
  tombstone?(taskId: string): Promise<Tombstone | null>;
  /**
   * Applies the store's retention periods at `now` (default: the store's clock): erases finished tasks last
   * updated a period ago or earlier (tombstones with reason "retention") and removes tombstones past theirs.
   * Without retention options it does nothing. Also completes erasures a crash interrupted (file store).
   */
  sweepRetention?(now?: number, options?: SweepOptions): Promise<RetentionReport>;
}

/** A store that can claim mandates: all the built-in ones. */
export type MandateClaims = Required<Pick<TaskStore, 'claimMandate' | 'releaseMandate'>>;

/** Whether `store` can claim mandates (needed to start a task with one). */
export function claimsMandates<S extends TaskStore>(store: S): store is S & MandateClaims {
  return typeof store.claimMandate === 'function' && typeof store.releaseMandate === 'function';
}

/** A store with every erasure method: all the built-in ones. */
export type ErasableTaskStore = TaskStore &
  Required<Pick<TaskStore, 'erase' | 'eraseUser' | 'tombstone' | 'sweepRetention'>>;

/** Whether `store` can erase. */
export function isErasable(store: TaskStore): store is ErasableTaskStore {
  return (
    typeof store.erase === 'function' &&
    typeof store.eraseUser === 'function' &&
    typeof store.tombstone === 'function' &&
    typeof store.sweepRetention === 'function'
  );
}
