/**
 * The safety rules of the agent machine as checks over one explored state or one explored transition of an
 * `agentWorld`. Each returns the broken rules as readable strings (empty when all hold); the explorer attaches the
 * path that led there.
 *
 * The checks compare the machine with the harness's shadow (what the harness itself knows and delivered), never
 * with the machine's own bookkeeping alone: "the call passed every gate" means the harness built it well-formed and
 * schema-valid, the principal holds its scopes, and the harness's own verdicts passed its hooks.
 */
import type { AnyActorScope } from 'xstate';
import { eventTime } from '../../machines/actors.js';
import type { AgentInput, BudgetCounters } from '../../machines/context.js';
import { hashArguments } from '../../src/hashing.js';
import {
  type AgentSnapshot,
  CATALOG,
  FINAL_STATES,
  INVOKING_STATES,
  type Move,
  USER,
  WAITING_STATES,
  type World,
  applyMove,
  gatesOk,
  refusingGate,
  serializeWorld,
  startedCalls,
  valueOf,
} from './agentWorld.js';

export const HARD_DIMENSIONS: (keyof BudgetCounters)[] = ['modelTurns', 'toolCalls', 'writes', 'retries'];

const CONSTANT_FIELDS = ['taskId', 'goal', 'principal', 'catalog', 'policy', 'modelReservation', 'success', 'startedAt'] as const;

/** Rules about one reached state. */
export function checkState(world: World, input: AgentInput): string[] {
  const problems: string[] = [];
  const fail = (rule: string, detail: string) => problems.push(`${rule}: ${detail}`);
  const snapshot = world.machine;
  const { context } = snapshot;
  const value = valueOf(snapshot);
  const final = FINAL_STATES.has(value);

  // (3) Every state is final, waiting for a human, or waiting on a running actor of its own.
  if (!final && !WAITING_STATES.has(value) && !(value in INVOKING_STATES)) {
    fail('P3 progress', `the machine rests in ${value}, which neither waits for anything nor is final`);
  }
  if (value in INVOKING_STATES && !snapshot.children[INVOKING_STATES[value]!]) {
    fail('P3 progress', `${value} has no running ${INVOKING_STATES[value]} actor to wait for`);
  }
  if (final !== (snapshot.status === 'done')) fail('P3 progress', `${value} has actor status ${snapshot.status}`);
  if (final !== (context.outcome !== null)) fail('P3 progress', `${value} with outcome ${JSON.stringify(context.outcome)}`);

  // (4) Hard-counted budget dimensions stay within [0, limit]; turns never exceed the model-turn limit.
  for (const dim of HARD_DIMENSIONS) {
    const used = context.budget.used[dim];
    if (used < 0 || used > context.budget.limits[dim]) {
      fail('P4 budget', `${dim} used ${used} of ${context.budget.limits[dim]}`);
    }
  }
  if (context.turn > context.budget.limits.modelTurns) fail('P4 budget', `turn ${context.turn} exceeds the model-turn limit`);

  // (5) Permission state is the host's: principal, policy, catalog never change.
  for (const field of CONSTANT_FIELDS) {
    if (JSON.stringify(context[field]) !== JSON.stringify(input[field])) {
      fail('P5 authority', `context.${field} changed`);
    }
  }

  // The call a single-call state works on is named, and is in that state's phase.
  const current = context.batch?.calls.find((c) => c.callId === context.batch?.current);
  const sub = value.split('.')[1];
  if ((value === 'executing.writing' || value === 'executing.reconciling') && current?.phase !== sub) {
    fail('P2 unknown writes', `${value} works on ${context.batch?.current ?? 'no call'}, whose phase is ${current?.phase}`);
  }
  if (value.startsWith('vetting.') && current?.phase !== 'vetting') fail('P1 gates', `${value} vets ${context.batch?.current ?? 'no call'}`);

  // (1)/(5) A pending confirmation exists exactly while waiting for it, bound to what was vetted.
  const pending = context.pendingConfirmation;
  if ((pending !== null) !== (value === 'executing.awaitingConfirmation')) {
    fail('P1 confirmation', `pendingConfirmation ${pending ? pending.id : 'null'} in ${value}`);
  }
  if (pending) {
    const call = context.batch?.calls.find((c) => c.callId === pending.callId);
    const shadow = world.shadow.calls.find((c) => c.callId === pending.callId);
    if (!call || call.phase !== 'awaitingConfirmation') fail('P1 confirmation', `confirmation ${pending.id} is for a call that is not waiting to run`);
    if (context.batch?.current !== pending.callId) fail('P1 confirmation', `${pending.id} is not for the current call (${context.batch?.current})`);
    if (call && pending.argsHash !== hashArguments(call.args)) fail('P1 confirmation', `${pending.id} is bound to other arguments than the call's`);
    if (!gatesOk(shadow) || pending.argsHash !== shadow!.argsHash) fail('P1 confirmation', `${pending.id} is bound to arguments that did not pass every gate`);
    if (!shadow?.needsConfirmation) fail('P1 confirmation', `${pending.id} asks for a call the host's rules do not require confirming`);
    if (pending.userId !== context.principal.userId || pending.policyVersion !== context.policy.version) {
      fail('P1 confirmation', `${pending.id} asks ${pending.userId} under ${pending.policyVersion}`);
    }
    if (pending.expiresAt !== pending.requestedAt + context.policy.confirmationTtlMs || pending.requestedAt > world.shadow.now) {
      fail('P1 confirmation', `${pending.id} has a wrong request time or expiry`);
    }
  }
  // (5) Only a genuine confirmation the harness delivered can mark a call confirmed.
  for (const call of context.batch?.calls ?? []) {
    if (!call.confirmedBy) continue;
    const grant = world.shadow.calls.find((c) => c.callId === call.callId)?.grant;
    if (!grant || grant.confirmationId !== call.confirmedBy.confirmationId || call.confirmedBy.userId !== USER) {
      fail('P5 authority', `call ${call.callId} is marked confirmed by ${call.confirmedBy.confirmationId} without a genuine confirmation`);
    }
  }

  // Final states: every proposed call has exactly one observation, paired by call id.
  if (final && context.batch) {
    const ids = context.batch.calls.map((c) => c.callId);
    if (new Set(ids).size !== ids.length) fail('pairing', `duplicate call ids in the final batch: ${ids.join(', ')}`);
    for (const call of context.batch.calls) {
      if (call.phase !== 'finished' || call.observation?.callId !== call.callId) {
        fail('pairing', `call ${call.callId} ends ${call.phase} without its own observation`);
      }
    }
  }
  if (value === 'done' && context.success && context.evidence.length === 0) fail('P5 authority', 'done without trusted evidence');
  return problems;
}

