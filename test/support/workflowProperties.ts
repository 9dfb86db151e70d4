/**
 * P10, workflows: the safety rules of a host-fixed flow, each a named check on every transition of the workflow
 * world (`workflowWorld.ts`), against the harness's own reading of the flow.
 *
 * - P10 program calls: no tool call starts but the program's call of the current call step: its tool, with exactly
 *   the arguments the harness computes from the facts it established (never a call the model proposed).
 * - P10 decision offer: in a decision turn the model is offered no installed tool (only the host's submit_decision).
 * - P10 decision facts: a decision is recorded only when the harness's own check says it fits the step, and as that
 *   value; a call step's fact only from that call's observation (ok only from a trusted ok result the harness
 *   delivered on that edge, with that value).
 * - P10 done: the task ends done only when the flow ended by the harness's reading and it delivered a trusted ok
 *   booking (the success criterion).
 * - P10 dead end: a state that is not final has a move of the alphabet (the flow never strands the task).
 *
 * The explorer is a plain breadth-first search over the chart's pure `transition` (states deduplicated by the
 * common world serialization plus the flow shadow), keeping parent pointers for the shortest path to a violation.
 */
import type { AnyActorScope } from 'xstate';
import type { AgentMachine } from '../../machines/agentMachine.js';
import type { AgentInput } from '../../machines/context.js';
import {
  FINAL_STATES,
  type Move,
  type World,
  applyMove,
  initialWorld,
  serializeWorld,
  startedCalls,
  valueOf,
} from './agentWorld.js';
import { type Violation, inertScope } from './explore.js';
import {
  type FlowShadow,
  INITIAL_FLOW,
  harnessCall,
  harnessDecision,
  harnessNext,
  workflowMoves,
} from './workflowWorld.js';

export interface FlowWorld {
  world: World;
  flow: FlowShadow;
}

type Delivered = { callId: string; ok: boolean; value: unknown };

