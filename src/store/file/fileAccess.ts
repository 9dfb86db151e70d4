/**
 * How the file store touches one task's files: where they live, this instance's per-task queue of writes, the
 * lock options every write takes the task's lock file with, reads of a task file, and the mapping of file-system
 * failures to StoreUnavailableError. Shared by the store core (`fileStore.ts`) and erasure (`fileEraser.ts`).
 */
import { mkdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { AgentError, StoreUnavailableError } from '../../errors.js';
import { type LockOptions, LockTimeoutError, errorCode, fsyncDirectory } from './fileIo.js';
import { taskDirectoryName } from './fileRecords.js';

export class FileAccess {
  /** Per task: the tail of this instance's queue of writes (never rejects). */
  private readonly queues = new Map<string, Promise<void>>();
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    /** Absolute path of the root directory. */
    readonly directory: string,
    readonly lockOptions: LockOptions,
  ) {}

  /** Absolute path of a task's directory. */
  taskDirectory(taskId: string): string {
    return join(this.directory, taskDirectoryName(taskId));
  }

  /** Waits for the writes this instance has started. */
  async settled(): Promise<void> {
    await Promise.all([...this.inFlight]);
  }

  enqueue<T>(taskId: string, work: () => Promise<T>): Promise<T> {
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

  async ensureDirectory(dir: string): Promise<void> {
    const created = await mkdir(dir, { recursive: true });
    if (created === undefined) return;
    // Make the new directory entries durable: the task's in the root, and the root's if we made it too.
    await fsyncDirectory(this.directory);
    if (created !== dir) await fsyncDirectory(dirname(this.directory));
  }

  /** A task file's text, or null when it does not exist. */
  readText(taskId: string, name: string): Promise<string | null> {
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
  async io<T>(what: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof AgentError) throw error;
      if (error instanceof LockTimeoutError) {
        throw new StoreUnavailableError(`${what} timed out waiting for a lock held by ${error.holder}`, {
          cause: error,
        });
      }
      throw new StoreUnavailableError(`${what} failed in ${this.directory}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }
}
