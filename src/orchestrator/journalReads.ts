/**
 * Reading a task's journals for the host: what is durable, after the task's in-flight save (if it runs here) so a
 * reader sees every entry of the state it is told about.
 */
import type { AuditEntry, TranscriptEntry } from '../../machines/journal.js';
import { HostRequestError, TaskNotFoundError } from '../errors.js';
import type { TaskStore } from '../store/taskStore.js';
import type { LiveTasks } from './liveTasks.js';
import type { AuditRecord } from './status.js';

async function journal(
  live: LiveTasks,
  store: TaskStore,
  taskId: string,
  stream: 'audit' | 'transcript',
  from = 0,
): Promise<unknown[]> {
  await live
    .get(taskId)
    ?.barrier()
    .catch(() => {});
  const envelope = await store.load(taskId);
  if (!envelope) throw new TaskNotFoundError(taskId);
  const to = envelope.journal[stream];
  return from >= to ? [] : store.readJournal(taskId, stream, from, to);
}

/** The audit from `from` on, each record with its `seq`. */
export async function auditRecords(
  live: LiveTasks,
  store: TaskStore,
  taskId: string,
  from: number,
): Promise<AuditRecord[]> {
  if (!Number.isInteger(from) || from < 0)
    throw new HostRequestError('invalid_request', `audit: from must be a whole number (0 or more), not ${from}`);
  const entries = (await journal(live, store, taskId, 'audit', from)) as AuditEntry[];
  return entries.map((entry, i) => ({ seq: from + i, ...entry }));
}

export async function transcriptEntries(live: LiveTasks, store: TaskStore, taskId: string): Promise<TranscriptEntry[]> {
  return (await journal(live, store, taskId, 'transcript')) as TranscriptEntry[];
}
