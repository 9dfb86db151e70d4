/**
 * The embedded default store: plain files under one directory, crash-safe, no server.
 *
 * Layout, one subdirectory per task (named by `taskDirectoryName`, which never escapes the root):
 * - `envelope.json`: `{ format, offsets, envelope }`, replaced atomically. `offsets` are the committed byte
 *   lengths of the journals, committed in the same rename as the envelope that counts their lines.
 * - `audit.jsonl`, `transcript.jsonl`: one JSON entry per line, append-only.
 * - `quarantine.json`: the reason a task must not be restored, when it has one.
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
 */
import { mkdir, readFile, readdir } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { z } from 'zod';
import {
  AgentError,
  CorruptTaskError,
  RevisionConflictError,
  StoreUnavailableError,
  TaskExistsError,
} from '../../errors.js';
import { type TaskEnvelope, type TaskSummary, parseEnvelope } from '../envelope.js';
import {
  LockTimeoutError,
  errorCode,
  fsyncDirectory,
  readPrefix,
  truncateAndAppend,
  withLockFile,
  writeFileAtomic,
} from './fileIo.js';
import { checkSaveRequest, matchesQuery } from '../storeChecks.js';
import type { JournalStream, ListQuery, SaveRequest, TaskStore } from '../taskStore.js';

const FORMAT = 'file-task/1';
const ENVELOPE_FILE = 'envelope.json';
const QUARANTINE_FILE = 'quarantine.json';
const LOCK_FILE = '.lock';
const STREAMS: readonly JournalStream[] = ['audit', 'transcript'];

/** Tuning of the cross-process lock; the defaults suit a demo and a single host. */
export interface FileStoreOptions {
  /** How long a save waits for another process's lock on the same task before StoreUnavailableError. */
  lockTimeoutMs?: number;
  /** A lock file older than this is considered left by a crashed process and is broken. */
  staleLockMs?: number;
}

const count = z.number().int().nonnegative();
const taskFileSchema = z.object({
  format: z.literal(FORMAT),
  offsets: z.object({ audit: count, transcript: count }),
  envelope: z.unknown(),
});
/** Just what a save and a journal read need, so they work on envelopes `parseEnvelope` would refuse. */
const committedSchema = z.object({
  taskId: z.string(),
  revision: z.number().int().positive(),
  journal: z.object({ audit: count, transcript: count }),
});

type TaskFile = z.infer<typeof taskFileSchema>;
type Committed = z.infer<typeof committedSchema>;

/**
 * The directory name of a task: a readable, sanitized prefix plus a hash of the exact id. Only `[A-Za-z0-9_-]`
 * survive in the prefix, so '/', '..' and '.' can never form a path, and the hash keeps ids distinct even on
 * case-insensitive file systems and when the prefix is cut.
 */
export function taskDirectoryName(taskId: string): string {
  const readable = taskId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 48) || '_';
  return `${readable}~${createHash('sha256').update(taskId, 'utf8').digest('hex').slice(0, 32)}`;
}

/**
 * A TaskStore on the local file system. Creates `directory` on the first write.
 *
 * @example
 * const store = new FileStore('./.agent-tasks');
 * await store.save({ envelope, expectedRevision: 0, append: { audit, transcript } });
 */
export class FileStore implements TaskStore {
  readonly kind = 'file';
  /** Absolute path of the root directory. */
  readonly directory: string;
  private readonly lockOptions: { timeoutMs: number; staleMs: number };
  /** Per task: the tail of this instance's save queue (never rejects). */
  private readonly queues = new Map<string, Promise<void>>();
  private readonly inFlight = new Set<Promise<void>>();

  constructor(directory: string, options: FileStoreOptions = {}) {
    this.directory = resolve(directory);
    this.lockOptions = { timeoutMs: options.lockTimeoutMs ?? 10_000, staleMs: options.staleLockMs ?? 30_000 };
  }

  /** Absolute path of a task's directory. */
  taskDirectory(taskId: string): string {
    return join(this.directory, taskDirectoryName(taskId));
  }

  async load(taskId: string): Promise<TaskEnvelope | null> {
    const raw = await this.readText(taskId, ENVELOPE_FILE);
    return raw === null ? null : parseEnvelope(taskId, parseTaskFile(taskId, raw).envelope);
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
    return this.enqueue(taskId, () =>
      this.io(`save of task ${JSON.stringify(taskId)}`, async () => {
        const dir = this.taskDirectory(taskId);
        await this.ensureDirectory(dir);
        await withLockFile(join(dir, LOCK_FILE), this.lockOptions, () => this.saveLocked(request, lines, envelopeText));
      }),
    );
  }

