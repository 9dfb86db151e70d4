/**
 * The embedded default store: plain files under one directory, crash-safe, no server.
 *
 * Layout, one subdirectory per task (named by `taskDirectoryName`, which never escapes the root):
 * - `envelope.json`: the task record `{ format, offsets, envelope }`, replaced atomically. `offsets` are the
 *   committed byte lengths of the journals, committed in the same rename as the envelope that counts their lines.
 *   Once the task is erased, its tombstone `{ format: "file-tombstone/1", tombstone }` instead (`fileRecords.ts`).
 * - `audit.jsonl`, `transcript.jsonl`: one JSON entry per line, append-only.
 * - `quarantine.json`: the reason a task must not be restored, when it has one.
 * - `mandate.json`: the mandate the task claimed, whose claim file (`mandates/`, beside the task directories) its
 *   erasure removes (`fileClaims.ts`).
 * - `.lock`: present while a save runs.
 *
 * A save appends its journal lines first, then replaces the envelope: a crash in between leaves lines past the
 * committed offsets, which readers ignore and the next save truncates away.
 *
 * Several processes may share a directory on one machine: each save holds the task's lock file around its
 * read-check-write. There are no leases (no `leases` property, `fence` is ignored), so nothing stops two
 * processes from driving the same task; the revision check only makes the loser's save fail. A lock file whose
 * holder died is broken (same host: at once; otherwise after `staleLockMs`). Network file systems are not
 * supported: O_EXCL and rename atomicity are not reliable there.
 *
 * An erasure holds the task's lock and goes in this order: (1) count what is stored; (2) replace `envelope.json`
 * by the tombstone record (temp file, fsync, rename, fsync of the directory): the commit point, after which every
 * reader and writer sees the task as erased; (3) delete every other file of the task directory (journals,
 * quarantine marker, temp files a crashed write left, which hold envelope text), then fsync the directory. A crash
 * before (2) leaves the task whole; a crash between (2) and (3) leaves journal bytes that no reader reaches, and
 * the next `erase` of the id or `sweepRetention` (which completes interrupted erasures) deletes them. The
 * directory then holds only the tombstone until the tombstone's retention removes it. Every write (saves,
 * quarantine, erasure) holds the lock, so nothing can write into a task being erased. Erasing by user and the
 * retention sweep read every task's record, as `list` does: there is no index to keep in step.
 *
 * This file is the store core (save, load, list, journals, quarantine). Erasure and retention: `fileEraser.ts`, with
 * the scan it reads through in `fileScan.ts`; per-task queue, reads and error mapping: `fileAccess.ts`; record
 * formats: `fileRecords.ts`; durable file primitives and the lock file: `fileIo.ts`.
 */
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { CorruptTaskError, RevisionConflictError, TaskExistsError } from '../../errors.js';
import { type TaskEnvelope, type TaskSummary, parseEnvelope } from '../envelope.js';
import {
  type EraseRequest,
  type RetentionOptions,
  type RetentionReport,
  type SweepOptions,
  type TaskOwner,
  type Tombstone,
  type UserErasure,
  checkRetention,
  erasedError,
} from '../erasure.js';
import { FileAccess } from './fileAccess.js';
import { FileClaims } from './fileClaims.js';
import { FileEraser } from './fileEraser.js';
import { taskDirectoryNames } from './fileScan.js';
import { readPrefix, truncateAndAppend, withLockFile, writeFileAtomic } from './fileIo.js';
import {
  type Committed,
  ENVELOPE_FILE,
  LOCK_FILE,
  QUARANTINE_FILE,
  TASK_FORMAT,
  type TaskFile,
  encodeJson,
  encodeLines,
  isTombstoneText,
  liveTaskFile,
  liveTombstone,
  parseCommitted,
  parseRecord,
  summaryFields,
  taskDirectoryName,
} from './fileRecords.js';
import { checkSameOwner, checkSaveRequest, matchesQuery } from '../storeChecks.js';
import type { ErasableTaskStore, JournalStream, ListQuery, MandateClaims, SaveRequest } from '../taskStore.js';

export { taskDirectoryName };

const STREAMS: readonly JournalStream[] = ['audit', 'transcript'];

/** Tuning of the cross-process lock (the defaults suit a demo and a single host), and retention. */
export interface FileStoreOptions {
  /** How long a save waits for another process's lock on the same task before StoreUnavailableError. */
  lockTimeoutMs?: number;
  /** A lock file older than this is considered left by a crashed process and is broken. */
  staleLockMs?: number;
  /** How long finished tasks and tombstones are kept (enforced by `sweepRetention`). Default: forever. */
  retention?: RetentionOptions;
}

/**
 * A TaskStore on the local file system. Creates `directory` on the first write.
 *
 * @example
 * const store = new FileStore('./.agent-tasks');
 * await store.save({ envelope, expectedRevision: 0, append: { audit, transcript } });
 */
