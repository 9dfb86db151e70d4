/**
 * Compaction in the adversarial world, by the harness's own record: a task started with chart compaction
 * (`input.compaction`) keeps, beside the machine, which model turns the chart entered `compacting` at, and what the
 * compaction under way was entered for (the provider's refusal the harness made, or the estimate) with the budget as
 * it stood once its summariser's turn was reserved. The moves and the rules are in `compactionChecks.ts`.
 *
 * This module does not import `agentWorld.ts` (which imports it): the views it needs are structural.
 */
import type { MachineEvent } from '../../machines/actors.js';
import type { AgentContext } from '../../machines/context.js';

interface SnapshotView {
  value: unknown;
  context: AgentContext;
}
interface MoveView {
  event: MachineEvent | null;
  restart?: boolean;
  tooLong?: boolean;
}

export interface CompactionShadow {
  /** The model turn (`context.turn` as it entered) of every entry into `compacting`, oldest first. */
  entries: number[];
  /** The compaction under way: entered for a refusal the harness made, and the budget used once it had reserved. */
  underWay: { requested: boolean; usedTokens: number; usedCost: number } | null;
}

export function initialCompactionShadow(): CompactionShadow {
  return { entries: [], underWay: null };
}

const isCompacting = (snapshot: SnapshotView) => snapshot.value === 'compacting';

/**
 * The edge enters `compacting`: from another state, or from `compacting` itself through the summariser's answer
 * (recorded, then compacting again in the same step); a restart restores the state it was in, and enters nothing.
 */
export function entersCompaction(prev: SnapshotView, move: MoveView, next: SnapshotView): boolean {
  if (!isCompacting(next) || move.restart) return false;
  return !isCompacting(prev) || /^xstate\.(done|error)\.actor\.summarise$/.test(move.event?.type ?? '');
}

export function advanceCompactionShadow(
  shadow: CompactionShadow,
  prev: SnapshotView,
  move: MoveView,
  next: SnapshotView,
): CompactionShadow {
  if (entersCompaction(prev, move, next)) {
    const { used } = next.context.budget;
    return {
      entries: [...shadow.entries, next.context.turn],
      underWay: { requested: move.tooLong === true, usedTokens: used.tokens, usedCost: used.costMicros },
    };
  }
  return isCompacting(next) ? shadow : { ...shadow, underWay: null };
}