  private async saveLocked(request: SaveRequest, lines: Record<JournalStream, string>, envelopeText: string) {
    const { envelope, expectedRevision } = request;
    const { taskId } = envelope;
    const raw = await this.readText(taskId, ENVELOPE_FILE);
    if (expectedRevision === 0 && raw !== null) throw new TaskExistsError(taskId);
    let file: TaskFile | null = null;
    let committed: Committed = { taskId, revision: 0, journal: { audit: 0, transcript: 0 } };
    if (raw !== null) {
      file = parseTaskFile(taskId, raw);
      committed = parseCommitted(taskId, file.envelope);
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
    const text = `{"format":${JSON.stringify(FORMAT)},"offsets":${JSON.stringify(offsets)},"envelope":${envelopeText}}\n`;
    await writeFileAtomic(join(dir, ENVELOPE_FILE), text);
  }

  async list(query: ListQuery = {}): Promise<TaskSummary[]> {
    let entries;
    try {
      entries = await readdir(this.directory, { withFileTypes: true });
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return [];
      throw new StoreUnavailableError(`cannot list ${this.directory}: ${(error as Error).message}`, { cause: error });
    }
    const names = entries.filter((e) => e.isDirectory() && e.name.includes('~')).map((e) => e.name);
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
      const file = parseTaskFile(name, raw);
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
    const raw = await this.readText(taskId, ENVELOPE_FILE);
    if (raw === null) return [];
    const file = parseTaskFile(taskId, raw);
    const total = parseCommitted(taskId, file.envelope).journal[stream];
    const prefix = await this.io(`read of task ${JSON.stringify(taskId)}`, () =>
      readPrefix(join(this.taskDirectory(taskId), `${stream}.jsonl`), file.offsets[stream]),
    );
    if (prefix === null) throw new CorruptTaskError(taskId, `${stream}.jsonl is shorter than its committed length`);
    const lines = prefix.toString('utf8').split('\n');
    // Committed text ends with a newline, so splitting leaves one empty string after the last entry.
    if (lines.pop() !== '' || lines.length !== total) {
      throw new CorruptTaskError(taskId, `${stream}.jsonl has ${lines.length} committed lines, the envelope counts ${total}`);
    }
    return lines.slice(from, to).map((line, i) => {
      try {
        return JSON.parse(line) as unknown;
      } catch {
        throw new CorruptTaskError(taskId, `${stream}.jsonl line ${from + i + 1} is not JSON`);
      }
    });
  }

  async quarantine(taskId: string, reason: string): Promise<void> {
    await this.io(`quarantine of task ${JSON.stringify(taskId)}`, async () => {
      const dir = this.taskDirectory(taskId);
      await this.ensureDirectory(dir);
      await writeFileAtomic(join(dir, QUARANTINE_FILE), `${JSON.stringify({ reason, at: Date.now() })}\n`);
    });
  }

  async quarantined(taskId: string): Promise<string | null> {
    const raw = await this.readText(taskId, QUARANTINE_FILE);
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

  /** Waits for the saves this instance has started; the store stays usable afterwards. */
  async close(): Promise<void> {
    await Promise.all([...this.inFlight]);
  }

  private enqueue(taskId: string, work: () => Promise<void>): Promise<void> {
    const run = (this.queues.get(taskId) ?? Promise.resolve()).then(work);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(taskId, tail);
    this.inFlight.add(tail);
    void tail.then(() => {
      this.inFlight.delete(tail);
      if (this.queues.get(taskId) === tail) this.queues.delete(taskId);
    });
    return run;
  }

  private async ensureDirectory(dir: string): Promise<void> {
    const created = await mkdir(dir, { recursive: true });
    if (created === undefined) return;
    // Make the new directory entries durable: the task's in the root, and the root's if we made it too.
    await fsyncDirectory(this.directory);
    if (created !== dir) await fsyncDirectory(dirname(this.directory));
  }

  /** A task file's text, or null when it does not exist. */
  private readText(taskId: string, name: string): Promise<string | null> {
    return this.io(`read of task ${JSON.stringify(taskId)}`, async () => {
      try {
        return await readFile(join(this.taskDirectory(taskId), name), 'utf8');
      } catch (error) {
        if (errorCode(error) === 'ENOENT') return null;
        throw error;
      }
    });
  }

  /** Runs file work, passing the store's own errors through and reporting any other failure as unavailability. */
  private async io<T>(what: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof AgentError) throw error;
      if (error instanceof LockTimeoutError) {
        throw new StoreUnavailableError(`${what} timed out waiting for a lock held by ${error.holder}`, { cause: error });
      }
      throw new StoreUnavailableError(`${what} failed in ${this.directory}: ${(error as Error).message}`, { cause: error });
    }
  }
}

function parseTaskFile(taskId: string, raw: string): TaskFile {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    throw new CorruptTaskError(taskId, `${ENVELOPE_FILE} is not JSON (${(error as Error).message})`);
  }
  const parsed = taskFileSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const at = issue.path.join('.') || '(root)';
    throw new CorruptTaskError(taskId, `${ENVELOPE_FILE} is not a file-store task record (at ${at}: ${issue.message})`);
  }
  return parsed.data;
}

function parseCommitted(taskId: string, envelope: unknown): Committed {
  const parsed = committedSchema.safeParse(envelope);
  if (!parsed.success) throw new CorruptTaskError(taskId, 'the stored envelope has no valid revision and journal lengths');
  // A record copied over from another task must not be extended as if it were this one.
  if (parsed.data.taskId !== taskId) {
    throw new CorruptTaskError(taskId, `the stored envelope belongs to task ${JSON.stringify(parsed.data.taskId)}`);
  }
  return parsed.data;
}

function encodeJson(taskId: string, what: string, value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new AgentError('invalid_save', `save of task ${taskId}: ${what} is not JSON (${(error as Error).message})`);
  }
  if (text === undefined) throw new AgentError('invalid_save', `save of task ${taskId}: ${what} is not JSON`);
  return text;
}

/** One line per entry; JSON.stringify escapes every newline inside a value, so lines split back exactly. */
function encodeLines(taskId: string, entries: unknown[]): string {
  return entries.map((entry, i) => `${encodeJson(taskId, `journal entry ${i}`, entry)}\n`).join('');
}
