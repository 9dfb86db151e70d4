/**
 * The fold's steps for how a task pauses and ends: the user's presence, the undoing of a stop's writes (a batch of
 * compensations), and the stop itself. Pure data, like `replayFold.ts`.
 */
import { MODEL_FAILURE_CODES } from '../../machines/failures.js';
import type { AuditEntry } from '../../machines/journal.js';
import type { FoldHelpers } from './replayFoldHelpers.js';
import type { ReplayedTask } from './replayedTask.js';

type EndingEntry = Extract<
  AuditEntry,
  { kind: 'presence' | 'compensation_started' | 'compensation_finished' | 'task_stopped' }
>;

export const ENDING_KINDS: ReadonlySet<AuditEntry['kind']> = new Set([
  'presence',
  'compensation_started',
  'compensation_finished',
  'task_stopped',
]);

export function applyEnding(task: ReplayedTask, entry: EndingEntry, helpers: FoldHelpers): void {
  const { decide } = helpers;
  switch (entry.kind) {
    case 'presence':
      decide({
        kind: 'user',
        name: `user ${entry.action}`,
        decision: entry.action,
        code: null,
        summary: null,
        tool: null,
        callId: null,
      });
      break;
    case 'compensation_started':
      helpers.undoLookupRetry();
      decide({
        kind: 'compensation',
        name: 'started',
        decision: entry.status,
        code: entry.reason.code,
        summary: `${entry.reason.message}; undoing ${entry.compensations.length} write(s) first`,
        tool: null,
        callId: null,
      });
      // The compensating calls are vetted and run like a batch of proposals.
      task.lastResults = [];
      break;
    case 'compensation_finished':
      for (const c of entry.compensations) {
        decide({
          kind: 'compensation',
          name: c.result,
          decision: c.result,
          code: c.code,
          summary: c.summary,
          tool: c.undoTool,
          callId: c.callId,
        });
      }
      break;
    case 'task_stopped':
      helpers.undoLookupRetry();
      // A turn that failed without a reply is charged nothing (a cancel leaves its reservation charged).
      if ((MODEL_FAILURE_CODES as readonly string[]).includes(entry.reason.code)) helpers.holdReservation(false);
      decide({
        kind: 'stop',
        name: entry.status,
        decision: entry.status,
        code: entry.reason.code,
        summary: entry.reason.message,
        tool: null,
        callId: null,
      });
      task.outcome = { status: entry.status, reason: entry.reason };
      task.pendingConfirmation = null;
      task.waitingForAnswer = false;
      break;
  }
}
