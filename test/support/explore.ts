/**
 * Bounded breadth-first exploration of an `agentWorld` over the machine's pure `transition`, checking the safety
 * rules on every transition and on the state it reaches (including states already seen), then on the graph: no
 * cycle (so no run can go on without spending budget), and a final state reachable from everywhere.
 *
 * Hand-written rather than `getAdjacencyMap` because it keeps parent pointers (a broken rule comes with the
 * shortest path to it) and a flat edge list (the graph checks need every edge; the `xstate/graph` queue also grows
 * with every edge and is shifted, which is quadratic at this size).
 *
 * Where the time goes (CPU profiles of the undo, presence and main worlds, at c7cee0d): the chart's own `transition`
 * about 44%, restarts (`restore`: persist, JSON round trip, a new actor) about 15%, garbage collection about 15%,
 * state identities (`serializeWorld`, native JSON of ~3.5 kB a state) about 10%, the rules 8-10%, the shadow 4%. Tried
 * and dropped: ids per object instead of the JSON text (hash-consing through WeakMaps) is slower, since the chart
 * builds some ten new objects a step and a restore rebuilds them all; a larger young generation changed nothing.
 */
import { type AnyActorScope, createEmptyActor } from 'xstate';
import type { AgentMachine } from '../../machines/agentMachine.js';
import type { AgentInput } from '../../machines/context.js';
import { movesFor } from './agentMoves.js';
import {
  FINAL_STATES,
  type Move,
  type World,
  applyMove,
  initialWorld,
  sameWorld,
  serializeWorld,
  startedCalls,
  valueOf,
} from './agentWorld.js';
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
  /**
   * Cycles that need a human's decision on every round (a reviewer asking again and again): not a violation (the
   * machine does not go round by itself), but each is reported with the path to it.
   */
  humanCycles: Violation[];
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
  /** The moves tried in a world (default: `movesFor`, the world's own alphabet). */
  moves?: (world: World) => Move[];
  /** Called on every transition, to count situations worth having seen. */
  witness?: (prev: World, move: Move, next: World, count: (what: string) => void) => void;
  /** Called with the identity of each new state, in the order reached (to compare explorations). */
  onState?: (key: string) => void;
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
  /** The edges taken by a human's decision (user, reviewer, cancel): cycles through one are not the machine's own. */
  const humanEdges: number[][] = [];
  const humanCycles: Violation[] = [];
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

  /** The state rules' verdict on each world added (a refused move's world, the same, gets the same verdict). */
  const stateProblems = new WeakMap<World, string[]>();
  const pathTo = (id: number, last?: string): string[] => {
    const moves: string[] = last ? [last] : [];
    for (let at = id; at > 0; at = parent[at]!.from) moves.unshift(parent[at]!.move);
    return moves;
  };
  const add = (world: World, from: number, move: string): number => {
    const id = worlds.length;
    const key = serializeWorld(world);
    ids.set(key, id);
    options.onState?.(key);
    worlds.push(world);
    parent.push({ from, move });
    edges.push([]);
    humanEdges.push([]);
    const value = valueOf(world.machine);
    byValue[value] = (byValue[value] ?? 0) + 1;
    const problems = checkState(world, input);
    stateProblems.set(world, problems);
    for (const problem of problems) violations.push({ problem, path: pathTo(id) });
    return id;
  };

  add(initial, -1, 'start');
  for (let id = 0; id < worlds.length; id++) {
    const world = worlds[id]!;
    if (world.machine.status !== 'active') continue;
    for (const move of (options.moves ?? movesFor)(world)) {
      let next: World;
      try {
        next = applyMove(world, move, scope);
      } catch (error) {
        violations.push({ problem: `throws: ${String(error)}`, path: pathTo(id, move.type) });
        continue;
      }
      transitions += 1;
      // A refused move leaves the same world (a third of the moves): its identity and state verdict are the same.
      const same = sameWorld(world, next);
      byMove[move.type] = (byMove[move.type] ?? 0) + 1;
      for (const problem of checkEdge(world, move, next, scope, input, count))
        violations.push({ problem, path: pathTo(id, move.type) });
      options.witness?.(world, move, next, count);
      if (violations.length >= maxViolations) return summary();
      const key = serializeWorld(next);
      let to = ids.get(key);
      if (to === undefined) {
        if (worlds.length >= options.maxStates) {
          violations.push({
            problem: `more than ${options.maxStates} states: the bounds do not keep the graph finite`,
            path: pathTo(id, move.type),
          });
          return summary();
        }
        to = add(next, id, move.type);
      } else {
        // Same identity, but a closed batch may differ in detail: the state rules still apply to this one.
        revisits += 1;
        const problems = (same && stateProblems.get(world)) || checkState(next, input);
        for (const problem of problems) violations.push({ problem, path: pathTo(id, move.type) });
      }
      if (to === id) selfLoops += 1;
      else if (/^(user|review|task)\./.test(move.event?.type ?? '')) humanEdges[id]!.push(to);
      else edges[id]!.push(to);
    }
  }

  // Graph rules. No cycle of the machine's own other than self-loops (refused input, restarts): every run ends or
  // waits for a human. Cycles through a human's decision are found after, and reported apart.
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
          violations.push({
            problem: `P3 progress: a cycle through ${valueOf(worlds[to]!.machine)} can run forever`,
            path: pathTo(to),
          });
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
  // `order` is a post-order of the machine's own edges: successors first. Its longest path in one pass.
  const longest = new Int32Array(worlds.length);
  for (const node of order) {
    for (const to of edges[node]!) longest[node] = Math.max(longest[node]!, longest[to]! + 1);
  }
  longestPath = longest[0] ?? 0;
  // A human edge u → v is on a cycle when v reaches u again: u and v are in one strongly connected component.
  const all = edges.map((out, node) => [...out, ...humanEdges[node]!]);
  const component = components(all);
  for (let node = 0; node < worlds.length && humanCycles.length < 8; node++) {
    if (humanEdges[node]!.some((to) => component[to] === component[node])) {
      humanCycles.push({
        problem: `a cycle through ${valueOf(worlds[node]!.machine)} needs a human on every round`,
        path: pathTo(node),
      });
    }
  }
  // "A final state is reachable from everywhere", over all edges: a fixpoint over the reversed graph.
  const canEnd = new Uint8Array(worlds.length);
  const into: number[][] = worlds.map(() => []);
  all.forEach((out, node) => out.forEach((to) => into[to]!.push(node)));
  const queue: number[] = [];
  worlds.forEach((world, node) => FINAL_STATES.has(valueOf(world.machine)) && ((canEnd[node] = 1), queue.push(node)));
  while (queue.length > 0) {
    for (const from of into[queue.pop()!]!) {
      if (canEnd[from]) continue;
      canEnd[from] = 1;
      queue.push(from);
    }
  }
  for (let node = 0; node < worlds.length; node++) {
    if (!canEnd[node])
      violations.push({
        problem: `P3 progress: no final state is reachable from ${valueOf(worlds[node]!.machine)}`,
        path: pathTo(node),
      });
  }
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
      humanCycles,
      witnessed,
      elapsedMs: Math.round(performance.now() - started),
    };
  }
}

