/**
 * Erasure and retention of the file store: `erase`, `eraseUser`, `tombstone` and `sweepRetention`, which
 * `FileStore` delegates to. The order an erasure goes in and what a crash leaves are described in the header of
 * `fileStore.ts`; what erasure by user and the sweep read from disk is in `fileScan.ts`.
 */
import { rmdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { TaskNotFoundError } from '../../errors.js';
import {
  type EraseRequest,
  type Retention,
  type RetentionReport,
  type SweepOptions,
  type TaskOwner,
  type Tombstone,
  type UserErasure,
  checkEraseRequest,
  checkOwner,
  isFinished,
  retentionCutoffs,
  retentionRequest,
  sameOwner,
  sweepLimit,
  tombstoneOf,
} from '../erasure.js';
import type { FileAccess } from './fileAccess.js';
import type { FileClaims } from './fileClaims.js';
import { countLines, entriesOf, readRecordLeniently, removeRemains, scanTasks } from './fileScan.js';
import { fsyncDirectory, withLockFile, writeFileAtomic } from './fileIo.js';
import {
  ENVELOPE_FILE,
  LOCK_FILE,
  QUARANTINE_FILE,
  type TaskRecord,
  isTombstoneText,
  liveTombstone,
  parseRecord,
  summaryFields,
  tombstoneRecordText,
} from './fileRecords.js';

export class FileEraser {
  constructor(
    private readonly files: FileAccess,
    private readonly retention: Retention,
    private readonly claims: FileClaims,
  ) {}

  async erase(taskId: string, request: EraseRequest): Promise<Tombstone> {
    const checked = checkEraseRequest(`erase of task ${taskId}`, request);
    return (await this.eraseTask(taskId, checked, null))!.tombstone;
  }

  async eraseUser(owner: TaskOwner, request: EraseRequest): Promise<UserErasure> {
    const checked = checkEraseRequest('eraseUser', request);
    const user = checkOwner(owner);
    const result: UserErasure = { erased: [], unreadable: [] };
    for (const found of await scanTasks(this.files.directory)) {
      if (found.kind === 'unreadable') result.unreadable.push(found.name);
      if (found.kind !== 'task' || !sameOwner(found.summary, user)) continue;
      try {
        // The owner never changes, so what the scan read still holds under the lock.
        const erased = (await this.eraseTask(found.taskId, checked, null))!;
        if (erased.fresh) result.erased.push(erased.tombstone);
      } catch (error) {
        if (!(error instanceof TaskNotFoundError)) throw error;
      }
    }
    return result;
  }

  async tombstone(taskId: string): Promise<Tombstone | null> {
    const raw = await this.files.readText(taskId, ENVELOPE_FILE);
    if (raw === null || !isTombstoneText(raw)) return null;
    return liveTombstone(parseRecord(taskId, raw));
  }

  async sweepRetention(now = Date.now(), options?: SweepOptions): Promise<RetentionReport> {
    const limit = sweepLimit(options);
    const { finishedBefore, tombstonesBefore } = retentionCutoffs(this.retention, now);
    const scanned = await scanTasks(this.files.directory);
    const isDue = (summary: { state: string; updatedAt: number }) =>
      finishedBefore !== null && isFinished(summary.state) && summary.updatedAt <= finishedBefore;
    const due = scanned
      .flatMap((found) => (found.kind === 'task' && isDue(found.summary) ? [found] : []))
      .sort((a, b) => a.summary.updatedAt - b.summary.updatedAt);
    const tombstones = scanned.flatMap((found) => (found.kind === 'tombstone' ? [found] : []));
    const old = tombstones.filter((t) => tombstonesBefore !== null && t.tombstone.erasedAt <= tombstonesBefore);
    const request = retentionRequest(now);
    const report: RetentionReport = {
      erased: [],
      tombstonesRemoved: 0,
      more: due.length > limit || old.length > limit,
    };
    for (const found of due.slice(0, limit)) {
      const erased = await this.eraseTask(found.taskId, request, (summary) => summary !== null && isDue(summary)).catch(
        (error: unknown) => {
          if (error instanceof TaskNotFoundError) return null;
          throw error;
        },
      );
      // Another process may have erased it first: its tombstone is not this sweep's.
      if (erased?.fresh) report.erased.push(erased.tombstone);
    }
    for (const found of old.slice(0, limit)) {
      if (await this.forgetTombstone(found.tombstone.taskId, tombstonesBefore!)) report.tombstonesRemoved += 1;
    }
    // Erasures a crash interrupted after their commit point: their journals are unreachable but still on disk.
    for (const found of tombstones) {
      if (found.remains && !old.includes(found)) await this.eraseTask(found.tombstone.taskId, request, null);
    }
    return report;
  }

  /**
   * Erases a task under its lock (header of `fileStore.ts`: the order and what a crash leaves). With `condition`,
   * only when it holds for the summary read under the lock (null when unreadable); null when it did not. `fresh` is
   * false when the task was erased before (the first tombstone is given back, and whatever a crash left is removed).
   */
  private eraseTask(
    taskId: string,
    request: EraseRequest,
    condition: ((summary: { state: string; updatedAt: number } | null) => boolean) | null,
  ): Promise<{ tombstone: Tombstone; fresh: boolean } | null> {
    const dir = this.files.taskDirectory(taskId);
    return this.files.enqueue(taskId, () =>
      this.files.io(`erasure of task ${JSON.stringify(taskId)}`, async () => {
        // Nothing to lock (and nothing to erase) when the directory does not exist; a lock would create it.
        if ((await entriesOf(dir)).length === 0) throw new TaskNotFoundError(taskId);
        return withLockFile(join(dir, LOCK_FILE), this.files.lockOptions, async () => {
          const raw = await this.files.readText(taskId, ENVELOPE_FILE);
          const record: TaskRecord | 'unreadable' | null = raw === null ? null : readRecordLeniently(taskId, raw);
          if (record !== null && record !== 'unreadable' && record.kind === 'tombstone') {
            await this.claims.releaseHeldBy(taskId, dir);
            await removeRemains(dir);
            return { tombstone: record.tombstone, fresh: false };
          }
          const names = (await entriesOf(dir)).filter((name) => name !== LOCK_FILE);
          if (names.length === 0) throw new TaskNotFoundError(taskId);
          if (condition) {
            const fields = record !== null && record !== 'unreadable' ? summaryFields(record.file.envelope) : null;
            if (!condition(fields?.summary ?? null)) return null;
          }
          const tombstone = tombstoneOf(taskId, request, {
            snapshot: raw !== null,
            audit: await countLines(join(dir, 'audit.jsonl')),
            transcript: await countLines(join(dir, 'transcript.jsonl')),
            quarantine: names.includes(QUARANTINE_FILE),
          });
          await writeFileAtomic(join(dir, ENVELOPE_FILE), tombstoneRecordText(tombstone));
          // The mandate's claim names the task: it goes before the pointer to it (with the remains).
          await this.claims.releaseHeldBy(taskId, dir);
          await removeRemains(dir);
          return { tombstone, fresh: true };
        });
      }),
    );
  }

  /** Removes a tombstone erased at or before `cutoff`, then its directory; false when it was not one (any more). */
  private async forgetTombstone(taskId: string, cutoff: number): Promise<boolean> {
    const dir = this.files.taskDirectory(taskId);
    const removed = await this.files.enqueue(taskId, () =>
      this.files.io(`removal of the tombstone of task ${JSON.stringify(taskId)}`, async () => {
        // Removed meanwhile (by another process's sweep): taking the lock would fail on the missing directory.
        if ((await entriesOf(dir)).length === 0) return false;
        return withLockFile(join(dir, LOCK_FILE), this.files.lockOptions, async () => {
          const raw = await this.files.readText(taskId, ENVELOPE_FILE);
          if (raw === null || !isTombstoneText(raw) || liveTombstone(parseRecord(taskId, raw)).erasedAt > cutoff)
            return false;
          await removeRemains(dir);
          await unlink(join(dir, ENVELOPE_FILE));
          return true;
        });
      }),
    );
    if (!removed) return false;
    // After the lock file is gone; a task created under the id meanwhile keeps its directory.
    await rmdir(dir).catch(() => undefined);
    await fsyncDirectory(this.files.directory).catch(() => undefined);
    return true;
  }
}
