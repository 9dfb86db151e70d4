/**
 * The fold's steps for how a task pauses and ends: the user's presence (the two pause states), the undoing of a
 * stop's writes (`stopping`, then a batch of compensations), and the stop itself (through `stopping` to its final
 * state). See `replayFold.ts` for the rest.
 */
import type { FinalStatus } from '../../machines/context.js';
import { MODEL_FAILURE_CODES } from '../../machines/failures.js';
import type { AuditEntry } from '../../machines/journal.js';
import type { FoldMoves } from './replayFoldMoves.js';
import type { ReplayedTask } from './replayedTask.js';

const FINAL_STATE: Record<FinalStatus, string> = {
  done: 'done',
  answered: 'answered',
  failed: 'failed',
  budget_exhausted: 'budgetExhausted',
  cancelled: 'cancelled',
};

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

export function applyEnding(task: ReplayedTask, entry: EndingEntry, moves: FoldMoves): void {
  const { enter, enterExecuting, inExecuting, stoppedAt, decide } = moves;
  switch (entry.kind) {
    case 'presence':
      if (entry.action === 'paused') {
        // Before a write of an open batch, or before the next model turn once the batch is done.
        const open = task.lastResults.some((r) => r.result === null);
        if (open && inExecuting()) enterExecuting('pausedBeforeWrite');
        else {
          enter('deciding');
          enter('paused');
        }
      }
      if (entry.action === 'resumed')
        enter(task.state === 'executing.pausedBeforeWrite' ? 'executing.selecting' : 'deciding');
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
      stoppedAt(entry.reason.code);
      decide({
        kind: 'compensation',
        name: 'started',
        decision: entry.status,
        code: entry.reason.code,
        summary: `${entry.reason.message}; undoing ${entry.compensations.length} write(s) first`,
        tool: null,
        callId: null,
      });
      enter('stopping');
      // The compensating calls are vetted and run like a batch of proposals.
      task.lastResults = [];
      enter('vetting.choosing');
      break;
    case 'compensation_finished':
      enterExecuting('selecting');
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
      stoppedAt(entry.reason.code);
      // A turn that failed without a reply is charged nothing (a cancel leaves its reservation charged).
      if ((MODEL_FAILURE_CODES as readonly string[]).includes(entry.reason.code)) moves.holdReservation(false);
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
      // Every stop but a met goal or an answer passes through `stopping` (where compensations would start).
      if (entry.status !== 'done' && entry.status !== 'answered') enter('stopping');
      enter(FINAL_STATE[entry.status]);
      break;
  }
}