/** The strongly connected components of a graph (iterative Tarjan): each node's component number. */
function components(out: number[][]): Int32Array {
  const n = out.length;
  const index = new Int32Array(n).fill(-1);
  const low = new Int32Array(n);
  const component = new Int32Array(n).fill(-1);
  const onStack = new Uint8Array(n);
  const stack: number[] = [];
  let next = 0;
  let count = 0;
  for (let root = 0; root < n; root++) {
    if (index[root] !== -1) continue;
    const work: [number, number][] = [[root, 0]];
    index[root] = low[root] = next++;
    stack.push(root);
    onStack[root] = 1;
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const [node, i] = top;
      if (i < out[node]!.length) {
        top[1] += 1;
        const to = out[node]![i]!;
        if (index[to] === -1) {
          index[to] = low[to] = next++;
          stack.push(to);
          onStack[to] = 1;
          work.push([to, 0]);
        } else if (onStack[to]) low[node] = Math.min(low[node]!, index[to]!);
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1]![0];
        low[parent] = Math.min(low[parent]!, low[node]!);
      }
      if (low[node] === index[node]) {
        let member: number;
        do {
          member = stack.pop()!;
          onStack[member] = 0;
          component[member] = count;
        } while (member !== node);
        count += 1;
      }
    }
  }
  return component;
}

// --- what the exhaustive exploration reports and must have seen -------------------------------------------

