/**
 * The file store's task record (`envelope.json`) in its two forms: a live task `{ format: "file-task/1", offsets,
 * envelope }`, or, once the task is erased, its tombstone `{ format: "file-tombstone/1", tombstone }`. Replacing
 * the one by the other in a single rename is what makes an erasure atomic for every reader.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { AgentError, CorruptTaskError } from '../../errors.js';
import { type Tombstone, erasedError, parseTombstone } from '../erasure.js';

export const TASK_FORMAT = 'file-task/1';
export const TOMBSTONE_FORMAT = 'file-tombstone/1';
export const ENVELOPE_FILE = 'envelope.json';
export const QUARANTINE_FILE = 'quarantine.json';
export const LOCK_FILE = '.lock';

/**
 * The directory name of a task: a readable, sanitized prefix plus a hash of the exact id. Only `[A-Za-z0-9_-]`
 * survive in the prefix, so '/', '..' and '.' can never form a path, and the hash keeps ids distinct even on
 * case-insensitive file systems and when the prefix is cut.
 */
export function taskDirectoryName(taskId: string): string {
  const readable = taskId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 48) || '_';
  return `${readable}~${createHash('sha256').update(taskId, 'utf8').digest('hex').slice(0, 32)}`;
}

const count = z.number().int().nonnegative();
const taskFileSchema = z.object({
  format: z.literal(TASK_FORMAT),
  offsets: z.object({ audit: count, transcript: count }),
  envelope: z.unknown(),
});
/** Just what a save and a journal read need, so they work on envelopes `parseEnvelope` would refuse. */
const committedSchema = z.object({
  taskId: z.string(),
  revision: z.number().int().positive(),
  journal: z.object({ audit: count, transcript: count }),
});
/** Just what the owner check, erasure by user and retention read from an envelope's summary. */
const summaryFieldsSchema = z.object({
  taskId: z.string(),
  summary: z.object({ tenantId: z.string(), userId: z.string(), state: z.string(), updatedAt: z.number() }),
});

export type TaskFile = z.infer<typeof taskFileSchema>;
export type Committed = z.infer<typeof committedSchema>;
export type SummaryFields = z.infer<typeof summaryFieldsSchema>['summary'];

export type TaskRecord = { kind: 'task'; file: TaskFile } | { kind: 'tombstone'; tombstone: Tombstone };

/**
 * The record in `envelope.json`; CorruptTaskError when it is neither form. `taskId` names the task in errors (and a
 * tombstone must be that task's), or is the directory name when scanning (`scanned`: the caller checks whose it is).
 */
export function parseRecord(taskId: string, raw: string, scanned = false): TaskRecord {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    throw new CorruptTaskError(taskId, `${ENVELOPE_FILE} is not JSON (${(error as Error).message})`);
  }
  if ((value as { format?: unknown } | null)?.format === TOMBSTONE_FORMAT) {
    return {
      kind: 'tombstone',
      tombstone: parseTombstone(taskId, (value as { tombstone?: unknown }).tombstone, !scanned),
    };
  }
  const parsed = taskFileSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const at = issue.path.join('.') || '(root)';
    throw new CorruptTaskError(taskId, `${ENVELOPE_FILE} is not a file-store task record (at ${at}: ${issue.message})`);
  }
  return { kind: 'task', file: parsed.data };
}

/** The live task's file of a record; TaskErasedError for a tombstone. */
export function liveTaskFile(record: TaskRecord): TaskFile {
  if (record.kind === 'tombstone') throw erasedError(record.tombstone);
  return record.file;
}

export function liveTombstone(record: TaskRecord): Tombstone {
  if (record.kind !== 'tombstone') throw new AgentError('internal_error', 'expected a tombstone record');
  return record.tombstone;
}

/** Whether `raw` is a tombstone record, without failing on anything else (a quarantine must work on corrupt tasks). */
export function isTombstoneText(raw: string): boolean {
  try {
    return (JSON.parse(raw) as { format?: unknown } | null)?.format === TOMBSTONE_FORMAT;
  } catch {
    return false;
  }
}

export function tombstoneRecordText(tombstone: Tombstone): string {
  return `{"format":${JSON.stringify(TOMBSTONE_FORMAT)},"tombstone":${JSON.stringify(tombstone)}}\n`;
}

export function parseCommitted(taskId: string, envelope: unknown): Committed {
  const parsed = committedSchema.safeParse(envelope);
  if (!parsed.success)
    throw new CorruptTaskError(taskId, 'the stored envelope has no valid revision and journal lengths');
  // A record copied over from another task must not be extended as if it were this one.
  if (parsed.data.taskId !== taskId) {
    throw new CorruptTaskError(taskId, `the stored envelope belongs to task ${JSON.stringify(parsed.data.taskId)}`);
  }
  return parsed.data;
}

/** The task id and summary fields of a stored envelope, or null when they cannot be read. */
export function summaryFields(envelope: unknown): { taskId: string; summary: SummaryFields } | null {
  const parsed = summaryFieldsSchema.safeParse(envelope);
  return parsed.success ? parsed.data : null;
}

export function encodeJson(taskId: string, what: string, value: unknown): string {
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
export function encodeLines(taskId: string, entries: unknown[]): string {
  return entries.map((entry, i) => `${encodeJson(taskId, `journal entry ${i}`, entry)}\n`).join('');
}