export class FileStore implements ErasableTaskStore, MandateClaims {
  readonly kind = 'file';
  /** Absolute path of the root directory. */
  readonly directory: string;
  /** Per-task queue, lock options, reads and error mapping, shared with the eraser. */
  private readonly files: FileAccess;
  /** Erasure and retention (`fileEraser.ts`). */
  private readonly eraser: FileEraser;
  /** Mandate claims (`fileClaims.ts`). */
  private readonly claims: FileClaims;

  constructor(directory: string, options: FileStoreOptions = {}) {
    this.directory = resolve(directory);
    this.files = new FileAccess(this.directory, {
      timeoutMs: options.lockTimeoutMs ?? 10_000,
      staleMs: options.staleLockMs ?? 30_000,
    });
    this.claims = new FileClaims(this.files);
    this.eraser = new FileEraser(this.files, checkRetention(options.retention), this.claims);
  }

  /** Absolute path of a task's directory. */
  taskDirectory(taskId: string): string {
    return this.files.taskDirectory(taskId);
  }

  async load(taskId: string): Promise<TaskEnvelope | null> {
    const raw = await this.files.readText(taskId, ENVELOPE_FILE);
    if (raw === null) return null;
    return parseEnvelope(taskId, liveTaskFile(parseRecord(taskId, raw)).envelope);
  }

  async save(request: SaveRequest): Promise<void> {
    checkSaveRequest(request);
    const { taskId } = request.envelope;
    // Serialize before any I/O, so a value JSON cannot carry is refused without touching the files.
    const lines = {
      audit: encodeLines(taskId, request.append.audit),
      transcript: encodeLines(taskId, request.append.transcript),
    };
    const envelopeText = encodeJson(taskId, 'the envelope', request.envelope);
    return this.files.enqueue(taskId, () =>
      this.files.io(`save of task ${JSON.stringify(taskId)}`, async () => {
        const dir = this.taskDirectory(taskId);
        await this.files.ensureDirectory(dir);
        await withLockFile(join(dir, LOCK_FILE), this.files.lockOptions, () =>
          this.saveLocked(request, lines, envelopeText),
        );
      }),
    );
  }

  private async saveLocked(request: SaveRequest, lines: Record<JournalStream, string>, envelopeText: string) {
    const { envelope, expectedRevision } = request;
    const { taskId } = envelope;
    const raw = await this.files.readText(taskId, ENVELOPE_FILE);
    const record = raw === null ? null : parseRecord(taskId, raw);
    if (record?.kind === 'tombstone') throw erasedError(record.tombstone);
    if (expectedRevision === 0 && raw !== null) throw new TaskExistsError(taskId);
    let file: TaskFile | null = null;
    let committed: Committed = { taskId, revision: 0, journal: { audit: 0, transcript: 0 } };
    if (record !== null) {
      file = record.file;
      committed = parseCommitted(taskId, file.envelope);
      const previous = summaryFields(file.envelope);
      if (previous) checkSameOwner(taskId, previous.summary, envelope.summary);
    }
    if (committed.revision !== expectedRevision) {
      throw new RevisionConflictError(taskId, expectedRevision, raw === null ? null : committed.revision);
    }
    for (const stream of STREAMS) {
      if (committed.journal[stream] + request.append[stream].length !== envelope.journal[stream]) {
        throw new RevisionConflictError(taskId, expectedRevision, committed.revision);
      }
    }
    const dir = this.taskDirectory(taskId);
    const offsets = { audit: 0, transcript: 0 };
    for (const stream of STREAMS) {
      const length = await truncateAndAppend(join(dir, `${stream}.jsonl`), file?.offsets[stream] ?? 0, lines[stream]);
      if (length === null) throw new CorruptTaskError(taskId, `${stream}.jsonl is shorter than its committed length`);
      offsets[stream] = length;
    }
    const text = `{"format":${JSON.stringify(TASK_FORMAT)},"offsets":${JSON.stringify(offsets)},"envelope":${envelopeText}}\n`;
    await writeFileAtomic(join(dir, ENVELOPE_FILE), text);
  }

  claimMandate(mandateId: string, taskId: string): Promise<'claimed' | 'held'> {
    return this.claims.claim(mandateId, taskId);
  }

  releaseMandate(mandateId: string, taskId: string): Promise<void> {
    return this.claims.release(mandateId, taskId);
  }

