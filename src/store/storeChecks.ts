/** Checks every store applies the same way. */
import { AgentError } from '../errors.js';
import type { TaskSummary } from './envelope.js';
import type { ListQuery, SaveRequest } from './taskStore.js';

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

export function matchesQuery(summary: TaskSummary, query: ListQuery): boolean {
  if (query.states && !query.states.includes(summary.state)) return false;
  if (query.dueBefore !== undefined && (summary.wakeAt === null || summary.wakeAt > query.dueBefore)) return false;
  return true;
}
