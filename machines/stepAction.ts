/**
 * A pure step wired as one XState built-in action: it assigns the step's context patch and emits its journal
 * entries and its answer, as `enqueueActions` with `enqueue.assign` and `enqueue.emit` did, with the same
 * snapshots, the same `xstate.emit` actions (the move recorder reads them) and in the same order.
 *
 * Why not `enqueueActions`: XState makes ten closures (the `enqueue` object) and an `assign` action for every run of
 * one, and a read round runs eleven steps; the garbage is a sixth of the round's CPU. This one makes none of those:
 * the patch is applied by XState's own `assign` resolution (`ASSIGN.resolve`), called directly.
 */
import { type MachineSnapshot, assign, emit } from 'xstate';
import type { AgentContext } from './context.js';
import type { MachineEmitted } from './journal.js';

/** What a step gives its transition: the context patch (or none) and the events to emit, in order. */
export type StepOutcome = { patch: Partial<AgentContext> | null; emitted: MachineEmitted[] };

type AnySnapshot = MachineSnapshot<AgentContext, never, never, never, string, unknown, never, never>;
type Resolve = (
  scope: unknown,
  snapshot: AnySnapshot,
  args: { context: AgentContext; event: unknown },
  params: undefined,
  action: { assignment: unknown },
) => [AnySnapshot, unknown, unknown];

/** XState's resolution of an `assign` action: a new snapshot with the patch over the context. */
const ASSIGN = assign({}) as unknown as { resolve: Resolve };

/** The built-in action that runs `run` on the transition's context and event. */
export function stepAction(run: (context: AgentContext, event: unknown) => StepOutcome) {
  function step() {}
  step.type = 'xstate.enqueueActions';
  step.resolve = (
    scope: unknown,
    snapshot: AnySnapshot,
    args: { context: AgentContext; event: unknown },
  ): [AnySnapshot, undefined, unknown[] | undefined] => {
    const { patch, emitted } = run(args.context, args.event);
    const next = patch ? ASSIGN.resolve(scope, snapshot, args, undefined, { assignment: () => patch })[0] : snapshot;
    return [next, undefined, emitted.length ? emitted.map((event) => emit(event)) : undefined];
  };
  return step;
}
