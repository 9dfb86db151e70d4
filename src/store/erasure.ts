/**
 * Erasure and retention as data, shared by every store so that they answer alike: the request a host makes, the
 * tombstone a store leaves where an erased task was, and what a retention sweep did.
 *
 * A tombstone is minimal on purpose: it says that a task id was erased, when, why, on whose request, and how much
 * was removed, and nothing about the person. It holds no user id, not even hashed: user ids are low-entropy, so a
 * plain hash is reversed by trying candidates, and a keyed hash is still pseudonymous personal data kept past the
 * erasure. A host that must show which tasks it erased for whom keeps the ids `eraseUser` returns in its own log.
 */
import { z } from 'zod';
import { WAITING_TASK_STATES } from '../../machines/tags.js';
import { CorruptTaskError, HostRequestError, TaskErasedError } from '../errors.js';
import { TASK_STATES, type TaskState } from './summary.js';

export const TOMBSTONE_SCHEMA_VERSION = 1;
/** The reason of the tombstones a retention sweep leaves. */
export const RETENTION_REASON = 'retention';
/** How many tasks (and, apart, tombstones) one retention sweep removes at most, unless told otherwise. */
export const DEFAULT_SWEEP_LIMIT = 1000;
/** States a task never leaves: the ones a retention period applies to. */
export const FINISHED_TASK_STATES: readonly TaskState[] = TASK_STATES.filter(
  (s) => s !== 'running' && !WAITING_TASK_STATES.includes(s),
);

/** A request to erase. */
export interface EraseRequest {
  /** Why, as a short code the host chooses ("gdpr_erasure", "retention"): kept in the tombstone, so no personal data. */
  reason: string;
  /** When (ms since epoch): the tombstone's `erasedAt`. */
  at: number;
  /** Who asked: the host's id of the operator or of the erasure request (not the data subject). */
  by?: string;
}

/** What a store keeps in place of an erased task. Plain JSON. */
export interface Tombstone {
  schemaVersion: typeof TOMBSTONE_SCHEMA_VERSION;
  taskId: string;
  erasedAt: number;
  reason: string;
  by: string | null;
  /** What the erasure removed: whether there was a snapshot, how many journal entries, a quarantine marker. */
  removed: { snapshot: boolean; audit: number; transcript: number; quarantine: boolean };
}

/** Whose task it is: a user id means something only within its tenant. */
export interface TaskOwner {
  tenantId: string;
  userId: string;
}

/** What `eraseUser` did. */
export interface UserErasure {
  /** One tombstone per task erased by this call (tasks erased before are not repeated). */
  erased: Tombstone[];
  /**
   * Stored tasks whose owner could not be read, so that they could not be attributed and were left in place (only
   * the file store has them: a task directory with an unreadable envelope). Names of directories under the store's
   * root; erase them by id if you know it, or remove the directory.
   */
  unreadable: string[];
}

/** How long a store keeps what it no longer needs. Both periods are optional; without them, forever. */
export interface RetentionOptions {
  /** A finished task (done, failed, budget_exhausted, cancelled) is erased this long after its last update. */
  finishedTaskMs?: number;
  /** A tombstone is removed this long after its erasure; the task id can then be created again. */
  tombstoneMs?: number;
}

/** What one retention sweep did. */
export interface RetentionReport {
  /** Tombstones of the finished tasks it erased (reason "retention"). */
  erased: Tombstone[];
  /** How many tombstones it removed. */
  tombstonesRemoved: number;
  /** True when it stopped at its limit with more due: sweep again. */
  more: boolean;
}

/** Options of one retention sweep. */
export interface SweepOptions {
  /** At most this many tasks, and this many tombstones (default 1000). */
  limit?: number;
}

const SHORT = 256;
const eraseRequestSchema = z.strictObject({
  reason: z.string().trim().min(1, 'must not be blank').max(SHORT),
  // The largest time a Date can show.
  at: z.number().int().nonnegative().max(8.64e15),
  by: z.string().min(1).max(SHORT).optional(),
});

