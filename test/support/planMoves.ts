/**
 * The plan world's task and alphabet. The task runs in `plan_first` mode: the model must propose a plan before any
 * tool runs; a plan with a write waits for the user's approval. The exploring model proposes a good plan (a read,
 * then a booking that depends on it), a read-only plan, a cyclic one, one not JSON and one naming a tool nobody
 * installed; it calls the plan's tools in order or out of it, or answers. The user approves (with the plan's hash, or
 * another's), rejects, lets the approval expire, or cancels; intruders and early timers try too. Tools answer ok,
 * fail, or leave the outcome unknown. The rest of the alphabet (`agentMoves.ts`) is narrowed to what a plan changes.
 */
import type { MachineEvent, ModelActorOutput } from '../../machines/actors.js';
import type { ModelEvent, ProposedCall } from '../../machines/events.js';
import type { AgentInput } from '../../machines/context.js';
import { INPUT, INTRUDER, type Move, USER, type World, valueOf, withLimits, withPolicy } from './agentWorld.js';
import { type HarnessStep, type ProposedPlan, harnessPlanHash } from './planWorld.js';

/** The plan world's task: plans first, approval of plans with a write, two proposals at most; four model turns. */
export const PLAN_INPUT: AgentInput = withPolicy(
  { planning: { mode: 'plan_first', approval: 'writes', approverScope: null, maxProposals: 2, maxSteps: 4 } },
  withLimits({ modelTurns: 5, toolCalls: 4, writes: 1, retries: 1 }),
);

const USAGE = { inputTokens: 60, outputTokens: 40, costMicros: 10 };

const step = (id: string, tool: string, purpose: string, depends_on: string[] = []): HarnessStep => ({
  id,
  tool,
  purpose,
  depends_on,
});
const wellFormed = (label: string, steps: HarnessStep[]) => ({ label, steps, refusal: null, text: { steps } });

/** The plans the model proposes, with what the harness knows of each (the call id is the turn's). */
const PLANS: { label: string; steps: HarnessStep[] | null; refusal: ProposedPlan['refusal']; text: unknown }[] = [
  wellFormed('good plan', [
    step('find', 'search_rooms', 'find a free room on Monday'),
    step('book', 'book_room', 'book the room found', ['find']),
  ]),
  wellFormed('read-only plan', [step('look', 'search_rooms', 'see which rooms are free')]),
  {
    label: 'cyclic plan',
    steps: null,
    refusal: 'plan_cycle',
    text: { steps: [step('a', 'search_rooms', 'look', ['b']), step('b', 'book_room', 'book', ['a'])] },
  },
  {
    label: 'plan with an unknown tool',
    steps: null,
    refusal: 'unknown_tool',
    text: { steps: [step('x', 'drop_all_rooms', 'drop')] },
  },
  { label: 'malformed plan', steps: null, refusal: 'plan_malformed', text: '{"steps":[' },
];

/** What the model does in a turn besides planning: calls of the plan's tools, in order or not, and the answer. */
const CALLS: { label: string; calls: ProposedCall[] }[] = [
  { label: 'read', calls: [{ callId: 'c1', name: 'search_rooms', arguments: '{"day":"mon"}' }] },
  { label: 'write', calls: [{ callId: 'c1', name: 'book_room', arguments: '{"room":"A"}' }] },
  {
    label: 'read and write at once',
    calls: [
      { callId: 'c1', name: 'search_rooms', arguments: '{"day":"tue"}' },
      { callId: 'c2', name: 'book_room', arguments: '{"room":"B"}' },
    ],
  },
];

function modelDone(event: ModelEvent): MachineEvent {
  const output: ModelActorOutput = { kind: 'replied', at: event.at, retriesUsed: 0, event };
  return { type: 'xstate.done.actor.model', output };
}

