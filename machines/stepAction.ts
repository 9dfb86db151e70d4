/**
 * A pure step wired as one XState built-in action: it assigns the step's context patch and emits its journal
 * entries and its answer, as `enqueueActions` with `enqueue.assign` and `enqueue.emit` did, with the same
 * snapshots, the same `xstate.emit` actions (the move recorder reads them) and in the same order.
 *
 * Why not `enqueueActions`: XState makes ten closures (the `enqueue` object) and an `assign` action for every run of
 * one, and a read round runs eleven steps; the garbage is a sixth of the round's CPU. This one makes none of those,
 * and applies the patch as XState's `assign` resolution would (`withContext`), with less garbage.
 */
import { type EventObject, type MachineSnapshot, emit, raise } from 'xstate';
import type { AgentContext } from './context.js';
import { patchedContext } from './lib/contextCopy.js';
import type { MachineEmitted } from './journal.js';

/**
 * What a step gives its transition: the context patch (or none), the events to emit, in order, and an event to
 * raise after them (as `enqueue.raise`), if any.
 */
export type StepOutcome = { patch: Partial<AgentContext> | null; emitted: MachineEmitted[]; raised?: EventObject };

type AnySnapshot = MachineSnapshot<AgentContext, never, never, never, string, unknown, never, never>;

/**
 * What XState's `assign` resolution makes of `patch` (a patch spawns nothing): a copy of the snapshot with the patch
 * over the context, the keys in the same order (the context's, then any new ones). Its copy of the context is
 * `Object.assign({}, context, patch)`, which grows the new object's property store key by key (about 2.5 KB of
 * garbage for the context's forty-odd keys, eight times a round); `patchedContext` makes it at its final size. And
 * its copy of the snapshot recomputes the state value and the tag set from the active nodes, which an assignment
 * leaves as they are.
 */
function withContext(snapshot: AnySnapshot, patch: Partial<AgentContext>): AnySnapshot {
  const context = patchedContext(snapshot.context, patch);
  if (!isMachineSnapshot(snapshot)) return { ...snapshot, context };
  // Every key of XState's snapshot, in its order (`createMachineSnapshot`'s): one allocation at the final size.
  const s = snapshot as unknown as Record<(typeof SNAPSHOT_KEYS)[number], unknown>;
  return {
    status: s.status,
    output: s.output,
    error: s.error,
    machine: s.machine,
    context,
    _nodes: s._nodes,
    value: s.value,
    tags: s.tags,
    children: s.children,
    historyValue: s.historyValue,
    matches: s.matches,
    hasTag: s.hasTag,
    can: s.can,
    getMeta: s.getMeta,
    toJSON: s.toJSON,
  } as unknown as AnySnapshot;
}

/** The keys of the snapshots XState makes (`createMachineSnapshot`), in order. */
const SNAPSHOT_KEYS = [
  'status',
  'output',
  'error',
  'machine',
  'context',
  '_nodes',
  'value',
  'tags',
  'children',
  'historyValue',
  'matches',
  'hasTag',
  'can',
  'getMeta',
  'toJSON',
] as const;

/** The snapshot's own keys are XState's, in XState's order (else it is copied by a spread, as before). */
function isMachineSnapshot(snapshot: AnySnapshot): boolean {
  let at = 0;
  for (const key in snapshot) if (key !== SNAPSHOT_KEYS[at++]) return false;
  return at === SNAPSHOT_KEYS.length;
}

/** The built-in action that runs `run` on the transition's context and event. */
export function stepAction(run: (context: AgentContext, event: unknown) => StepOutcome) {
  function step() {}
  step.type = 'xstate.enqueueActions';
  step.resolve = (
    _scope: unknown,
    snapshot: AnySnapshot,
    args: { context: AgentContext; event: unknown },
  ): [AnySnapshot, undefined, unknown[] | undefined] => {
    const { patch, emitted, raised } = run(args.context, args.event);
    const next = patch ? withContext(snapshot, patch) : snapshot;
    // One `emit` per event, made here: a list shared between steps would be read after observers ran other steps.
    // `emit` itself as the callback (it reads only its first argument): no closure per step, and a packed list.
    const actions: unknown[] | undefined = emitted.length
      ? emitted.map(emit as (event: MachineEmitted) => unknown)
      : undefined;
    if (!raised) return [next, undefined, actions];
    // The raise goes after the step's own events (the list is this step's own).
    if (actions) {
      actions.push(raise(raised));
      return [next, undefined, actions];
    }
    return [next, undefined, [raise(raised)]];
  };
  return step;
}
