/**
 * Replays the paths `xstate/graph` finds, from the start, and checks the order rules from the moves' payloads
 * alone, without the harness's shadow: the proposal's facts, the hook verdicts and the confirmation a run relies on
 * must appear earlier on the same path; a write runs again only right after a lookup found nothing, following an
 * unknown outcome.
 *
 * The paths of `getShortestPaths` form a tree (each is its predecessor's path plus one move), so they are replayed
 * as a trie, each prefix once.
 */
import type { AnyActorScope } from 'xstate';
import type { AgentInput } from '../../machines/context.js';
import { hashArguments } from '../../src/hashing.js';
import { movesFor } from './agentMoves.js';
import {
  CATALOG,
  FINAL_STATES,
  RULES,
  INVOKING_STATES,
  type Move,
  USER,
  WAITING_STATES,
  type World,
  applyMove,
  initialWorld,
  startedCalls,
  valueOf,
} from './agentWorld.js';
import { inertScope } from './explore.js';
import { HARD_DIMENSIONS } from './safetyProperties.js';

const UNKNOWN_OUTCOMES = new Set(['write: unknown (timeout)', 'write: executor fails', 'restart (write interrupted)']);

/** Move type → the paths continuing with it. */
export type Trie = Map<string, Trie>;

/** Where a replay stands: the world, and what the path delivered since the batch began. */
interface Replay {
  world: World;
  /** The moves of this batch that judged calls: the proposal (its facts) and the hook verdicts, by call id. */
  proposal: Move | null;
  /** Moves since the current batch was proposed, with the world each was taken in. */
  batch: { move: Move; before: World }[];
  /** Call id → index in `batch` of the move that last started it. */
  starts: Map<string, number>;
  modelMoves: number;
  scope: AnyActorScope;
}

function startReplay(input: AgentInput): Replay {
  const scope = inertScope();
  return { world: initialWorld(scope, input), proposal: null, batch: [], starts: new Map(), modelMoves: 0, scope };
}

/** One move of a path (found on a representative of each state), replayed, with the order rules checked. */
function replayStep(replay: Replay, type: string, input: AgentInput, moves: (world: World) => Move[]): Replay & { problems: string[] } {
  const problems: string[] = [];
  const { world, scope } = replay;
  const move = moves(world).find((m) => m.type === type);
  if (!move) return { ...replay, problems: [`move "${type}" is not offered in ${valueOf(world.machine)}`] };
  const next = applyMove(world, move, scope);
  const newBatch = move.protocol === 'accepted' || move.protocol === 'rejected';
  const batch = [...(newBatch ? [] : replay.batch), { move, before: world }];
  const starts = new Map(newBatch ? [] : replay.starts);
  const proposal = newBatch ? move : replay.proposal;
  const modelMoves = replay.modelMoves + (type.startsWith('model: ') ? 1 : 0);

  for (const call of startedCalls(world.machine, next.machine)) {
    const facts = proposal?.protocol === 'accepted' ? proposal.calls?.find((f) => f.callId === call.callId) : undefined;
    const rules = RULES[call.tool];
    const passed = (gate: 'business' | 'permission') =>
      batch.some(({ move: m }) => m.check?.gate === gate && m.check.callId === call.callId && m.check.ok);
    if (!facts?.schemaOk) problems.push(`${call.callId} runs without an accepted, schema-valid proposal on this path`);
    if (!rules || !rules.scopes.every((scope) => input.principal.scopes.includes(scope))) problems.push(`${call.callId} runs without the scopes of ${call.tool}`);
    if (rules?.validates && !passed('business')) problems.push(`${call.callId} runs without a passing business validation on this path`);
    if (rules?.authorizes && !passed('permission')) problems.push(`${call.callId} runs without a passing authorization on this path`);
    const needsConfirmation = call.tool === 'send_payment' || (call.tool === 'search_rooms' && (call.args as { day?: unknown }).day === 'sun');
    if (needsConfirmation) {
      const confirmed = batch.some(({ move: m, before }) => {
        const pending = before.machine.context.pendingConfirmation;
        return (
          m.type === 'user: confirms' &&
          m.event?.type === 'user.confirmed' &&
          pending?.callId === call.callId &&
          m.event.confirmationId === pending.id &&
          m.event.confirmationId === call.confirmedBy?.confirmationId &&
          m.event.argsHash === hashArguments(call.args) &&
          m.event.userId === USER &&
          m.event.policyVersion === input.policy.version &&
          m.event.at < pending.expiresAt
        );
      });
      if (!confirmed) problems.push(`${call.callId} runs without an earlier matching confirmation on this path`);
    }
    const previous = starts.get(call.callId);
    if (previous !== undefined) {
      const unknown = batch.slice(previous).some(({ move: m }) => UNKNOWN_OUTCOMES.has(m.type));
      if (type !== 'lookup: not found') problems.push(`${call.callId} runs again after "${type}", not after a lookup that found nothing`);
      if (!unknown) problems.push(`${call.callId} runs again although no attempt of it ended unknown`);
      if (!CATALOG[call.tool]?.sameKeyRetrySafe) problems.push(`${call.callId} (${call.tool}) is retried but is not retry-safe`);
    }
    starts.set(call.callId, batch.length - 1);
  }
  for (const dim of HARD_DIMENSIONS) {
    const [was, is] = [world.machine.context.budget.used[dim], next.machine.context.budget.used[dim]];
    if (is < was || is > input.limits[dim]) problems.push(`${dim} goes from ${was} to ${is} (limit ${input.limits[dim]})`);
  }
  if (modelMoves > input.limits.modelTurns) problems.push(`${modelMoves} model outputs exceed ${input.limits.modelTurns} turns`);
  const end = valueOf(next.machine);
  if (!FINAL_STATES.has(end) && !WAITING_STATES.has(end) && !(end in INVOKING_STATES)) problems.push(`the path ends stuck in ${end}`);
  return { world: next, proposal, batch, starts, modelMoves, scope, problems };
}

/** Replays every prefix in `root` once, depth first; returns the broken rules with their paths. */
export function replayTrie(root: Trie, input: AgentInput, alphabet: (world: World) => Move[] = movesFor): { replayed: number; problems: string[] } {
  const problems: string[] = [];
  let replayed = 0;
  const stack: [Trie, Replay, string[]][] = [[root, startReplay(input), []]];
  while (stack.length > 0) {
    const [node, replay, moves] = stack.pop()!;
    for (const [type, child] of node) {
      const path = [...moves, type];
      const next = replayStep(replay, type, input, alphabet);
      replayed += 1;
      for (const problem of next.problems) problems.push(`${problem}\n    after: ${path.join(' → ')}`);
      stack.push([child, next, path]);
    }
  }
  return { replayed, problems };
}