/** Trusted ok results (and failures) the harness delivers on this move, by call. */
function delivered(prev: World, move: Move): Delivered[] {
  const event = move.event;
  if (!event || move.inert) return [];
  const state = valueOf(prev.machine);
  const batch = prev.machine.context.batch;
  if (state === 'executing.reading' && event.type === 'xstate.done.actor.reads')
    return event.output.results.map((r) => ({
      callId: r.callId,
      ok: r.outcome.kind === 'ok',
      value: r.outcome.kind === 'ok' ? r.outcome.value : null,
    }));
  const writing = batch?.calls.find((c) => c.phase === 'writing');
  if (state === 'executing.writing' && event.type === 'xstate.done.actor.write' && writing) {
    const o = event.output.outcome;
    return [{ callId: writing.callId, ok: o.kind === 'ok', value: o.kind === 'ok' ? o.value : null }];
  }
  const current = batch?.calls.find((c) => c.callId === batch.current);
  if (state === 'executing.reconciling' && event.type === 'xstate.done.actor.lookup' && current) {
    const r = event.output.result;
    return [{ callId: current.callId, ok: r.kind === 'found', value: r.kind === 'found' ? r.value : null }];
  }
  return [];
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** The P10 checks of one edge, and the harness's flow after it. */
export function flowEdge(prev: FlowWorld, move: Move, next: World): { flow: FlowShadow; problems: string[] } {
  const problems: string[] = [];
  const fail = (rule: string, detail: string) => problems.push(`P10 ${rule}: ${detail} (after ${move.type})`);
  let flow = prev.flow;
  const before = prev.world.machine.context;
  const now = next.machine.context;
  const from = valueOf(prev.world.machine);
  const to = valueOf(next.machine);
  const given = delivered(prev.world, move);

  // Facts the machine recorded on this edge, each held to where it may come from.
  const was = before.workflow?.facts ?? {};
  for (const [step, fact] of Object.entries(now.workflow?.facts ?? {})) {
    if (same(was[step], fact)) continue;
    if (step !== flow.current) fail('decision facts', `${step} is recorded while the harness is at ${flow.current}`);
    const facts = { ...flow.facts };
    if (fact.kind === 'decision') {
      const event = move.event;
      const model =
        event?.type === 'xstate.done.actor.model' && event.output.kind === 'replied' ? event.output.event : null;
      const value =
        model?.type === 'model.decided' && from === 'thinking' ? harnessDecision(step, model.arguments) : null;
      if (value === null || !fact.ok)
        fail('decision facts', `${step} records ${JSON.stringify(fact)}, which does not fit`);
      else if (!same(value, fact.value)) fail('decision facts', `${step} records ${JSON.stringify(fact.value)}`);
      facts[step] = { kind: 'decision', value: value ?? {} };
    } else {
      const call = (now.batch ?? before.batch)?.calls.find((c) => c.callId.startsWith('wf-'));
      const result = call ? given.find((d) => d.callId === call.callId) : undefined;
      if (fact.ok && (!result?.ok || !same(result.value, fact.value)))
        fail('decision facts', `${step} records a result ${JSON.stringify(fact.value)} the harness did not deliver`);
      facts[step] = { kind: 'call', ok: fact.ok && result?.ok === true, value: result?.value ?? null };
    }
    flow = { ...flow, facts, current: harnessNext(step, facts) };
  }

  // Trusted ok bookings the harness delivered (the success criterion's evidence).
  const booking = (now.batch ?? before.batch)?.calls.find((c) => c.tool === 'book_room');
  if (booking && given.some((d) => d.callId === booking.callId && d.ok)) flow = { ...flow, booked: true };

  // Calls that start: only the program's call of the current call step (the step the facts recorded on this edge
  // lead to: a decision and the call after it are one macrostep), with the harness's arguments.
  const expected = harnessCall(flow);
  for (const call of startedCalls(prev.world.machine, next.machine)) {
    const what = `${call.tool} ${JSON.stringify(call.args)} (${call.callId})`;
    if (!expected) fail('program calls', `${what} starts, but the flow is at ${flow.current}`);
    else if (!call.callId.startsWith('wf-') || call.tool !== expected.tool || !same(call.args, expected.args))
      fail('program calls', `${what} starts; the program's call is ${expected.tool} ${JSON.stringify(expected.args)}`);
  }

  // A decision turn offers the model no installed tool.
  const deciding = flow.current === 'pick' || flow.current === 'choose';
  if (to === 'thinking' && deciding && !same(now.offered, []))
    fail('decision offer', `the decision turn of ${flow.current} offers ${JSON.stringify(now.offered)}`);

  if (to === 'done' && from !== 'done' && (flow.current !== null || !flow.booked))
    fail('done', `done with the flow at ${flow.current} and ${flow.booked ? 'a' : 'no'} trusted booking`);
  return { flow, problems };
}

export interface FlowExploration {
  states: number;
  transitions: number;
  elapsedMs: number;
  byValue: Record<string, number>;
  witnessed: Record<string, number>;
  violations: Violation[];
}

export function exploreFlow(
  input: AgentInput,
  chart: AgentMachine,
  options: { maxStates: number; maxViolations?: number },
): FlowExploration {
  const started = performance.now();
  const scope: AnyActorScope = inertScope();
  const key = (w: FlowWorld) => `${serializeWorld(w.world)}|${JSON.stringify(w.flow)}`;
  const first: FlowWorld = { world: initialWorld(scope, input, chart), flow: INITIAL_FLOW };
  const seen = new Map<string, { parent: string | null; move: string }>([[key(first), { parent: null, move: '' }]]);
  const queue: FlowWorld[] = [first];
  const violations: Violation[] = [];
  const byValue: Record<string, number> = {};
  const witnessed: Record<string, number> = {};
  const count = (what: string) => (witnessed[what] = (witnessed[what] ?? 0) + 1);
  const pathTo = (k: string | null, last: string[]): string[] => {
    const moves: string[] = [];
    for (let at = k; at !== null;) {
      const node = seen.get(at)!;
      if (node.parent !== null) moves.unshift(node.move);
      at = node.parent;
    }
    return [...moves, ...last];
  };
  let transitions = 0;
  for (let i = 0; i < queue.length; i++) {
    const world = queue[i]!;
    const from = key(world);
    const value = valueOf(world.world.machine);
    byValue[value] = (byValue[value] ?? 0) + 1;
    const moves = workflowMoves(world.world);
    // No dead end: a state that is not final always has a way on (a move of the alphabet).
    if (moves.length === 0 && !FINAL_STATES.has(value))
      violations.push({ problem: `P10 dead end: ${value} has no move`, path: pathTo(from, []) });
    for (const move of moves) {
      transitions++;
      const next = applyMove(world.world, move, scope);
      const { flow, problems } = flowEdge(world, move, next);
      for (const problem of problems) violations.push({ problem, path: pathTo(from, [move.type]) });
      witness(world, move, { world: next, flow }, count);
      if (options.maxViolations && violations.length >= options.maxViolations) return summary();
      const reached: FlowWorld = { world: next, flow };
      const k = key(reached);
      if (seen.has(k)) continue;
      if (seen.size >= options.maxStates) throw new Error(`more than ${options.maxStates} states`);
      seen.set(k, { parent: from, move: move.type });
      queue.push(reached);
    }
  }
  return summary();

  function summary(): FlowExploration {
    return {
      states: seen.size,
      transitions,
      elapsedMs: Math.round(performance.now() - started),
      byValue,
      witnessed,
      violations,
    };
  }
}

/** Situations the exploration must have gone through, or the rules would hold vacuously. */
function witness(prev: FlowWorld, move: Move, next: FlowWorld, count: (what: string) => void) {
  for (const [step, fact] of Object.entries(next.flow.facts))
    if (!same(prev.flow.facts[step], fact))
      count(`${step} ${fact.kind === 'call' && !fact.ok ? 'failed' : 'recorded'}`);
  const refused = next.world.machine.context.invalidOutputs > prev.world.machine.context.invalidOutputs;
  if (move.type.startsWith('model: decides') && refused) count('decision refused');
  if (move.type === 'model: answer' && refused) count('answer refused');
  for (const call of startedCalls(prev.world.machine, next.world.machine)) count(`call ${call.tool} started`);
  const [a, b] = [prev.world.machine.context.outcome, next.world.machine.context.outcome];
  if (b && !a) count(`stop: ${b.reason.code}`);
  if (move.type.startsWith('model: calls') && valueOf(prev.world.machine) === 'thinking') count('model call tried');
  if (move.restart || move.type.startsWith('task: cancelled')) count(`${move.type} in ${valueOf(prev.world.machine)}`);
}
