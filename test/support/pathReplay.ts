/**
 * Replays the paths `xstate/graph` finds, from the start, and checks the order rules from the moves' payloads
 * alone, without the harness's shadow: the proposal's facts (schema-valid, within the mandate), the hook verdicts,
 * the passing re-check and the confirmation (the user's, or enough distinct approvers') a run relies on must appear
 * earlier on the same path, and a call whose stored arguments were tampered with never runs; every write is sent
 * right after its passing re-check, and sent again only after a lookup found nothing, following an unknown outcome,
 * or on a reviewer's retry of a write held for review.
 *
 * The paths of `getShortestPaths` form a tree (each is its predecessor's path plus one move), so they are replayed
 * as a trie, each prefix once.
 */
import type { AnyActorScope } from 'xstate';
import type { AgentMachine } from '../../machines/agentMachine.js';
import type { AgentInput } from '../../machines/context.js';
import { hashArguments } from '../../src/hashing.js';
import { movesFor } from './agentMoves.js';
import {
  APPROVAL_THRESHOLD,
  APPROVALS_NEEDED,
  APPROVER_SCOPE,
  CATALOG,
  FINAL_STATES,
  RULES,
  INVOKING_STATES,
  type Move,
  USER,
  WAITING_STATES,
  type World,
  applyMove,
  fitsMandate,
  initialWorld,
  startedCalls,
  valueOf,
} from './agentWorld.js';
import { inertScope } from './explore.js';
import { HARD_DIMENSIONS } from './safetyProperties.js';

const UNKNOWN_OUTCOMES = new Set(['write: unknown (timeout)', 'write: executor fails', 'restart (write interrupted)']);
/** Outcomes after which a write may be held for review, and a reviewer may have it retried. */
const HELD_OUTCOMES = new Set([...UNKNOWN_OUTCOMES, 'write: needs review']);
/** Decisions that confirm: the requester's, and the approvers'. */
const APPROVALS = new Set(['approver A: approves', 'approver B: approves']);

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

function startReplay(input: AgentInput, chart?: AgentMachine): Replay {
  const scope = inertScope();
  return {
    world: initialWorld(scope, input, chart),
    proposal: null,
    batch: [],
    starts: new Map(),
    modelMoves: 0,
    scope,
  };
}

