/**
 * Bounded breadth-first exploration of an `agentWorld` over the machine's pure `transition`, checking the safety
 * rules on every transition and on the state it reaches (including states already seen), then on the graph: no
 * cycle (so no run can go on without spending budget), and a final state reachable from everywhere.
 *
 * Hand-written rather than `getAdjacencyMap` because it keeps parent pointers (a broken rule comes with the
 * shortest path to it) and a flat edge list (the graph checks need every edge; the `xstate/graph` queue also grows
 * with every edge and is shifted, which is quadratic at this size).
 */
import { type AnyActorScope, createEmptyActor } from 'xstate';
import type { AgentMachine } from '../../machines/agentMachine.js';
import type { AgentInput } from '../../machines/context.js';
import { movesFor } from './agentMoves.js';
import { FINAL_STATES, type Move, type World, applyMove, initialWorld, serializeWorld, startedCalls, valueOf } from './agentWorld.js';
import { checkEdge, checkState } from './safetyProperties.js';

export interface Violation {
  problem: string;
  /** Moves from the initial state to the transition (or state) that broke the rule. */
  path: string[];
}

export interface Exploration {
  states: number;
  transitions: number;
  /** Transitions into a state already reached, checked all the same. */
  revisits: number;
  selfLoops: number;
  longestPath: number;
  finalStates: number;
  byValue: Record<string, number>;
  byMove: Record<string, number>;
  violations: Violation[];
  /** Counted situations, to show the properties were not vacuous. */
  witnessed: Record<string, number>;
  elapsedMs: number;
}

/** The actor scope `xstate/graph` uses for traversals: nothing runs, nothing is emitted. */
export function inertScope(): AnyActorScope {
  const actor = createEmptyActor();
  return {
    self: actor,
    logger: () => {},
    id: '',
    sessionId: 'explore',
    defer: () => {},
    system: actor.system,
    stopChild: () => {},
    emit: () => {},
    actionExecutor: () => {},
  } as unknown as AnyActorScope;
}

export interface ExploreOptions {
  /** Refuse to go past this many distinct states (the bounds should keep the graph well below). */
  maxStates: number;
  /** Stop after this many broken rules (for charts expected to break them). */
  maxViolations?: number;
  chart?: AgentMachine;
  /** Called on every transition, to count situations worth having seen. */
  witness?: (prev: World, move: Move, next: World, count: (what: string) => void) => void;
}

export function explore(input: AgentInput, options: ExploreOptions): Exploration {
  const started = performance.now();
  const scope = inertScope();
  const initial = initialWorld(scope, input, options.chart);
  const maxViolations = options.maxViolations ?? Infinity;
  const ids = new Map<string, number>();
  const worlds: World[] = [];
  const parent: { from: number; move: string }[] = [];
  const edges: number[][] = [];
  const violations: Violation[] = [];
  const byValue: Record<string, number> = {};
  const byMove: Record<string, number> = {};
  const witnessed: Record<string, number> = {};
  const count = (what: string) => {
    witnessed[what] = (witnessed[what] ?? 0) + 1;
  };
  let transitions = 0;
  let revisits = 0;
  let selfLoops = 0;
  let longestPath = 0;

  const pathTo = (id: number, last?: string): string[] => {
    const moves: string[] = last ? [last] : [];
    for (let at = id; at > 0; at = parent[at]!.from) moves.unshift(parent[at]!.move);
    return moves;
  };
  const add = (world: World, from: number, move: string): number => {
    const id = worlds.length;
    ids.set(serializeWorld(world), id);
    worlds.push(world);
    parent.push({ from, move });
    edges.push([]);
    const value = valueOf(world.machine);
    byValue[value] = (byValue[value] ?? 0) + 1;
    for (const problem of checkState(world, input)) violations.push({ problem, path: pathTo(id) });
    return id;
  };

  add(initial, -1, 'start');
  for (let id = 0; id < worlds.length; id++) {
    const world = worlds[id]!;
    if (world.machine.status !== 'active') continue;
    for (const move of movesFor(world)) {
      let next: World;
      try {
        next = applyMove(world, move, scope);
      } catch (error) {
        violations.push({ problem: `throws: ${String(error)}`, path: pathTo(id, move.type) });
        continue;
      }
      transitions += 1;
      byMove[move.type] = (byMove[move.type] ?? 0) + 1;
      for (const problem of checkEdge(world, move, next, scope)) violations.push({ problem, path: pathTo(id, move.type) });
      options.witness?.(world, move, next, count);
      if (violations.length >= maxViolations) return summary();
      const key = serializeWorld(next);
      let to = ids.get(key);
      if (to === undefined) {
        if (worlds.length >= options.maxStates) {
          violations.push({ problem: `more than ${options.maxStates} states: the bounds do not keep the graph finite`, path: pathTo(id, move.type) });
          return summary();
        }
        to = add(next, id, move.type);
      } else {
        // Same identity, but a closed batch may differ in detail: the state rules still apply to this one.
        revisits += 1;
        for (const problem of checkState(next, input)) violations.push({ problem, path: pathTo(id, move.type) });
      }
      if (to === id) selfLoops += 1;
      else edges[id]!.push(to);
    }
  }

  // Graph rules. No cycle other than self-loops (refused input, restarts): every run ends or waits for a human.
  const order: number[] = [];
  const colour = new Uint8Array(worlds.length); // 0 new, 1 on the stack, 2 done
  for (let root = 0; root < worlds.length; root++) {
    if (colour[root] !== 0) continue;
    const stack: [number, number][] = [[root, 0]];
    colour[root] = 1;
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const [node, index] = top;
      const out = edges[node]!;
      if (index < out.length) {
        top[1] += 1;
        const to = out[index]!;
        if (colour[to] === 1) {
          violations.push({ problem: `P3 progress: a cycle through ${valueOf(worlds[to]!.machine)} can run forever`, path: pathTo(to) });
        } else if (colour[to] === 0) {
          colour[to] = 1;
          stack.push([to, 0]);
        }
      } else {
        colour[node] = 2;
        order.push(node);
        stack.pop();
      }
    }
  }
  // `order` is a post-order: successors first. Longest path and "a final state is reachable" in one pass.
  const longest = new Int32Array(worlds.length);
  const canEnd = new Uint8Array(worlds.length);
  for (const node of order) {
    const value = valueOf(worlds[node]!.machine);
    if (FINAL_STATES.has(value)) canEnd[node] = 1;
    for (const to of edges[node]!) {
      longest[node] = Math.max(longest[node]!, longest[to]! + 1);
      if (canEnd[to]) canEnd[node] = 1;
    }
    if (!canEnd[node]) violations.push({ problem: `P3 progress: no final state is reachable from ${value}`, path: pathTo(node) });
  }
  longestPath = longest[0] ?? 0;
  return summary();

  function summary(): Exploration {
    return {
      states: worlds.length,
      transitions,
      revisits,
      selfLoops,
      longestPath,
      finalStates: Object.entries(byValue)
        .filter(([value]) => FINAL_STATES.has(value))
        .reduce((sum, [, n]) => sum + n, 0),
      byValue,
      byMove,
      violations,
      witnessed,
      elapsedMs: Math.round(performance.now() - started),
    };
  }
}

