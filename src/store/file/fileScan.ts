/**
 * What erasure by user and the retention sweep of the file store read from disk: every task directory's record,
 * as `list` reads them (there is no index to keep in step), and the directory helpers an erasure deletes with.
 */
import { readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { CorruptTaskError, StoreUnavailableError } from '../../errors.js';
import type { Tombstone } from '../erasure.js';
import { errorCode, fsyncDirectory } from './fileIo.js';
import {
  ENVELOPE_FILE,
  LOCK_FILE,
  type SummaryFields,
  type TaskRecord,
  parseRecord,
  summaryFields,
  taskDirectoryName,
} from './fileRecords.js';

/** What a scan found in one task directory. */
export type Scanned =
  | { kind: 'task'; name: string; taskId: string; summary: SummaryFields }
  | { kind: 'tombstone'; name: string; tombstone: Tombstone; remains: boolean }
  | { kind: 'unreadable'; name: string }
  | { kind: 'empty'; name: string };

/** Every task directory under `root`, read with bounded parallelism (thousands must not exhaust descriptors). */
export async function scanTasks(root: string): Promise<Scanned[]> {
  const names = await taskDirectoryNames(root);
  const found: Scanned[] = [];
  for (let i = 0; i < names.length; i += 32)
    found.push(...(await Promise.all(names.slice(i, i + 32).map((name) => scanOne(root, name)))));
  return found;
}

async function scanOne(root: string, name: string): Promise<Scanned> {
  const dir = join(root, name);
  let raw: string;
  try {
    raw = await readFile(join(dir, ENVELOPE_FILE), 'utf8');
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') return { kind: 'unreadable', name };
    // No record: journals a first save appended before a crash can still hold someone's data.
    const names = await entriesOf(dir);
    return names.some((n) => n.endsWith('.jsonl') || n.endsWith('.tmp'))
      ? { kind: 'unreadable', name }
      : { kind: 'empty', name };
  }
  const record = readRecordLeniently(name, raw, true);
  if (record === 'unreadable') return { kind: 'unreadable', name };
  if (record.kind === 'tombstone') {
    // A record copied into another task's directory is not that task's.
    if (taskDirectoryName(record.tombstone.taskId) !== name) return { kind: 'unreadable', name };
    const remains = (await entriesOf(dir)).some((n) => n !== ENVELOPE_FILE && n !== LOCK_FILE);
    return { kind: 'tombstone', name, tombstone: record.tombstone, remains };
  }
  const fields = summaryFields(record.file.envelope);
  if (!fields || taskDirectoryName(fields.taskId) !== name) return { kind: 'unreadable', name };
  return { kind: 'task', name, taskId: fields.taskId, summary: fields.summary };
}

/** Names of the task directories under `root` (none when it does not exist yet). */
export async function taskDirectoryNames(root: string): Promise<string[]> {
  let entries;
  try {
    entries = await readdir(root, { withFileTypes: true });
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return [];
    throw new StoreUnavailableError(`cannot list ${root}: ${(error as Error).message}`, { cause: error });
  }
  return entries.filter((e) => e.isDirectory() && e.name.includes('~')).map((e) => e.name);
}

/** The record, or 'unreadable': an erasure must go ahead on a record nobody can parse. */
export function readRecordLeniently(taskId: string, raw: string, scanned = false): TaskRecord | 'unreadable' {
  try {
    return parseRecord(taskId, raw, scanned);
  } catch (error) {
    if (error instanceof CorruptTaskError) return 'unreadable';
    throw error;
  }
}

/** Names in a directory; none when it does not exist. */
export async function entriesOf(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (error) {
    if (errorCode(error) === 'ENOENT' || errorCode(error) === 'ENOTDIR') return [];
    throw error;
  }
}

/** Deletes everything in a task directory but its record and its lock, durably. */
export async function removeRemains(dir: string): Promise<void> {
  const names = (await entriesOf(dir)).filter((name) => name !== ENVELOPE_FILE && name !== LOCK_FILE);
  for (const name of names) await rm(join(dir, name), { recursive: true, force: true });
  if (names.length > 0) await fsyncDirectory(dir);
}

/** Entries of a journal file as stored (a last line without its newline, left by a crash, counts too); 0 when missing. */
export async function countLines(path: string): Promise<number> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return 0;
    throw error;
  }
  let lines = 0;
  for (let at = bytes.indexOf(0x0a); at !== -1; at = bytes.indexOf(0x0a, at + 1)) lines += 1;
  return bytes.length > 0 && bytes[bytes.length - 1] !== 0x0a ? lines + 1 : lines;
}
