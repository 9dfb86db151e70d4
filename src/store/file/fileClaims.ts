/**
 * Mandate claims of the file store: a mandate authorises one task. A claim is a file under `mandates/` named after
 * the mandate id, holding the task id; it is created with link(2), which fails when the name exists, so of two
 * claims of one mandate (in any process on the machine) exactly one gets it, and a reader never sees half a claim.
 * The task's directory holds the other direction (`mandate.json`: which mandate the task holds), so that its
 * erasure finds the claim and removes it before it removes the task's other files; an erasure a crash interrupted
 * is completed with it, as the rest of the task's files are. Every change holds the task's lock.
 *
 * A process that dies between the claim and the pointer leaves a claim its task's erasure does not find; a retried
 * start of the same task writes the pointer.
 */
import { createHash, randomBytes } from 'node:crypto';
import { link, readFile, rmdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { MandateUsedError, StoreUnavailableError, TaskExistsError } from '../../errors.js';
import type { FileAccess } from './fileAccess.js';
import { errorCode, fsyncDirectory, withLockFile, writeFileAtomic } from './fileIo.js';
import { LOCK_FILE } from './fileRecords.js';
import { entriesOf } from './fileScan.js';

/** The directory of claims, beside the task directories (whose names all hold "~", so a scan never takes it). */
export const CLAIMS_DIRECTORY = 'mandates';
/** In a task's directory: the mandate it holds. */
export const MANDATE_FILE = 'mandate.json';
const CLAIM_FORMAT = 'file-mandate-claim/1';
const POINTER_FORMAT = 'file-mandate-of/1';

export class FileClaims {
  constructor(private readonly files: FileAccess) {}

  claim(mandateId: string, taskId: string): Promise<'claimed' | 'held'> {
    const dir = this.files.taskDirectory(taskId);
    return this.files.enqueue(taskId, () =>
      this.files.io(`claim of mandate ${JSON.stringify(mandateId)} for task ${JSON.stringify(taskId)}`, async () => {
        await this.files.ensureDirectory(dir);
        try {
          return await withLockFile(join(dir, LOCK_FILE), this.files.lockOptions, async () => {
            const pointer = await readPointer(dir);
            if (pointer !== null && pointer !== mandateId) throw new TaskExistsError(taskId);
            const outcome = await this.create(mandateId, taskId);
            if (pointer === null)
              await writeFileAtomic(
                join(dir, MANDATE_FILE),
                `${JSON.stringify({ format: POINTER_FORMAT, mandateId })}\n`,
              );
            return outcome;
          });
        } catch (error) {
          // A refused claim leaves no directory for a task that was never stored (only an empty one is removed).
          await rmdir(dir).catch(() => undefined);
          throw error;
        }
      }),
    );
  }

  release(mandateId: string, taskId: string): Promise<void> {
    const dir = this.files.taskDirectory(taskId);
    return this.files.enqueue(taskId, () =>
      this.files.io(`release of mandate ${JSON.stringify(mandateId)} by task ${JSON.stringify(taskId)}`, async () => {
        if ((await entriesOf(dir)).length === 0 && (await this.holder(mandateId)) !== taskId) return;
        await this.files.ensureDirectory(dir);
        const emptied = await withLockFile(join(dir, LOCK_FILE), this.files.lockOptions, async () => {
          if ((await this.holder(mandateId)) === taskId) await this.remove(mandateId);
          if ((await readPointer(dir)) === mandateId) {
            await unlink(join(dir, MANDATE_FILE));
            await fsyncDirectory(dir);
          }
          return (await entriesOf(dir)).every((name) => name === LOCK_FILE);
        });
        // A start that never happened leaves no directory (after the lock file is gone; a save meanwhile keeps it).
        if (emptied) await rmdir(dir).catch(() => undefined);
      }),
    );
  }

  /**
   * Under the task's lock, during its erasure: removes the claim of the mandate the task holds. Its pointer goes
   * with the task's other files afterwards.
   */
  async releaseHeldBy(taskId: string, dir: string): Promise<void> {
    const mandateId = await readPointer(dir).catch(() => null);
    if (mandateId !== null && (await this.holder(mandateId)) === taskId) await this.remove(mandateId);
  }

  /** Creates the claim unless one exists: whose it is decides. */
  private async create(mandateId: string, taskId: string): Promise<'claimed' | 'held'> {
    const claims = join(this.files.directory, CLAIMS_DIRECTORY);
    await this.files.ensureDirectory(claims);
    const path = this.path(mandateId);
    const temp = join(claims, `.${randomBytes(8).toString('hex')}.tmp`);
    await writeFileAtomic(temp, `${JSON.stringify({ format: CLAIM_FORMAT, mandateId, taskId })}\n`);
    try {
      await link(temp, path);
    } catch (error) {
      if (errorCode(error) !== 'EEXIST') throw error;
      const holder = await this.holder(mandateId);
      if (holder === taskId) return 'held';
      throw new MandateUsedError(mandateId, taskId);
    } finally {
      await unlink(temp).catch(() => undefined);
    }
    await fsyncDirectory(claims);
    return 'claimed';
  }

  /** The task holding the mandate, or null. */
  private async holder(mandateId: string): Promise<string | null> {
    let raw: string;
    try {
      raw = await readFile(this.path(mandateId), 'utf8');
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return null;
      throw error;
    }
    const record = parse(raw);
    if (record?.format !== CLAIM_FORMAT || record.mandateId !== mandateId || typeof record.taskId !== 'string') {
      throw new StoreUnavailableError(
        `the claim of mandate ${JSON.stringify(mandateId)} (${this.path(mandateId)}) is unreadable`,
      );
    }
    return record.taskId;
  }

  private async remove(mandateId: string): Promise<void> {
    await unlink(this.path(mandateId)).catch((error: unknown) => {
      if (errorCode(error) !== 'ENOENT') throw error;
    });
    await fsyncDirectory(join(this.files.directory, CLAIMS_DIRECTORY));
  }

  /** Named by a hash of the mandate id: any id maps to one safe file name. */
  private path(mandateId: string): string {
    return join(
      this.files.directory,
      CLAIMS_DIRECTORY,
      `${createHash('sha256').update(mandateId, 'utf8').digest('hex').slice(0, 40)}.json`,
    );
  }
}

/** The mandate a task directory's pointer names, or null when it has none. */
async function readPointer(dir: string): Promise<string | null> {
  let raw: string;
  try {
    raw = await readFile(join(dir, MANDATE_FILE), 'utf8');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return null;
    throw error;
  }
  const record = parse(raw);
  if (record?.format !== POINTER_FORMAT || typeof record.mandateId !== 'string')
    throw new StoreUnavailableError(`${join(dir, MANDATE_FILE)} is unreadable`);
  return record.mandateId;
}

function parse(raw: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(raw) as unknown;
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