export function report(violations: Violation[]): string {
  const shown = violations.slice(0, 8).map((v) => `- ${v.problem}\n    after: ${v.path.join(' → ')}`);
  return `${violations.length} broken rule(s):\n${shown.join('\n')}`;
}

/** Inert moves worth having seen refused, by move type (in reviewRequired, a cancel is one). */
const REFUSED_INPUT: Record<string, string> = {
  'user: approves their own request': 'self-approval refused',
  'approver A: approves again': 'second approval by the same approver refused',
  'approver without the scope: approves': 'approval without the approver scope refused',
  'user: confirms other arguments': 'confirmation of other arguments refused',
  'task user: resolves their own review': "review by the task's own user refused",
  'non-reviewer: resolves': 'review without the review scope refused',
  'reviewer: happened, with a result the tool never returns': 'review result the tool never returns refused',
  'reviewer: retry': 'reviewer retry of a write not retry-safe refused',
  'timer: model retry early': 'early model retry timer ignored',
  'timer: answer timer early': 'early answer timer ignored',
  'user: retries the model now': 'early model retry by a non-operator refused',
  "other tenant's operator: retries the model now": "early model retry by another tenant's operator refused",
};

/** Situations the exploration must have gone through, or the rules would hold vacuously. */
export function witness(prev: World, move: Move, next: World, count: (what: string) => void) {
  const from = valueOf(prev.machine);
  const to = valueOf(next.machine);
  for (const call of startedCalls(prev.machine, next.machine)) {
    const shadow = next.shadow.calls.find((c) => c.callId === call.callId);
    if (to === 'executing.reading') count('reads started');
    else if (!move.protocol && prev.shadow.calls.find((c) => c.callId === call.callId)?.starts) {
      const why = prev.shadow.calls.find((c) => c.callId === call.callId)?.resend;
      count(why === 'review' ? "write retried on a reviewer's word" : 'same-key retry after a lookup found nothing');
    } else {
      count('writes started');
      if (from === 'executing.rechecking.hooks' && move.check?.ok)
        count('write started right after a passing re-check');
      if ((shadow?.amount ?? 0) > 0) count('write moved money');
    }
    if (shadow?.needsConfirmation && shadow.grant) count(`${call.effect} started on a genuine confirmation`);
    if (shadow?.approvers && shadow.grant) count('write started on genuine approvals');
  }
  for (const call of next.machine.context.batch?.calls ?? []) {
    const before = prev.machine.context.batch?.calls.find((c) => c.callId === call.callId);
    const observation = call.observation;
    if (!observation || before?.observation || observation.ok || !observation.gate) continue;
    const scope =
      observation.gate === 'permission' && from === 'vetting.authorizing'
        ? ' (resource)'
        : observation.gate === 'permission'
          ? ' (scope)'
          : '';
    if (from === 'executing.rechecking.hooks')
      count(`refused at the re-check (${move.type.replace(/^recheck: /, '')})`);
    else if (from === 'executing.resending') count('resend after a lookup refused at its re-check');
    else count(`refused at ${observation.gate}${scope}`);
    if (observation.code === 'arguments_changed') count('tampered arguments refused before the write');
  }
  if (move.restart) count(from === 'executing.writing' ? 'restart during a write' : 'restart elsewhere');
  if (move.tamper) count('storage tampered');
  if (move.benign) count('tool output claiming an approval');
  if (move.inert) {
    count('refused or premature human input');
    const what = REFUSED_INPUT[move.type];
    if (what) count(what);
  }
  if (move.protocol) count(`proposal ${move.protocol}`);
  const outcome = next.machine.context.outcome;
  if (outcome && !prev.machine.context.outcome) {
    const dimension = (outcome.reason.detail as { dimension?: string } | undefined)?.dimension;
    count(dimension ? `budget stop: ${dimension}` : `stop: ${outcome.reason.code}`);
    if (dimension && from === 'executing.rechecking.hooks') count('budget stop at the re-check');
  }
  const [was, is] = [prev.machine.context.pendingConfirmation, next.machine.context.pendingConfirmation];
  if (was && is && was.id !== is.id) count('confirmation asked again');
  if (was && is && was.id === is.id && is.approvals.length > was.approvals.length) count('approval recorded');
  if (was && was.approverScope !== null && !is) {
    const call = next.machine.context.batch?.calls.find((c) => c.callId === was.callId);
    if (call?.confirmedBy) count('confirmation granted by approvers');
  }
  if (!prev.machine.context.cancelRequested && next.machine.context.cancelRequested)
    count('cancel deferred during a write');
  if (to === 'reviewRequired' && from !== 'reviewRequired') {
    count(
      from === 'executing.writing'
        ? 'write held for review (needs review)'
        : from === 'executing.resending'
          ? "reviewer's retry refused at its re-check, held again"
          : 'write held for review (outcome unknown)',
    );
  }
  if (from === 'reviewRequired' && move.event?.type === 'task.cancelled')
    count('cancel deferred while a write is held for review');
  if (from === 'reviewRequired' && prev.shadow.cancelAsked && to === 'cancelled')
    count('deferred cancel applied once the review was resolved');
  if (from === 'reviewRequired' && to !== 'reviewRequired' && move.event?.type === 'review.resolved')
    count(`review resolved: ${move.event.resolution}`);
  if (to === 'waitingForModel' && from !== 'waitingForModel')
    count(prev.shadow.outage ? 'model outage waited out again' : 'model outage waited out');
  if (from === 'waitingForModel' && to === 'waitingForModel' && move.type === 'operator: retries the model now')
    count("operator's early model retry refused for budget");
  if (from === 'waitingForModel' && to === 'thinking')
    count(
      move.event?.type === 'operator.retryModel'
        ? 'model asked again early by an operator'
        : 'model asked again after an outage',
    );
  if (from === 'awaitingUser' && move.event?.type === 'timer.answerExpired' && to !== 'awaitingUser')
    count('unanswered question expired');
}

