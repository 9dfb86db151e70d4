/**
 * Whose session an audit entry names (`journal.ts` stamps every entry with it).
 */
import type { MachineEvent } from '../actors.js';
import type { AgentContext } from '../context.js';

/** The event types the host API forwards for a caller (a literal in the function would be a new RegExp per entry). */
const FORWARDED = /^(user|review|operator)\./;

/**
 * The session behind an entry: the task's own, except for an event the host API forwards for a caller (a user, an
 * approver, a reviewer, an administrator), which names its caller's (none, if the caller named none).
 */
export function sessionOf(context: AgentContext, event: MachineEvent): string | null {
  const { type } = event;
  if (!FORWARDED.test(type) && type !== 'task.cancelled') return context.principal.sessionId ?? null;
  return 'sessionId' in event && typeof event.sessionId === 'string' ? event.sessionId : null;
}