/** Rules about one transition prev --move--> next. */
export function checkEdge(prev: World, move: Move, next: World, scope: AnyActorScope): string[] {
  const problems: string[] = [];
  const fail = (rule: string, detail: string) => problems.push(`${rule}: ${detail}`);
  const before = prev.machine;
  const after = next.machine;
  const from = valueOf(before);
  const to = valueOf(after);
  const event = move.event;
  const { limits, used } = before.context.budget;

  for (const call of startedCalls(before, after)) {
    // What the harness delivered up to and including this move (a verdict or confirmation may be this move)...
    const shadow = next.shadow.calls.find((c) => c.callId === call.callId);
    // ...and what it had seen of this call before it.
    const history = move.protocol ? undefined : prev.shadow.calls.find((c) => c.callId === call.callId);
    // The same call of the same batch (a new proposal may reuse the call ids of the one before).
    const sameBatch = before.context.batch?.turn === after.context.batch?.turn;
    const old = sameBatch ? before.context.batch?.calls.find((c) => c.callId === call.callId) : undefined;
    const write = to === 'executing.writing';
    const what = `${write ? 'write' : 'read'} ${call.tool} (${call.callId})`;
    // (1) Every gate before any effect.
    if (!shadow?.protocolOk) fail('P1 gates', `${what} runs but its proposal failed the protocol gate`);
    if (!gatesOk(shadow)) fail('P1 gates', `${what} runs without passing schema, business and permission (${shadow ? refusingGate(shadow) ?? 'no verdict' : 'unknown call'})`);
    if (old && old.observation !== null) fail('P1 gates', `${what} runs although it already has an observation`);
    if (CATALOG[call.tool]?.effect !== (write ? 'write' : 'read')) fail('P1 gates', `${what} runs in the wrong executor`);
    const runs = hashArguments(call.args);
    if (shadow && (runs !== shadow.argsHash || call.argsHash !== shadow.argsHash)) {
      fail('P1 gates', `${what} runs with other arguments than were proposed and vetted`);
    }
    if (shadow?.needsConfirmation) {
      if (!shadow.grant) fail('P1 confirmation', `${what} runs without a genuine confirmation`);
      else if (shadow.grant.argsHash !== runs) fail('P1 confirmation', `${what} runs with arguments other than those confirmed`);
      else if (call.confirmedBy?.confirmationId !== shadow.grant.confirmationId) {
        fail('P1 confirmation', `${what} runs on confirmation ${call.confirmedBy?.confirmationId}, not ${shadow.grant.confirmationId}`);
      }
    }
    const at = event ? eventTime(event, after.context.startedAt) : after.context.startedAt;
    if (at >= after.context.budget.deadlineAt) fail('P1 budget', `${what} starts after the deadline`);
    if ((history?.starts ?? 0) === 0) {
      const calls = startedCalls(before, after).length;
      if (used.toolCalls + calls > limits.toolCalls) fail('P1 budget', `${what} starts with no tool-call budget left`);
      if (write && used.writes + 1 > limits.writes) fail('P1 budget', `${what} starts with no write budget left`);
    } else {
      // (2) Only a same-key retry of an unknown write, after a lookup found nothing, for a tool that allows it.
      const afterLookup =
        from === 'executing.reconciling' && event?.type === 'xstate.done.actor.lookup' && event.output.result.kind === 'not_found';
      if (!write) fail('P2 unknown writes', `${what} runs a second time`);
      if (!afterLookup) fail('P2 unknown writes', `${what} runs again without a lookup that found nothing (after ${move.type})`);
      if (!history?.unknown) fail('P2 unknown writes', `${what} runs again although its outcome was known`);
      if (!CATALOG[call.tool]?.sameKeyRetrySafe) fail('P2 unknown writes', `${what} is retried but the tool does not declare sameKeyRetrySafe`);
      if (used.retries + 1 > limits.retries) fail('P1 budget', `${what} is retried with no retry budget left`);
    }
  }

  // (2) An unknown outcome is always reconciled, and only a lookup settles it.
  const unknownOutcome =
    from === 'executing.writing' &&
    ((event?.type === 'xstate.done.actor.write' && event.output.outcome.kind === 'unknown') ||
      event?.type === 'xstate.error.actor.write');
  if (unknownOutcome && to !== 'executing.reconciling') fail('P2 unknown writes', `an unknown write outcome leads to ${to}`);
  for (const shadow of prev.shadow.calls.filter((c) => c.unknown)) {
    const was = before.context.batch?.calls.find((c) => c.callId === shadow.callId);
    const now = after.context.batch?.calls.find((c) => c.callId === shadow.callId);
    if ((was?.phase !== 'writing' && was?.phase !== 'reconciling') || now?.phase !== 'finished') continue;
    const byLookup = event?.type === 'xstate.done.actor.lookup' || event?.type === 'xstate.error.actor.lookup';
    if (!byLookup) fail('P2 unknown writes', `write ${shadow.callId} with an unknown outcome is settled by ${move.type}`);
    if (now.observation?.ok && !(event?.type === 'xstate.done.actor.lookup' && event.output.result.kind === 'found')) {
      fail('P2 unknown writes', `write ${shadow.callId} with an unknown outcome is reported ok without being found`);
    }
  }

  // (1) A call the harness knows must be refused gets its refusal from that gate, and no other result.
  for (const shadow of next.shadow.calls) {
    const sameBatch = before.context.batch?.turn === after.context.batch?.turn;
    const was = sameBatch ? before.context.batch?.calls.find((c) => c.callId === shadow.callId) : undefined;
    const now = after.context.batch?.calls.find((c) => c.callId === shadow.callId);
    if (!now?.observation || was?.observation) continue;
    const gate = refusingGate(shadow);
    if (gate === null) continue;
    const got = now.observation.ok ? 'ok' : (now.observation.gate ?? now.observation.code);
    const stopped = !now.observation.ok && ['loop_detected', 'cancelled', 'internal_error', 'budget_exhausted'].includes(now.observation.code);
    if (now.observation.ok || (!stopped && now.observation.gate !== gate)) {
      fail('P1 gates', `${shadow.tool} (${shadow.callId}) should be refused at the ${gate} gate, got ${got} after ${move.type}`);
    }
  }

  // (4) Hard counters never go back.
  for (const dim of HARD_DIMENSIONS) {
    if (after.context.budget.used[dim] < used[dim]) fail('P4 budget', `${dim} went back from ${used[dim]} to ${after.context.budget.used[dim]}`);
  }

  // (3) An actor's outcome always moves the machine: otherwise it would wait for an actor that has finished.
  if (event && /^xstate\.(done|error)\.actor\./.test(event.type) && !move.restart && serializeWorld(next) === serializeWorld(prev)) {
    fail('P3 progress', `${move.type} leaves ${from} unchanged, with its actor finished`);
  }

  // (5) Output that claims an approval changes nothing that a neutral output would not.
  if (move.benign) {
    const twin = applyMove(prev, { ...move, event: move.benign, benign: undefined }, scope);
    if (authority(twin.machine) !== authority(after)) fail('P5 authority', `${move.type} changes confirmation, permission or budget state`);
  }
  // Refused or premature human input changes nothing at all.
  if (move.inert && serializeWorld(next) !== serializeWorld(prev)) fail('P5 authority', `${move.type} changed the task in ${from}`);

  // Restarts restore exactly what was persisted; a write in flight comes back as "interrupted", then reconciles.
  if (move.restart) {
    if (from === 'executing.writing') {
      if (to !== 'executing.reconciling') fail('P2 unknown writes', `a restart during a write leads to ${to}`);
    } else {
      if (serializeWorld(next) !== serializeWorld(prev)) fail('restart', `restoring ${from} changed the task`);
      const ids = (s: AgentSnapshot) => Object.keys(s.children).sort().join(',');
      if (ids(after) !== ids(before)) fail('restart', `restoring ${from} brings back actors [${ids(after)}], not [${ids(before)}]`);
    }
  }

  // The protocol gate decides as the harness built the proposal to be decided.
  if (move.protocol && event?.type === 'xstate.done.actor.model' && event.output.kind === 'replied' && event.output.event.type === 'model.toolsProposed') {
    const proposed = event.output.event.calls;
    if (move.protocol === 'accepted') {
      const calls = after.context.batch?.calls ?? [];
      if (calls.length !== proposed.length || calls.some((c, i) => c.callId !== proposed[i]!.callId!.trim())) {
        fail('protocol', `${move.type}: the accepted batch is not the proposed calls`);
      }
      if (calls.some((c) => c.observation?.ok === false && c.observation.gate === 'protocol')) fail('protocol', `${move.type} was refused at the protocol gate`);
    }
    if (move.protocol === 'unpairable') {
      if (JSON.stringify(after.context.batch) !== JSON.stringify(before.context.batch)) fail('protocol', `${move.type} changed the batch`);
      if (after.context.invalidOutputs !== before.context.invalidOutputs + 1) fail('protocol', `${move.type} was not counted as invalid`);
    }
    if (move.protocol === 'rejected') {
      const calls = after.context.batch?.calls ?? [];
      const ids = proposed.map((c) => c.callId!.trim());
      if (calls.length !== proposed.length || calls.some((c, i) => c.callId !== ids[i])) {
        fail('protocol', `${move.type}: the rejected batch does not pair one result with each proposed call`);
      }
      for (const call of calls) {
        if (call.phase !== 'finished' || call.observation?.ok !== false || call.observation.gate !== 'protocol') {
          fail('protocol', `${move.type}: call ${call.callId} is not rejected at the protocol gate`);
        }
      }
    }
  }
  return problems;
}

/** What a tool output must never change: confirmations, permissions, budgets, the state itself. */
function authority(snapshot: AgentSnapshot): string {
  const { context } = snapshot;
  return JSON.stringify({
    value: valueOf(snapshot),
    pending: context.pendingConfirmation,
    budget: context.budget,
    principal: context.principal,
    policy: context.policy,
    cancel: context.cancelRequested,
    calls: context.batch?.calls.map((c) => [c.callId, c.phase, c.confirmedBy, c.needsConfirmation, c.confirmationRequests, c.argsHash]),
    current: context.batch?.current ?? null,
  });
}
