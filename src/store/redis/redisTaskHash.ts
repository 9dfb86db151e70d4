/** The envelope as a task hash keeps it: the `envelope` field, checked against the `revision` field beside it. */
import { CorruptTaskError } from '../../errors.js';
import { type TaskEnvelope, parseEnvelope } from '../envelope.js';

/**
 * The envelope from the two fields of `key` (null or undefined when absent): null when the task has none, or
 * CorruptTaskError when only the revision is there or the two disagree.
 */
export function envelopeOfHash(
  taskId: string,
  key: string,
  envelope: string | null | undefined,
  revision: string | null | undefined,
): TaskEnvelope | null {
  if (envelope === null || envelope === undefined) {
    if (revision !== null && revision !== undefined)
      throw new CorruptTaskError(taskId, `Redis key ${key} has a revision but no envelope`);
    return null;
  }
  const parsed = parseEnvelope(taskId, envelope);
  if (String(parsed.revision) !== revision) {
    throw new CorruptTaskError(taskId, `the envelope is at revision ${parsed.revision} but ${key} records ${revision}`);
  }
  return parsed;
}