// --- what the exhaustive exploration reports and must have seen -------------------------------------------

export function report(violations: Violation[]): string {
  const shown = violations.slice(0, 8).map((v) => `- ${v.problem}\n    after: ${v.path.join(' → ')}`);
  return `${violations.length} broken rule(s):\n${shown.join('\n')}`;
}

/** Situations the exploration must have gone through, or the rules would hold vacuously. */
export function witness(prev: World, move: Move, next: World, count: (what: string) => void) {
  const from = valueOf(prev.machine);
  const to = valueOf(next.machine);
  for (const call of startedCalls(prev.machine, next.machine)) {
    const shadow = next.shadow.calls.find((c) => c.callId === call.callId);
    if (to === 'executing.reading') count('reads started');
    else if (!move.protocol && prev.shadow.calls.find((c) => c.callId === call.callId)?.starts) count('same-key retry after a lookup found nothing');
    else count('writes started');
    if (shadow?.needsConfirmation && shadow.grant) count(`${call.effect} started on a genuine confirmation`);
  }
  for (const call of next.machine.context.batch?.calls ?? []) {
    const before = prev.machine.context.batch?.calls.find((c) => c.callId === call.callId);
    const observation = call.observation;
    if (!observation || before?.observation || observation.ok || !observation.gate) continue;
    const scope = observation.gate === 'permission' && from === 'vetting.authorizing' ? ' (resource)' : observation.gate === 'permission' ? ' (scope)' : '';
    count(`refused at ${observation.gate}${scope}`);
  }
  if (move.restart) count(from === 'executing.writing' ? 'restart during a write' : 'restart elsewhere');
  if (move.benign) count('tool output claiming an approval');
  if (move.inert) count('refused or premature human input');
  if (move.protocol) count(`proposal ${move.protocol}`);
  const outcome = next.machine.context.outcome;
  if (outcome && !prev.machine.context.outcome) {
    const dimension = (outcome.reason.detail as { dimension?: string } | undefined)?.dimension;
    count(dimension ? `budget stop: ${dimension}` : `stop: ${outcome.reason.code}`);
  }
  const [was, is] = [prev.machine.context.pendingConfirmation, next.machine.context.pendingConfirmation];
  if (was && is && was.id !== is.id) count('confirmation asked again');
  if (!prev.machine.context.cancelRequested && next.machine.context.cancelRequested) count('cancel deferred during a write');
}

export const MUST_WITNESS = [
  'reads started',
  'writes started',
  'write started on a genuine confirmation',
  'read started on a genuine confirmation',
  'same-key retry after a lookup found nothing',
  'restart during a write',
  'restart elsewhere',
  'tool output claiming an approval',
  'refused or premature human input',
  'proposal accepted',
  'proposal rejected',
  'proposal unpairable',
  'budget stop: modelTurns',
  'budget stop: toolCalls',
  'budget stop: writes',
  'budget stop: wallClock',
  'stop: goal_met',
  'stop: write_outcome_unknown',
  'stop: too_many_rejections',
  'stop: protocol_error',
  'stop: loop_detected',
  'stop: cancelled',
  'confirmation asked again',
  'cancel deferred during a write',
  'refused at protocol',
  'refused at schema',
  'refused at business',
  'refused at permission (scope)',
  'refused at permission (resource)',
  'refused at confirmation',
  'refused at loop',
];
