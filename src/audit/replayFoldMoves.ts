/**
 * The fold's moves, shared by its steps (`replayFold.ts`, `replayEndings.ts`): entering a state along the chart's own
 * transitions (through the transient states the chart requires), recording a decision, finding a call of the batch.
 */
import type { AuditEntry } from '../../machines/journal.js';
import type { ReplayedCall, ReplayedDecision, ReplayedTask } from './replayedTask.js';

export type FoldMoves = ReturnType<typeof foldMoves>;

/** The moves of one step of the fold: `entry` (at `seq`, after `previous`) applied to `task`. */
export function foldMoves(task: ReplayedTask, entry: AuditEntry, seq: number, previous: AuditEntry | null) {
  const used = task.budget.used;
  const enter = (state: string, reenter = false) => {
    if (task.state === state && !reenter) return;
    if (task.state !== null) task.transitions.push({ from: task.state, to: state, seq });
    task.visited.push(state);
    task.state = state;
  };
  const inVetting = () => task.state?.startsWith('vetting.') === true;
  const inExecuting = () => task.state?.startsWith('executing.') === true;
  /** Into a substate of `vetting`: each call starts from `choosing`. */
  const enterVetting = (sub: string) => {
    if (!inVetting()) enter('vetting.choosing');
    enter(`vetting.${sub}`);
  };
  /**
   * Into a substate of `executing`. Every step of a batch is chosen in `selecting` (also the state entered from
   * outside, after vetting), except a same-key retry, which goes from `reconciling` straight back to `writing`.
   */
  const enterExecuting = (sub: string) => {
    const target = `executing.${sub}`;
    if (task.state === target) return;
    if (inVetting()) enter('vetting.choosing');
    const direct =
      task.state === 'executing.selecting' || (task.state === 'executing.reconciling' && sub === 'writing');
    if (!direct) enter('executing.selecting');
    enter(target);
  };
  /** A refusal by the re-check of a write's arguments (`rechecking.arguments`, entered from `selecting`). */
  const refusedAtRecheck = () => {
    if (task.state !== 'executing.rechecking.hooks' && task.state !== 'executing.resending') {
      enterExecuting('selecting');
      enter('executing.rechecking.arguments');
    }
    enter('executing.selecting');
  };
  /**
   * Where a stop was decided. From vetting: a loop is found in `choosing`; a denied call proposed again in
   * `checkingMandate`; a cancel or a failed check leaves the state it happened in; every other stop of a batch is
   * decided in `selecting`.
   */
  const stoppedAt = (code: string) => {
    if (previous?.kind === 'write_lookup' && previous.result === 'inconclusive') used.retries -= 1;
    if (inVetting() && code === 'loop_detected') enter('vetting.choosing');
    else if (inVetting() && (code === 'permission_denied' || code === 'outside_mandate'))
      enter('vetting.checkingMandate');
    else if (inVetting() && code !== 'cancelled' && code !== 'internal_error') enterExecuting('selecting');
  };
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

  /** Debits (true) or gives back (false) the turn's token and cost reservation, once. */
  const holdReservation = (hold: boolean) => {
    const reservation = task.turnReservation;
    if (!reservation || (task.reservationHeld ?? false) === hold) return;
    const sign = hold ? 1 : -1;
    used.tokens += sign * reservation.tokens;
    used.costMicros += sign * reservation.costMicros;
    task.reservationHeld = hold;
  };
  return {
    holdReservation,
    used,
    enter,
    inVetting,
    inExecuting,
    enterVetting,
    enterExecuting,
    refusedAtRecheck,
    stoppedAt,
    decide,
    call,
  };
}
