/** Checks every store applies the same way. */
import { AgentError } from '../errors.js';
import type { TaskSummary } from './envelope.js';
import type { ListQuery, SaveRequest, TaskStore } from './taskStore.js';

/** Refuses a save request that is inconsistent in itself (a caller bug, not a conflict). */
export function checkSaveRequest({ envelope, expectedRevision }: SaveRequest): void {
  if (envelope.revision !== expectedRevision + 1) {
    throw new AgentError(
      'invalid_save',
      `save of task ${envelope.taskId}: revision ${envelope.revision} must be expectedRevision + 1 (${expectedRevision + 1})`,
    );
  }
  if (envelope.summary.taskId !== envelope.taskId || envelope.summary.revision !== envelope.revision) {
    throw new AgentError('invalid_save', `save of task ${envelope.taskId}: the summary does not match the envelope`);
  }
}

/** Refuses a save that would give a task another owner (the per-user index, and erasure by user, rely on it). */
export function checkSameOwner(
  taskId: string,
  previous: { tenantId: string; userId: string },
  next: TaskSummary,
): void {
  if (previous.tenantId !== next.tenantId || previous.userId !== next.userId) {
    throw new AgentError(
      'invalid_save',
      `save of task ${taskId}: it belongs to another user; a task's owner never changes`,
    );
  }
}

export function matchesQuery(summary: TaskSummary, query: ListQuery): boolean {
  if (query.states && !query.states.includes(summary.state)) return false;
  if (query.owner && (summary.tenantId !== query.owner.tenantId || summary.userId !== query.owner.userId)) return false;
  if (query.dueBefore !== undefined && (summary.wakeAt === null || summary.wakeAt > query.dueBefore)) return false;
  return true;
}

/**
 * True when `store`'s `load` and `quarantined` are those of `base` (its class's own): a subclass or an object that
 * replaces either must have its reads made by them, not by `acquireAndRead`.
 */
export function readsAreOwn(
  store: Pick<TaskStore, 'load' | 'quarantined'>,
  base: Pick<TaskStore, 'load' | 'quarantined'>,
): boolean {
  return store.load === base.load && store.quarantined === base.quarantined;
}
