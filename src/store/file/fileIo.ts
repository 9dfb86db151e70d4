/**
 * The durable file primitives the file store is built from: atomic replace, append-after-truncate for journals,
 * and an exclusive lock file for coordination between processes on one machine.
 */
import { randomBytes } from 'node:crypto';
import { type FileHandle, open, readFile, rename, rm, stat, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { CodedError } from '../../errorCodes.js';

/** The Node error code of a failed fs call, if any. */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** Flushes a directory's entries (new names, renames) to disk. */
export async function fsyncDirectory(path: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(path, 'r');
    await handle.sync();
  } catch (error) {
    // Some platforms (Windows) cannot open or fsync a directory; their renames are durable without it.
    if (!['EISDIR', 'EINVAL', 'EPERM', 'EACCES'].includes(errorCode(error) ?? '')) throw error;
  } finally {
    await handle?.close();
  }
}

/**
 * Replaces `path` with `text` so that readers and a crash see either the old or the new content, never a mix:
 * write a temp file in the same directory, fsync it, rename it over, fsync the directory.
 */
export async function writeFileAtomic(path: string, text: string): Promise<void> {
  const directory = dirname(path);
  const temp = join(directory, `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const handle = await open(temp, 'wx');
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => undefined);
    throw error;
  }
  await fsyncDirectory(directory);
}

/**
 * Cuts a journal file back to `committedBytes` (dropping lines a crashed save appended but never committed),
 * then appends `text` durably. Returns the new length in bytes, or null when the file is shorter than its
 * committed length (lost data, which the caller reports as corruption).
 */
export async function truncateAndAppend(path: string, committedBytes: number, text: string): Promise<number | null> {
  const handle = await open(path, 'a');
  try {
    const { size } = await handle.stat();
    if (size < committedBytes) return null;
    if (size > committedBytes) await handle.truncate(committedBytes);
    const bytes = Buffer.from(text, 'utf8');
    // Opened for append, so this lands at the (truncated) end; writeFile loops over partial writes.
    if (bytes.length > 0) await handle.writeFile(bytes);
    if (bytes.length > 0 || size > committedBytes) await handle.datasync();
    return committedBytes + bytes.length;
  } finally {
    await handle.close();
  }
}

/** The first `length` bytes of a file, or null when it is shorter (or missing while length > 0). */
export async function readPrefix(path: string, length: number): Promise<Buffer | null> {
  if (length === 0) return Buffer.alloc(0);
  let handle: FileHandle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return null;
    throw error;
  }
  try {
    const buffer = Buffer.alloc(length);
    let read = 0;
    while (read < length) {
      const { bytesRead } = await handle.read(buffer, read, length - read, read);
      if (bytesRead === 0) return null;
      read += bytesRead;
    }
    return buffer;
  } finally {
    await handle.close();
  }
}

/** How `withLockFile` waits and when it breaks a lock left by a dead holder. */
export interface LockOptions {
  /** Give up waiting for the lock after this long. */
  timeoutMs: number;
  /** A lock file older than this is left over from a crashed holder and is broken. */
  staleMs: number;
}

/** Who holds a lock file, as written into it. */
interface LockOwner {
  pid: number;
  host: string;
  token: string;
  at: number;
}

/** Thrown by `withLockFile` when the lock stays held past the timeout. */
export class LockTimeoutError extends Error implements CodedError<'lock_timeout'> {
  readonly code = 'lock_timeout' as const;
  constructor(
    readonly path: string,
    readonly holder: string,
  ) {
    super(`lock ${path} is still held by ${holder}`);
    this.name = new.target.name;
  }
}

/**
 * Runs `work` while holding an exclusive lock file (created with O_EXCL). Waits with jittered retries; breaks a
 * lock whose holder process is gone (same host) or that is older than `staleMs`.
 */
export async function withLockFile<T>(path: string, options: LockOptions, work: () => Promise<T>): Promise<T> {
  const owner: LockOwner = {
    pid: process.pid,
    host: hostname(),
    token: randomBytes(8).toString('hex'),
    at: Date.now(),
  };
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    if (await tryCreateLock(path, owner)) break;
    const holder = await inspectLock(path, options.staleMs);
    if (holder === null) continue;
    if (holder.stale) {
      await breakLock(path, holder.identity);
      continue;
    }
    if (Date.now() >= deadline) throw new LockTimeoutError(path, holder.description);
    await delay(5 + Math.floor(Math.random() * 20));
  }
  try {
    return await work();
  } finally {
    await releaseLock(path, owner.token);
  }
}

/** Creates the lock file with O_EXCL; false when it exists. */
async function tryCreateLock(path: string, owner: LockOwner): Promise<boolean> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'wx');
  } catch (error) {
    if (errorCode(error) === 'EEXIST') return false;
    throw error;
  }
  try {
    await handle.writeFile(JSON.stringify(owner), 'utf8');
  } catch (error) {
    // An ownerless lock would block everyone until it goes stale.
    await handle.close().catch(() => undefined);
    await unlink(path).catch(() => undefined);
    throw error;
  }
  await handle.close();
  return true;
}

/** The current holder of a lock file, or null when it was released in the meantime. */
async function inspectLock(path: string, staleMs: number) {
  let info;
  let text: string;
  try {
    info = await stat(path);
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return null;
    throw error;
  }
  const identity = `${info.ino}:${info.mtimeMs}`;
  const owner = parseOwner(text);
  const description = owner ? `process ${owner.pid} on ${owner.host}` : 'an unknown process';
  if (Date.now() - info.mtimeMs > staleMs) return { stale: true, identity, description };
  return { stale: owner !== null && owner.host === hostname() && !isAlive(owner.pid), identity, description };
}

/** Removes a stale lock, unless it changed since it was judged stale (another waiter broke and retook it). */
async function breakLock(path: string, identity: string): Promise<void> {
  try {
    const info = await stat(path);
    if (`${info.ino}:${info.mtimeMs}` === identity) await unlink(path);
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw error;
  }
}

async function releaseLock(path: string, token: string): Promise<void> {
  try {
    // If our lock was broken as stale, the file is someone else's now: leave it.
    if (parseOwner(await readFile(path, 'utf8'))?.token === token) await unlink(path);
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw error;
  }
}

function parseOwner(text: string): LockOwner | null {
  try {
    const value = JSON.parse(text) as Partial<LockOwner>;
    return typeof value.pid === 'number' && typeof value.host === 'string' && typeof value.token === 'string'
      ? (value as LockOwner)
      : null;
  } catch {
    // Empty or half-written: the holder is between creating and writing it.
    return null;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return errorCode(error) === 'EPERM';
  }
}