/** The request checked, or HostRequestError naming the first problem. */
export function checkEraseRequest(what: string, request: EraseRequest): EraseRequest {
  const parsed = eraseRequestSchema.safeParse(request);
  if (parsed.success) return request;
  const issue = parsed.error.issues[0]!;
  throw new HostRequestError('invalid_request', `${what}: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
}

const ownerSchema = z.strictObject({ tenantId: z.string().min(1), userId: z.string().min(1) });

export function checkOwner(owner: TaskOwner): TaskOwner {
  const parsed = ownerSchema.safeParse(owner);
  if (!parsed.success)
    throw new HostRequestError('invalid_request', 'eraseUser: the owner needs a non-empty tenantId and userId');
  return { tenantId: owner.tenantId, userId: owner.userId };
}

export function sameOwner(summary: { tenantId: string; userId: string }, owner: TaskOwner): boolean {
  return summary.tenantId === owner.tenantId && summary.userId === owner.userId;
}

/** The tombstone of an erasure. */
export function tombstoneOf(taskId: string, request: EraseRequest, removed: Tombstone['removed']): Tombstone {
  return { ...tombstoneHead(taskId, request), removed };
}

/** Every field of the tombstone but `removed`, in the order of the stored JSON. */
export function tombstoneHead(taskId: string, request: EraseRequest): Omit<Tombstone, 'removed'> {
  return {
    schemaVersion: TOMBSTONE_SCHEMA_VERSION,
    taskId,
    erasedAt: request.at,
    reason: request.reason,
    by: request.by ?? null,
  };
}

const count = z.number().int().nonnegative();
const tombstoneSchema = z.strictObject({
  schemaVersion: z.literal(TOMBSTONE_SCHEMA_VERSION),
  taskId: z.string().min(1),
  erasedAt: count,
  reason: z.string(),
  by: z.string().nullable(),
  removed: z.strictObject({ snapshot: z.boolean(), audit: count, transcript: count, quarantine: z.boolean() }),
});

/**
 * A stored tombstone, validated; CorruptTaskError when it is not one of `taskId` (with `expected`: false, when the
 * caller checks whose it is itself).
 */
export function parseTombstone(taskId: string, raw: unknown, expected = true): Tombstone {
  let value = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      throw new CorruptTaskError(taskId, 'its tombstone is not JSON');
    }
  }
  const parsed = tombstoneSchema.safeParse(value);
  if (!parsed.success || (expected && parsed.data.taskId !== taskId))
    throw new CorruptTaskError(taskId, 'its tombstone is not a valid tombstone of this task');
  return parsed.data;
}

/** The error for any read or write of an erased task. */
export function erasedError(tombstone: Pick<Tombstone, 'taskId' | 'erasedAt' | 'reason'>): TaskErasedError {
  return new TaskErasedError(tombstone.taskId, tombstone.erasedAt, tombstone.reason);
}

export function isFinished(state: string): boolean {
  return (FINISHED_TASK_STATES as readonly string[]).includes(state);
}

/** Retention periods checked once, at construction. */
export interface Retention {
  finishedTaskMs: number | null;
  tombstoneMs: number | null;
}

export function checkRetention(options: RetentionOptions | undefined): Retention {
  const period = (name: keyof RetentionOptions): number | null => {
    const value = options?.[name];
    if (value === undefined) return null;
    if (!Number.isSafeInteger(value) || value < 0)
      throw new TypeError(`retention.${name} must be a whole number of milliseconds (0 or more), not ${value}`);
    return value;
  };
  return { finishedTaskMs: period('finishedTaskMs'), tombstoneMs: period('tombstoneMs') };
}

/** What a sweep at `now` removes: finished tasks updated, and tombstones erased, at or before these times (null: none). */
export function retentionCutoffs(
  retention: Retention,
  now: number,
): { finishedBefore: number | null; tombstonesBefore: number | null } {
  if (!Number.isFinite(now))
    throw new HostRequestError('invalid_request', `sweepRetention: now must be a time in ms, not ${now}`);
  return {
    finishedBefore: retention.finishedTaskMs === null ? null : now - retention.finishedTaskMs,
    tombstonesBefore: retention.tombstoneMs === null ? null : now - retention.tombstoneMs,
  };
}

export function sweepLimit(options: SweepOptions | undefined): number {
  const limit = options?.limit ?? DEFAULT_SWEEP_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new HostRequestError(
      'invalid_request',
      `sweepRetention: limit must be a positive whole number, not ${limit}`,
    );
  return limit;
}

/** The erase request of a retention sweep at `now`. */
export function retentionRequest(now: number): EraseRequest {
  return { reason: RETENTION_REASON, at: Math.max(0, Math.trunc(now)) };
}