  async list(query: ListQuery = {}): Promise<TaskSummary[]> {
    const names = await taskDirectoryNames(this.directory);
    const summaries: TaskSummary[] = [];
    // Bounded parallelism: thousands of tasks must not exhaust file descriptors.
    for (let i = 0; i < names.length; i += 32) {
      const batch = await Promise.all(names.slice(i, i + 32).map((name) => this.readSummary(name)));
      for (const summary of batch) if (summary && matchesQuery(summary, query)) summaries.push(summary);
    }
    summaries.sort((a, b) => b.updatedAt - a.updatedAt || (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0));
    return summaries.slice(0, query.limit ?? summaries.length);
  }

  /** The summary of one task directory, or null when it holds no readable envelope of its own task. */
  private async readSummary(name: string): Promise<TaskSummary | null> {
    try {
      const raw = await readFile(join(this.directory, name, ENVELOPE_FILE), 'utf8');
      const record = parseRecord(name, raw, true);
      if (record.kind === 'tombstone') return null;
      const file = record.file;
      const taskId = (file.envelope as { taskId?: unknown } | null)?.taskId;
      // A record copied into another task's directory is not that task.
      if (typeof taskId !== 'string' || taskDirectoryName(taskId) !== name) return null;
      return parseEnvelope(taskId, file.envelope).summary;
    } catch {
      // Unreadable tasks are reported by load() when someone asks for them; a listing must not fail on one.
      return null;
    }
  }

  async readJournal(taskId: string, stream: JournalStream, from = 0, to?: number): Promise<unknown[]> {
    const raw = await this.files.readText(taskId, ENVELOPE_FILE);
    if (raw === null) return [];
    const record = parseRecord(taskId, raw);
    if (record.kind === 'tombstone') return [];
    const file = record.file;
    const total = parseCommitted(taskId, file.envelope).journal[stream];
    const prefix = await this.files.io(`read of task ${JSON.stringify(taskId)}`, () =>
      readPrefix(join(this.taskDirectory(taskId), `${stream}.jsonl`), file.offsets[stream]),
    );
    if (prefix === null) {
      // Erased between the two reads: like any erased task, it has no entries.
      const now = await this.files.readText(taskId, ENVELOPE_FILE);
      if (now !== null && isTombstoneText(now)) return [];
      throw new CorruptTaskError(taskId, `${stream}.jsonl is shorter than its committed length`);
    }
    const lines = prefix.toString('utf8').split('\n');
    // Committed text ends with a newline, so splitting leaves one empty string after the last entry.
    if (lines.pop() !== '' || lines.length !== total) {
      throw new CorruptTaskError(
        taskId,
        `${stream}.jsonl has ${lines.length} committed lines, the envelope counts ${total}`,
      );
    }
    return lines.slice(from, to).map((line, i) => {
      try {
        return JSON.parse(line) as unknown;
      } catch {
        throw new CorruptTaskError(taskId, `${stream}.jsonl line ${from + i + 1} is not JSON`);
      }
    });
  }

  /** Under the task's lock, so that no marker lands in a task being erased. */
  async quarantine(taskId: string, reason: string): Promise<void> {
    const text = `${JSON.stringify({ reason, at: Date.now() })}\n`;
    await this.files.enqueue(taskId, () =>
      this.files.io(`quarantine of task ${JSON.stringify(taskId)}`, async () => {
        const dir = this.taskDirectory(taskId);
        await this.files.ensureDirectory(dir);
        await withLockFile(join(dir, LOCK_FILE), this.files.lockOptions, async () => {
          const raw = await this.files.readText(taskId, ENVELOPE_FILE);
          if (raw !== null && isTombstoneText(raw)) throw erasedError(liveTombstone(parseRecord(taskId, raw)));
          await writeFileAtomic(join(dir, QUARANTINE_FILE), text);
        });
      }),
    );
  }

  async quarantined(taskId: string): Promise<string | null> {
    const raw = await this.files.readText(taskId, QUARANTINE_FILE);
    if (raw === null) return null;
    try {
      const { reason } = JSON.parse(raw) as { reason?: unknown };
      if (typeof reason === 'string') return reason;
    } catch {
      // fall through: fail closed
    }
    // A damaged record still means someone decided this task must not run.
    return 'the quarantine record is unreadable';
  }

  /** Waits for the writes this instance has started; the store stays usable afterwards. */
  async close(): Promise<void> {
    await this.files.settled();
  }

  // --- erasure and retention (fileEraser.ts) ----------------------------------------------------------------

  erase(taskId: string, request: EraseRequest): Promise<Tombstone> {
    return this.eraser.erase(taskId, request);
  }

  eraseUser(owner: TaskOwner, request: EraseRequest): Promise<UserErasure> {
    return this.eraser.eraseUser(owner, request);
  }

  tombstone(taskId: string): Promise<Tombstone | null> {
    return this.eraser.tombstone(taskId);
  }

  sweepRetention(now = Date.now(), options?: SweepOptions): Promise<RetentionReport> {
    return this.eraser.sweepRetention(now, options);
  }
}
