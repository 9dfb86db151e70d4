/**
 * The workflow world for the path exploration (P10). The host's flow: the model picks a day among choices (`pick`),
 * the program reads the rooms of that day (`look`; a failed read ends the flow), the model names a room within an
 * output schema (`choose`; room C ends the flow without booking), the program books it (`book`). The exploring model
 * proposes valid and invalid decisions, answers, and real tool calls in decision turns; tools answer ok, fail, or
 * leave the outcome unknown; the task may be cancelled or restarted. The rest of the alphabet is the common one
 * (`agentMoves.ts`), narrowed to what a workflow step meets.
 *
 * The harness keeps its own reading of the flow (`FlowShadow`): the facts it established (decisions it judges valid
 * by its own check, results it delivered), the step that follows by its own branching, and the arguments of the
 * program's next call, computed here, never read from the machine.
 */
import { z } from 'zod';
import type { MachineEvent, ModelActorOutput } from '../../machines/actors.js';
import { type AgentMachine, createAgentMachine } from '../../machines/agentMachine.js';
import type { AgentInput } from '../../machines/context.js';
import type { ModelEvent } from '../../machines/events.js';
import type { WorkflowDefinition, WorkflowFacts } from '../../machines/workflows.js';
import { movesFor } from './agentMoves.js';
import { INPUT, type Move, TOOLKIT, USER, type World, valueOf, withLimits, withPolicy } from './agentWorld.js';

export const DAYS = ['mon', 'tue'] as const;
export const ROOMS = ['A', 'B', 'C'] as const;

/** The host's flow, as the machine runs it. */
/** A decision's value as the flow's rules read it (the machine checked it against the step's schema). */
const decided = (fact: WorkflowFacts[string] | undefined, key: string): string =>
  String((fact?.ok && fact.kind === 'decision' ? (fact.value as Record<string, unknown>) : {})[key]);

export const BOOKING_FLOW: WorkflowDefinition = {
  name: 'booking',
  start: 'pick',
  steps: {
    pick: { purpose: 'the day', decide: { prompt: 'Which day?', choices: DAYS }, next: () => 'look' },
    look: {
      purpose: 'the rooms of that day',
      call: { tool: 'search_rooms', args: (facts) => ({ day: decided(facts.pick, 'choice') }) },
      next: (facts) => (facts.look?.ok ? 'choose' : null),
    },
    choose: {
      purpose: 'the room',
      decide: { prompt: 'Which room?', output: z.strictObject({ room: z.enum(ROOMS) }) },
      next: (facts) => (decided(facts.choose, 'room') === 'C' ? null : 'book'),
    },
    book: {
      purpose: 'book it',
      call: { tool: 'book_room', args: (facts) => ({ room: decided(facts.choose, 'room') }) },
    },
  },
};

/** The chart of the workflow world: the common tools and the booking flow. */
export const WORKFLOW_CHART: AgentMachine = createAgentMachine({
  ...TOOLKIT,
  workflow: (name) => (name === BOOKING_FLOW.name ? BOOKING_FLOW : undefined),
});

export function workflowChartWith(guards: Parameters<AgentMachine['provide']>[0]['guards']): AgentMachine {
  return WORKFLOW_CHART.provide({ guards }) as AgentMachine;
}

/** The task: follows the flow; five model turns (two decisions, re-asks), three calls, two refusals of each kind. */
export const WORKFLOW_INPUT: AgentInput = {
  ...withPolicy(
    { maxInvalidOutputs: 2, maxRejectedTurns: 2 },
    withLimits({ modelTurns: 5, toolCalls: 3, writes: 1, retries: 1 }),
  ),
  workflow: { name: BOOKING_FLOW.name, start: BOOKING_FLOW.start },
};

// --- the harness's own reading of the flow ------------------------------------------------------------------

export type HarnessFact =
  { kind: 'decision'; value: Record<string, string> } | { kind: 'call'; ok: boolean; value: unknown };

export interface FlowShadow {
  /** The step the harness expects next, or null once the flow ended by its reading. */
  current: string | null;
  facts: Record<string, HarnessFact>;
  /** The harness delivered a trusted ok result of the booking. */
  booked: boolean;
}

export const INITIAL_FLOW: FlowShadow = { current: 'pick', facts: {}, booked: false };