/** One move of a path (found on a representative of each state), replayed, with the order rules checked. */
function replayStep(
  replay: Replay,
  type: string,
  input: AgentInput,
  moves: (world: World) => Move[],
): Replay & { problems: string[] } {
  const problems: string[] = [];
  const { world, scope } = replay;
  const move = moves(world).find((m) => m.type === type);
  if (!move) return { ...replay, problems: [`move "${type}" is not offered in ${valueOf(world.machine)}`] };
  const next = applyMove(world, move, scope);
  const newBatch = move.protocol === 'accepted' || move.protocol === 'rejected';
  const batch = [...(newBatch ? [] : replay.batch), { move, before: world }];
  const starts = new Map(newBatch ? [] : replay.starts);
  const proposal = newBatch ? move : replay.proposal;
  // Model turns: a reply each (a failed output waits out an outage within its turn, or ends the task).
  const replied = move.event?.type === 'xstate.done.actor.model' && move.event.output.kind === 'replied';
  const modelMoves = replay.modelMoves + (replied ? 1 : 0);

  for (const call of startedCalls(world.machine, next.machine)) {
    const facts = proposal?.protocol === 'accepted' ? proposal.calls?.find((f) => f.callId === call.callId) : undefined;
    const rules = RULES[call.tool];
    const passed = (gate: 'business' | 'permission') =>
      batch.some(({ move: m }) => m.check?.gate === gate && m.check.callId === call.callId && m.check.ok);
    if (!facts?.schemaOk) problems.push(`${call.callId} runs without an accepted, schema-valid proposal on this path`);
    if (!rules || !rules.scopes.every((scope) => input.principal.scopes.includes(scope)))
      problems.push(`${call.callId} runs without the scopes of ${call.tool}`);
    if (rules?.validates && !passed('business'))
      problems.push(`${call.callId} runs without a passing business validation on this path`);
    if (rules?.authorizes && !passed('permission'))
      problems.push(`${call.callId} runs without a passing authorization on this path`);
    // The proposal's own arguments for this call (what was vetted), read off the proposal move.
    const proposed =
      proposal?.event?.type === 'xstate.done.actor.model' &&
      proposal.event.output.kind === 'replied' &&
      proposal.event.output.event.type === 'model.toolsProposed'
        ? proposal.event.output.event.calls.find((c) => c.callId?.trim() === call.callId)
        : undefined;
    const args = proposed ? (JSON.parse(proposed.arguments) as Record<string, unknown>) : {};
    if (!fitsMandate(call.tool, args)) problems.push(`${call.callId} runs outside the mandate`);
    if (hashArguments(call.args) !== hashArguments(args))
      problems.push(`${call.callId} runs with arguments other than proposed`);
    if (batch.some(({ move: m }) => m.tamper?.callId === call.callId))
      problems.push(`${call.callId} runs although its stored arguments were tampered with on this path`);
    const amount = call.tool === 'send_payment' && typeof args.amount === 'number' ? args.amount : 0;
    const approvers = amount > APPROVAL_THRESHOLD ? APPROVALS_NEEDED : 0;
    const needsConfirmation = call.tool === 'send_payment' || (call.tool === 'search_rooms' && args.day === 'sun');
    if (needsConfirmation) {
      const decisions = batch.filter(({ move: m, before }) => {
        const pending = before.machine.context.pendingConfirmation;
        const event = m.event;
        return (
          event?.type === 'user.confirmed' &&
          (approvers === 0
            ? m.type === 'user: confirms' && event.userId === USER
            : APPROVALS.has(m.type) && event.userId !== USER && event.scopes.includes(APPROVER_SCOPE)) &&
          pending?.callId === call.callId &&
          event.confirmationId === pending.id &&
          event.confirmationId === call.confirmedBy?.confirmationId &&
          event.argsHash === hashArguments(call.args) &&
          event.policyVersion === pending.policyVersion &&
          event.at < pending.expiresAt
        );
      });
      const deciders = new Set(decisions.map(({ move: m }) => (m.event as { userId: string }).userId));
      if (deciders.size < Math.max(1, approvers)) {
        problems.push(
          `${call.callId} runs on ${deciders.size} earlier matching decision(s) on this path (${approvers ? `${approvers} approvers` : 'the requester'} needed)`,
        );
      }
    }
    const previous = starts.get(call.callId);
    if (previous !== undefined) {
      // Sent again: after its last attempt ended unknown (or held for review), a lookup found nothing, or a reviewer
      // asked for a retry, on this path.
      const since = batch.slice(previous).map(({ move: m }) => m.type);
      const lookup = since.lastIndexOf('lookup: not found');
      const review = since.lastIndexOf('reviewer: retry');
      const unknownBefore = (at: number) => since.slice(0, at).some((t) => UNKNOWN_OUTCOMES.has(t));
      const heldBefore = (at: number) => since.slice(0, at).some((t) => HELD_OUTCOMES.has(t));
      if (lookup < 0 && review < 0)
        problems.push(
          `${call.callId} runs again after "${type}", with no lookup that found nothing nor a reviewer's retry since its last attempt`,
        );
      else if (!(lookup >= 0 && unknownBefore(lookup)) && !(review >= 0 && heldBefore(review))) {
        problems.push(`${call.callId} runs again although no attempt of it ended unknown or was held for review`);
      }
      if (!CATALOG[call.tool]?.sameKeyRetrySafe)
        problems.push(`${call.callId} (${call.tool}) is retried but is not retry-safe`);
    }
    // A write is sent (first or again) right after its passing re-check.
    if (CATALOG[call.tool]?.effect === 'write' && (type !== 'recheck: pass' || move.check?.callId !== call.callId)) {
      problems.push(`${call.callId} is sent after "${type}", not right after a passing re-check`);
    }
    starts.set(call.callId, batch.length - 1);
  }
  for (const dim of HARD_DIMENSIONS) {
    const [was, is] = [world.machine.context.budget.used[dim], next.machine.context.budget.used[dim]];
    if (is < was || is > input.limits[dim])
      problems.push(`${dim} goes from ${was} to ${is} (limit ${input.limits[dim]})`);
  }
  if (modelMoves > input.limits.modelTurns)
    problems.push(`${modelMoves} model replies exceed ${input.limits.modelTurns} turns`);
  const end = valueOf(next.machine);
  if (!FINAL_STATES.has(end) && !WAITING_STATES.has(end) && !(end in INVOKING_STATES))
    problems.push(`the path ends stuck in ${end}`);
  return { world: next, proposal, batch, starts, modelMoves, scope, problems };
}

/** Replays every prefix in `root` once, depth first; returns the broken rules with their paths. */
export function replayTrie(
  root: Trie,
  input: AgentInput,
  alphabet: (world: World) => Move[] = movesFor,
  chart?: AgentMachine,
): { replayed: number; problems: string[] } {
  const problems: string[] = [];
  let replayed = 0;
  const stack: [Trie, Replay, string[]][] = [[root, startReplay(input, chart), []]];
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
