/**
 * The fold's helpers, shared by its steps (`replayFold.ts`, `replayEndings.ts`, `replayFoldPlans.ts`): recording a
 * decision, finding a call of the batch, and the turn's reservation. Pure data: the state comes from the transitions
 * the runtime recorded (`replayAudit.ts`), never from here.
 */
import type { AuditEntry } from '../../machines/journal.js';
import type { ReplayedCall, ReplayedDecision, ReplayedTask } from './replayedTask.js';

export type FoldHelpers = ReturnType<typeof foldHelpers>;

/** The helpers of one step of the fold: `entry` (at `seq`, after `previous`) applied to `task`. */
export function foldHelpers(task: ReplayedTask, entry: AuditEntry, seq: number, previous: AuditEntry | null) {
  const used = task.budget.used;
  const decide = (d: Omit<ReplayedDecision, 'seq' | 'turn' | 'at'>) =>
    task.decisions.push({ seq, turn: entry.turn, at: entry.at, ...d });
  const call = (callId: string, tool: string): ReplayedCall => {
    let found = task.lastResults.find((c) => c.callId === callId);
    if (!found) {
      found = {
        callId,
        tool,
        effect: null,
        args: null,
        argsHash: null,
        idempotencyKey: null,
        result: null,
        gate: null,
        attempts: 0,
        durationMs: null,
      };
      task.lastResults.push(found);
    }
    return found;
  };
  /** A lookup found inconclusive and not followed by another (the task stops or is held): it was no retry. */
  const undoLookupRetry = () => {
    if (previous?.kind === 'write_lookup' && previous.result === 'inconclusive') used.retries -= 1;
  };
  /** Debits (true) or gives back (false) the turn's token and cost reservation, once. */
  const holdReservation = (hold: boolean) => {
    const reservation = task.turnReservation;
    if (!reservation || (task.reservationHeld ?? false) === hold) return;
    const sign = hold ? 1 : -1;
    used.tokens += sign * reservation.tokens;
    used.costMicros += sign * reservation.costMicros;
    task.reservationHeld = hold;
  };
  return { holdReservation, used, decide, call, undoLookupRetry };
}