/** The harness's own check of a decision for `step`: null when it does not fit, else the value. */
export function harnessDecision(step: string | null, text: string): Record<string, string> | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return null;
  const keys = Object.keys(value);
  const v = value as Record<string, unknown>;
  if (step === 'pick' && keys.length === 1 && (DAYS as readonly unknown[]).includes(v.choice))
    return { choice: v.choice as string };
  if (step === 'choose' && keys.length === 1 && (ROOMS as readonly unknown[]).includes(v.room))
    return { room: v.room as string };
  return null;
}

/** The step after `step` by the harness's own branching. */
export function harnessNext(step: string, facts: FlowShadow['facts']): string | null {
  if (step === 'pick') return 'look';
  if (step === 'look') return facts.look?.kind === 'call' && facts.look.ok ? 'choose' : null;
  if (step === 'choose') return facts.choose?.kind === 'decision' && facts.choose.value.room === 'C' ? null : 'book';
  return null;
}

/** The program's call the harness expects for the current step: tool and arguments from its own facts. */
export function harnessCall(shadow: FlowShadow): { tool: string; args: unknown } | null {
  const fact = (id: string) => shadow.facts[id];
  const value = (id: string) => {
    const f = fact(id);
    return f?.kind === 'decision' ? f.value : {};
  };
  if (shadow.current === 'look') return { tool: 'search_rooms', args: { day: value('pick').choice } };
  if (shadow.current === 'book') return { tool: 'book_room', args: { room: value('choose').room } };
  return null;
}

// --- the alphabet -------------------------------------------------------------------------------------------

const USAGE = { inputTokens: 60, outputTokens: 40, costMicros: 10 };

function modelDone(event: ModelEvent): MachineEvent {
  const output: ModelActorOutput = { kind: 'replied', at: event.at, retriesUsed: 0, event };
  return { type: 'xstate.done.actor.model', output };
}

/** Decisions the model gives, valid for one step or none (the harness judges each by its own check). */
const DECISIONS: { label: string; text: string }[] = [
  { label: 'choice mon', text: '{"choice":"mon"}' },
  { label: 'choice sun (not offered)', text: '{"choice":"sun"}' },
  { label: 'room A', text: '{"room":"A"}' },
  { label: 'room C', text: '{"room":"C"}' },
  { label: 'room Z (outside the schema)', text: '{"room":"Z"}' },
  { label: 'room A with an extra key', text: '{"room":"A","pay":1}' },
  { label: 'not JSON', text: '{"room":' },
];

function modelMoves(world: World): Move[] {
  const at = world.shadow.now;
  const callId = `d-t${world.machine.context.turn}`;
  const moves: Move[] = DECISIONS.map((d) => ({
    type: `model: decides ${d.label}`,
    event: modelDone({ type: 'model.decided', at, callId, arguments: d.text, text: null, usage: USAGE }),
  }));
  moves.push(
    {
      type: 'model: answer',
      event: modelDone({ type: 'model.answered', at, text: 'Room A is booked.', usage: USAGE }),
    },
    {
      type: 'model: calls book_room',
      event: modelDone({
        type: 'model.toolsProposed',
        at,
        calls: [{ callId: 'c1', name: 'book_room', arguments: '{"room":"B"}' }],
        text: null,
        usage: USAGE,
      }),
    },
    {
      type: 'model: calls search_rooms',
      event: modelDone({
        type: 'model.toolsProposed',
        at,
        calls: [{ callId: 'c1', name: 'search_rooms', arguments: '{"day":"tue"}' }],
        text: null,
        usage: USAGE,
      }),
    },
  );
  return moves;
}

/** Tool and hook outcomes the workflow world keeps. */
const KEPT = new Set([
  'validate: pass',
  'validate: reject',
  'authorize: pass',
  'recheck: pass',
  'reads: ok',
  'reads: conflict',
  'reads: transient failure, retries exhausted',
  'write: ok',
  'write: business error (conflict)',
  'write: unknown (timeout)',
  'lookup: found',
  'lookup: not found',
  'restart',
  'restart (write interrupted)',
]);
const CANCEL_IN = new Set(['thinking', 'executing.reading', 'executing.writing']);

export function workflowMoves(world: World): Move[] {
  const value = valueOf(world.machine);
  const common = movesFor(world).filter((m) => KEPT.has(m.type));
  // Cancels on every turn (the common alphabet keeps them to the first), a write's included.
  if (world.machine.status === 'active' && CANCEL_IN.has(value))
    common.push({
      type: value === 'executing.writing' ? 'task: cancelled while a write is unsettled' : 'task: cancelled',
      event: { type: 'task.cancelled', at: world.shadow.now, reason: 'changed my mind', by: USER },
    });
  return value === 'thinking' ? [...modelMoves(world), ...common] : common;
}

export { INPUT };