export const MUST_WITNESS = [
  'reads started',
  'writes started',
  'write started right after a passing re-check',
  'write moved money',
  'write started on a genuine confirmation',
  'read started on a genuine confirmation',
  'write started on genuine approvals',
  'same-key retry after a lookup found nothing',
  "write retried on a reviewer's word",
  'restart during a write',
  'restart elsewhere',
  'storage tampered',
  'tampered arguments refused before the write',
  'tool output claiming an approval',
  'refused or premature human input',
  'self-approval refused',
  'confirmation of other arguments refused',
  'second approval by the same approver refused',
  'approval without the approver scope refused',
  "review by the task's own user refused",
  'review without the review scope refused',
  'review result the tool never returns refused',
  'reviewer retry of a write not retry-safe refused',
  'early model retry timer ignored',
  'model asked again early by an operator',
  'early model retry by a non-operator refused',
  "early model retry by another tenant's operator refused",
  "operator's early model retry refused for budget",
  'early answer timer ignored',
  'cancel deferred while a write is held for review',
  'deferred cancel applied once the review was resolved',
  "reviewer's retry refused at its re-check, held again",
  'resend after a lookup refused at its re-check',
  'proposal accepted',
  'proposal rejected',
  'proposal unpairable',
  'budget stop: modelTurns',
  'budget stop: toolCalls',
  'budget stop: writes',
  'budget stop: money',
  'budget stop: wallClock',
  'budget stop at the re-check',
  'stop: goal_met',
  'stop: too_many_rejections',
  'stop: protocol_error',
  'stop: loop_detected',
  'stop: cancelled',
  'stop: outside_mandate',
  'stop: permission_denied',
  'stop: model_unavailable',
  'stop: confirmation_rejected',
  'stop: confirmation_expired',
  'confirmation asked again',
  'approval recorded',
  'confirmation granted by approvers',
  'cancel deferred during a write',
  'write held for review (outcome unknown)',
  'write held for review (needs review)',
  'review resolved: happened',
  'review resolved: not_happened',
  'review resolved: retry',
  'model outage waited out',
  'model outage waited out again',
  'model asked again after an outage',
  'unanswered question expired',
  'refused at protocol',
  'refused at schema',
  'refused at mandate',
  'refused at business',
  'refused at permission (scope)',
  'refused at permission (resource)',
  'refused at confirmation',
  'refused at loop',
  'refused at verification',
  'stop: could_not_verify',
  'refused at the re-check (session gone)',
  'refused at the re-check (session check fails)',
  'refused at the re-check (scopes revoked)',
  'refused at the re-check (business changed)',
  'refused at the re-check (authorization denied)',
  'refused at the re-check (rate limited)',
];