/** The model's moves in the plan world. Refused plans are proposed in the first turn only (they change no plan). */
function planModelMoves(world: World): Move[] {
  const at = world.shadow.now;
  const { turn } = world.machine.context;
  const moves: Move[] = [];
  for (const p of PLANS) {
    if (p.steps === null && turn > 1) continue;
    const callId = `plan-t${turn}`;
    const args = typeof p.text === 'string' ? p.text : JSON.stringify(p.text);
    moves.push({
      type: `model: ${p.label}`,
      plan: { label: p.label, callId, arguments: args, steps: p.steps, refusal: p.refusal },
      event: modelDone({ type: 'model.planProposed', at, callId, arguments: args, text: null, usage: USAGE }),
    });
  }
  for (const c of CALLS) {
    moves.push({
      type: `model: ${c.label}`,
      protocol: 'accepted',
      calls: c.calls.map((call) => ({ callId: call.callId!, schemaOk: true })),
      event: modelDone({ type: 'model.toolsProposed', at, calls: c.calls, text: null, usage: USAGE }),
    });
  }
  moves.push({
    type: 'model: answer',
    event: modelDone({ type: 'model.answered', at, text: 'Room A is booked.', usage: USAGE }),
  });
  return moves;
}

type Confirm = Extract<MachineEvent, { type: 'user.confirmed' }>;

/** The plan waits for approval: the user and others decide, or the timer fires. */
function approvalMoves(world: World): Move[] {
  const pending = world.machine.context.pendingConfirmation;
  if (!pending) return [];
  const at = world.shadow.now;
  const confirm = (patch: Partial<Confirm>): MachineEvent => ({
    type: 'user.confirmed',
    at,
    confirmationId: pending.id,
    argsHash: pending.argsHash,
    userId: USER,
    scopes: INPUT.principal.scopes,
    policyVersion: INPUT.policy.version,
    ...patch,
  });
  // The hash of another plan than the one waiting (the read-only one): what a stale approval page would send.
  const other = harnessPlanHash(PLANS[1]!.steps!);
  const moves: Move[] = [
    { type: 'user: approves the plan', event: confirm({}) },
    { type: 'user: approves another plan', inert: true, event: confirm({ argsHash: other }) },
    { type: 'user: approves a wrong id', inert: true, event: confirm({ confirmationId: `${pending.id}-forged` }) },
    { type: 'intruder: approves', inert: true, event: confirm({ userId: INTRUDER, scopes: [] }) },
    { type: 'user: approves after expiry', event: confirm({ at: Math.max(at, pending.expiresAt) }) },
    {
      type: 'user: rejects the plan',
      event: { type: 'user.rejected', at, confirmationId: pending.id, userId: USER, scopes: [], reason: 'no' },
    },
    {
      type: 'intruder: rejects',
      inert: true,
      event: { type: 'user.rejected', at, confirmationId: pending.id, userId: INTRUDER, scopes: [], reason: null },
    },
    {
      type: 'timer: approval expired',
      event: { type: 'timer.confirmationExpired', at: Math.max(at, pending.expiresAt), confirmationId: pending.id },
    },
  ];
  if (at < pending.expiresAt)
    moves.push({
      type: 'timer: fires early',
      inert: true,
      event: { type: 'timer.confirmationExpired', at, confirmationId: pending.id },
    });
  return moves;
}

/** Tool and hook outcomes the plan world keeps: each kind of result a step's status may (or may not) follow. */
const KEPT = new Set([
  'validate: pass',
  'validate: reject',
  'authorize: pass',
  'recheck: pass',
  'reads: ok',
  'reads: conflict',
  'reads: transient failure, retries exhausted',
  'reads: executor reports nothing',
  'write: ok',
  'write: business error (conflict)',
  'write: unknown (timeout)',
  'lookup: found',
  'lookup: not found',
  'reviewer: happened',
  'reviewer: not happened',
  'restart',
]);
/** States a cancel is tried in: waiting for the plan's approval, the model, a read (a stop with a plan mid-way). */
const CANCEL_IN = new Set(['awaitingPlanApproval', 'thinking', 'executing.reading']);

/** The plan world's alphabet, from the common one (`everyMove`) for the state. */
export function planAlphabet(world: World, common: Move[]): Move[] {
  const value = valueOf(world.machine);
  if (value === 'thinking') return [...planModelMoves(world), ...common.filter(keepCommon(value))];
  if (value === 'awaitingPlanApproval') return [...approvalMoves(world), ...common.filter(keepCommon(value))];
  return common.filter(keepCommon(value));
}

const keepCommon = (value: string) => (move: Move) =>
  KEPT.has(move.type) || (move.type === 'task: cancelled' && CANCEL_IN.has(value));
