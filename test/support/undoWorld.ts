/**
 * Compensation in the adversarial world, by the harness's own reading: in the undo world (`UNDO_CHART`), a booking
 * that succeeded is undone by releasing its room when the task stops failed, out of budget or cancelled. The harness
 * records each booking that succeeded (from the events it delivered) and, when the machine starts undoing, expects
 * exactly one release per booking, newest first, and files those calls in its shadow with its reading of the rules:
 * schema-valid, within the mandate by the compensation rule, in scope, no hooks, confirmed by the user (a write
 * without a rule asks).
 */
import type { MachineEvent } from '../../machines/actors.js';
import type { AgentContext } from '../../machines/context.js';

// Structural views of the world's snapshot, move and shadow call, so this module does not import `agentWorld.ts`
// (which imports it).
interface SnapshotView {
  value: unknown;
  context: AgentContext;
}
interface MoveView {
  event: MachineEvent | null;
  inert?: boolean;
  review?: { reviewer: boolean; valid: boolean };
}
interface CallView {
  callId: string;
  tool: string;
  room: string | null;
}

/** A write that succeeded and, in the undo world, is to be undone on a stop. */
export interface Written {
  callId: string;
  room: string;
}

/** Which tool undoes which, in the undo world; and the stops that undo (the world's policy default). */
export const UNDONE_BY: Record<string, string> = { book_room: 'release_room' };
export const UNDOING_STOPS = new Set(['failed', 'budget_exhausted', 'cancelled']);

const stateOf = (snapshot: SnapshotView) => JSON.stringify(snapshot.value);

/**
 * The booking that succeeded on this edge, by the event the harness delivered in the state it was in: the write's
 * own result, a lookup that found it, or a reviewer (who the harness counts as one) who found it happened.
 */
export function succeededOn(prev: SnapshotView, move: MoveView, calls: readonly CallView[]): Written | null {
  const event: MachineEvent | null = move.event;
  if (!event || move.inert) return null;
  const batch = prev.context.batch;
  const current = batch?.calls.find((c) => c.callId === batch.current);
  const state = stateOf(prev);
  let callId: string | undefined;
  if (
    state === '{"executing":"writing"}' &&
    event.type === 'xstate.done.actor.write' &&
    event.output.outcome.kind === 'ok'
  )
    callId = batch?.calls.find((c) => c.phase === 'writing')?.callId;
  if (
    state === '{"executing":"reconciling"}' &&
    event.type === 'xstate.done.actor.lookup' &&
    event.output.result.kind === 'found'
  )
    callId = current?.callId;
  if (
    state === '"reviewRequired"' &&
    event.type === 'review.resolved' &&
    event.resolution === 'happened' &&
    move.review?.reviewer &&
    move.review.valid
  )
    callId = prev.context.review?.callId;
  const call = calls.find((c) => c.callId === callId);
  return call && UNDONE_BY[call.tool] && call.room !== null ? { callId: call.callId, room: call.room } : null;
}

/** The undo calls the harness expects when the machine starts undoing: one per booking, newest first. */
export function expectedUndos(written: readonly Written[]): { callId: string; tool: string; args: { room: string } }[] {
  return [...written]
    .reverse()
    .map((w, index) => ({ callId: `undo-${index + 1}`, tool: UNDONE_BY.book_room!, args: { room: w.room } }));
}
