/**
 * The safety rules of the agent machine as checks over one explored state or one explored transition of an
 * `agentWorld`. Each returns the broken rules as readable strings (empty when all hold); the explorer attaches the
 * path that led there.
 *
 * The checks compare the machine with the harness's shadow (what the harness itself knows and delivered), never
 * with the machine's own bookkeeping alone: "the call passed every gate" means the harness built it well-formed,
 * schema-valid and within the mandate, the principal holds its scopes, and the harness's own verdicts passed its
 * hooks; "confirmed" means the harness delivered the requester's genuine confirmation, or enough genuine approvals.
 */
import type { AnyActorScope } from 'xstate';
import { UNDOING_STOPS, expectedUndos } from './undoWorld.js';
import { planEdgeProblems, planStateProblems } from './planProperties.js';
import { syncEdgeProblems } from './syncHookMoves.js';
import { compactionEdgeProblems } from './compactionChecks.js';
import { eventTime } from '../../machines/actors.js';
import type { AgentInput, BudgetCounters, CallState } from '../../machines/context.js';
import { hashArguments } from '../../src/hashing.js';
import {
  type AgentSnapshot,
  APPROVER_SCOPE,
  CANCELS_ON_EXPIRY,
  CANCELS_ON_REJECT,
  CATALOG,
  FINAL_STATES,
  INVOKING_STATES,
  type Move,
  REVIEWED_RESULT,
  type ShadowCall,
  USER,
  WAITING_STATES,
  type World,
  applyMove,
  denialKey,
  gatesOk,
  refusingGate,
  serializeWorld,
  startedCalls,
  valueOf,
  vettingRefusal,
} from './agentWorld.js';

export const HARD_DIMENSIONS: (keyof BudgetCounters)[] = ['modelTurns', 'toolCalls', 'writes', 'retries', 'money'];

const CONSTANT_FIELDS = [
  'taskId',
  'goal',
  'principal',
  'mandate',
  'catalog',
  'policy',
  'modelReservation',
  'success',
  'startedAt',
] as const;

/** Observation codes of calls a stop left unrun (the stop's skip code), rather than refused by a gate. */
const SKIP_CODES = [
  'loop_detected',
  'cancelled',
  'internal_error',
  'budget_exhausted',
  'outside_mandate',
  'permission_denied',
];

/** Stops that leave a call unrun before it was vetted. */
const OTHER_STOPS = ['cancelled', 'internal_error', 'budget_exhausted'];

/** The stop code a repeat of a call denied at `gate` ends the task with (policy `onRepeatedDenial: 'stop'`). */
const REPEAT_STOP = { mandate: 'outside_mandate', permission: 'permission_denied' } as const;

/** Which phase a call may be in, in which state of the chart (a phase names the state that works on it). */
const PHASE_STATES: Record<string, (value: string) => boolean> = {
  vetting: (v) => v.startsWith('vetting.') || v === 'thinking',
  ready: () => true,
  awaitingConfirmation: (v) => v === 'executing.awaitingConfirmation',
  rechecking: (v) => v.startsWith('executing.rechecking.') || v === 'executing.resending',
  reading: (v) => v === 'executing.reading',
  writing: (v) => v === 'executing.writing',
  reconciling: (v) => v === 'executing.reconciling',
  awaitingReview: (v) => v === 'reviewRequired',
  finished: () => true,
};

/** The wake-up the harness expects after the n-th failure in a row: doubling from the first, capped at the longest. */
function expectedWake(input: AgentInput, lastFailureAt: number, failures: number): number {
  const { first, longest } = input.policy.modelWakeMs;
  return lastFailureAt + Math.min(longest, first * 2 ** (failures - 1));
}

/** Who decided a confirmation, as the harness requires it: the requester alone, or enough distinct approvers. */
function decisionsProblem(shadow: ShadowCall, call: CallState): string | null {
  const decisions = call.confirmedBy?.decisions ?? [];
  const grant = shadow.grant;
  if (!grant) return 'no genuine confirmation was delivered';
  if (grant.confirmationId !== call.confirmedBy?.confirmationId)
    return `it holds ${call.confirmedBy?.confirmationId}, the genuine one is ${grant.confirmationId}`;
  if (shadow.approvers === 0) {
    if (decisions.length !== 1 || decisions[0]!.userId !== USER || decisions[0]!.as !== 'requester') {
      return `its decisions are ${JSON.stringify(decisions.map((d) => [d.userId, d.as]))}, not the requester's`;
    }
    return null;
  }
  const approvers = new Set(decisions.map((d) => d.userId));
  const genuine = decisions.every(
    (d) => d.as === 'approver' && d.scope === APPROVER_SCOPE && d.userId !== USER && grant.by.includes(d.userId),
  );
  if (!genuine || approvers.size !== decisions.length || approvers.size < shadow.approvers) {
    return `its decisions ${JSON.stringify(decisions.map((d) => [d.userId, d.as, d.scope]))} are not ${shadow.approvers} genuine approvals (${grant.by.join(', ')})`;
  }
  return null;
}

/** Rules about one reached state. */
export function checkState(world: World, input: AgentInput): string[] {
  const problems: string[] = [];
  const fail = (rule: string, detail: string) => problems.push(`${rule}: ${detail}`);
  const snapshot = world.machine;
  const { context } = snapshot;
  const value = valueOf(snapshot);
  const final = FINAL_STATES.has(value);
  const shadowOf = (callId: string | null | undefined) => world.shadow.calls.find((c) => c.callId === callId);

  // (3) Every state is final, waiting (for a human, a reviewer or a timer), or waiting on a running actor of its own.
  if (!final && !WAITING_STATES.has(value) && !(value in INVOKING_STATES)) {
    fail('P3 progress', `the machine rests in ${value}, which neither waits for anything nor is final`);
  }
  if (value in INVOKING_STATES && !snapshot.children[INVOKING_STATES[value]!]) {
    fail('P3 progress', `${value} has no running ${INVOKING_STATES[value]} actor to wait for`);
  }
  if (WAITING_STATES.has(value) && Object.keys(snapshot.children).length > 0) {
    fail('P3 progress', `${value} waits with actors running: ${Object.keys(snapshot.children).join(', ')}`);
  }
  if (final !== (snapshot.status === 'done')) fail('P3 progress', `${value} has actor status ${snapshot.status}`);
  if (final !== (context.outcome !== null))
    fail('P3 progress', `${value} with outcome ${JSON.stringify(context.outcome)}`);

  // (4) Hard-counted budget dimensions (money included) stay within [0, limit]; turns never exceed the model-turn limit.
  // An undo is never refused for budget (it is debited all the same): past the limit only for the undo's own spend.
  const undone = world.shadow.undoes
    ? world.shadow.calls.filter((c) => c.callId.startsWith('undo-') && c.starts > 0)
    : [];
  for (const dim of HARD_DIMENSIONS) {
    const used = context.budget.used[dim];
    const undoSpend = dim === 'writes' || dim === 'toolCalls' ? undone.length : 0;
    if (used < 0 || used > context.budget.limits[dim] + undoSpend) {
      fail('P4 budget', `${dim} used ${used} of ${context.budget.limits[dim]}`);
    }
  }
  if (context.turn > context.budget.limits.modelTurns)
    fail('P4 budget', `turn ${context.turn} exceeds the model-turn limit`);

  // (5) Permission state is the host's: principal, mandate, policy, catalog never change.
  for (const field of CONSTANT_FIELDS) {
    if (context[field] !== input[field] && JSON.stringify(context[field]) !== JSON.stringify(input[field])) {
      fail('P5 authority', `context.${field} changed`);
    }
  }

  // Bookkeeping: a call's phase names the state that works on it; the call a single-call state works on is named.
  for (const call of context.batch?.calls ?? []) {
    if (!PHASE_STATES[call.phase]!(value))
      fail('bookkeeping', `call ${call.callId} is ${call.phase} while the machine is in ${value}`);
  }
  const current = context.batch?.calls.find((c) => c.callId === context.batch?.current);
  const single: Record<string, string> = {
    'executing.writing': 'writing',
    'executing.reconciling': 'reconciling',
    'executing.rechecking.hooks': 'rechecking',
    'executing.resending': 'rechecking',
  };
  if (single[value] && current?.phase !== single[value]) {
    fail(
      single[value] === 'rechecking' ? 'bookkeeping' : 'P2 unknown writes',
      `${value} works on ${context.batch?.current ?? 'no call'}, whose phase is ${current?.phase}`,
    );
  }
  if (value.startsWith('vetting.') && current?.phase !== 'vetting')
    fail('P1 gates', `${value} vets ${context.batch?.current ?? 'no call'}`);

  // (1)/(5) A pending confirmation exists exactly while waiting for it, bound to what was vetted, asking the right people.
  const pending = context.pendingConfirmation;
  // A plan's approval is a pending confirmation too, in its own state (checked by the P9 rules).
  const planApproval = value === 'awaitingPlanApproval';
  if ((pending !== null) !== (value === 'executing.awaitingConfirmation' || planApproval)) {
    fail('P1 confirmation', `pendingConfirmation ${pending ? pending.id : 'null'} in ${value}`);
  }
  if (pending && !planApproval) {
    const call = context.batch?.calls.find((c) => c.callId === pending.callId);
    const shadow = shadowOf(pending.callId);
    if (!call || call.phase !== 'awaitingConfirmation')
      fail('P1 confirmation', `confirmation ${pending.id} is for a call that is not waiting to run`);
    if (context.batch?.current !== pending.callId)
      fail('P1 confirmation', `${pending.id} is not for the current call (${context.batch?.current})`);
    // The stored arguments may have been tampered with (the harness did it): the request still binds the vetted hash.
    if (
      call &&
      (pending.argsHash !== call.argsHash || (!shadow?.tampered && pending.argsHash !== hashArguments(call.args)))
    ) {
      fail('P1 confirmation', `${pending.id} is bound to other arguments than the call's`);
    }
    if (!gatesOk(shadow) || pending.argsHash !== shadow!.argsHash)
      fail('P1 confirmation', `${pending.id} is bound to arguments that did not pass every gate`);
    if (!shadow?.needsConfirmation)
      fail('P1 confirmation', `${pending.id} asks for a call the host's rules do not require confirming`);
    // Bound to the task's policy version, or (asked again after the host's policy changed) to the host's new one.
    if (
      pending.userId !== context.principal.userId ||
      (pending.policyVersion !== context.policy.version && pending.policyVersion !== world.shadow.hostPolicy)
    ) {
      fail('P1 confirmation', `${pending.id} asks ${pending.userId} under ${pending.policyVersion}`);
    }
    if (
      pending.expiresAt !== pending.requestedAt + context.policy.confirmationTtlMs ||
      pending.requestedAt > world.shadow.now
    ) {
      fail('P1 confirmation', `${pending.id} has a wrong request time or expiry`);
    }
    if (shadow) {
      const wants = shadow.approvers > 0 ? [APPROVER_SCOPE, shadow.approvers] : [null, 1];
      if (pending.approverScope !== wants[0] || pending.approvalsRequired !== wants[1]) {
        fail(
          'P1 approvals',
          `${pending.id} asks ${pending.approvalsRequired} decision(s) under ${pending.approverScope}, the rules want ${wants[1]} under ${wants[0]}`,
        );
      }
      // Every approval recorded so far is one the harness delivered as genuine, each approver once, and fewer than needed.
      const genuine = shadow.approvals.filter((a) => a.confirmationId === pending.id).map((a) => a.userId);
      const ids = pending.approvals.map((d) => d.userId);
      const recorded = pending.approvals.every(
        (d) => genuine.includes(d.userId) && d.as === 'approver' && d.scope === APPROVER_SCOPE,
      );
      if (!recorded || new Set(ids).size !== ids.length || ids.length >= pending.approvalsRequired) {
        fail(
          'P1 approvals',
          `${pending.id} waits with approvals ${JSON.stringify(pending.approvals.map((d) => [d.userId, d.as, d.scope]))} of ${pending.approvalsRequired}; genuine: [${genuine.join(', ')}]`,
        );
      }
    }
  }
  // (5) Only a genuine confirmation the harness delivered (the requester's, or enough approvals) marks a call confirmed.
  for (const call of context.batch?.calls ?? []) {
    if (!call.confirmedBy) continue;
    const shadow = shadowOf(call.callId);
    const problem = shadow ? decisionsProblem(shadow, call) : 'the harness knows no such call';
    if (problem)
      fail(
        'P5 authority',
        `call ${call.callId} is marked confirmed by ${call.confirmedBy.confirmationId}, but ${problem}`,
      );
  }

  // A write held for review: the task rests in reviewRequired exactly while `review` names the held write (the
  // current call, awaitingReview, same tool and key), one whose outcome the harness made unknown or inconsistent,
  // for the reason the harness gave. (The bookkeeping rule above says nothing else is running meanwhile.)
  const review = context.review;
  if ((review !== null) !== (value === 'reviewRequired'))
    fail('P2 review', `review ${review ? review.callId : 'null'} in ${value}`);
  if (review) {
    const call = context.batch?.calls.find((c) => c.callId === review.callId);
    const shadow = shadowOf(review.callId);
    const held =
      call !== undefined &&
      call.phase === 'awaitingReview' &&
      context.batch?.current === call.callId &&
      review.tool === call.tool &&
      review.idempotencyKey === call.idempotencyKey &&
      shadow !== undefined &&
      CATALOG[shadow.tool]?.effect === 'write' &&
      (shadow.unknown || shadow.needsReview) &&
      // Held again after its resend was refused: still unsettled, whichever way it was held first.
      (shadow.heldAgain || (review.reason === 'needs_review') === shadow.needsReview);
    if (!held) {
      const made = shadow?.needsReview
        ? 'needs_review'
        : shadow?.unknown
          ? 'an unknown outcome'
          : 'no unknown or inconsistent outcome';
      fail(
        'P2 review',
        `the review of ${review.callId} (${review.reason}, ${review.tool} ${review.idempotencyKey}) is not for the held write (${call?.phase}); the harness gave ${made}`,
      );
    }
  }

  // Waiting out a model outage: the outage the harness made, waking up with the backoff the policy gives. (That the
  // machine never waits past the policy's outage limit is checked on the edges into this state.)
  const outage = context.outage;
  if (value === 'waitingForModel') {
    const made = world.shadow.outage;
    const wake = made && expectedWake(input, made.lastFailureAt, made.failures);
    if (
      !outage ||
      !made ||
      outage.since !== made.since ||
      outage.attempts !== made.failures ||
      outage.wakeAt !== wake
    ) {
      fail(
        'P3 outage',
        `waitingForModel with outage ${JSON.stringify(outage)}; the harness made ${JSON.stringify(made)} (wake-up due at ${wake})`,
      );
    }
  }

  // A question waits with the expiry the policy gives from the time it was asked.
  if (value === 'awaitingUser') {
    const asked = world.shadow.questionAt;
    if (context.question === null || asked === null || context.questionExpiresAt !== asked + input.policy.answerTtlMs) {
      fail(
        'P3 question',
        `awaitingUser with question ${JSON.stringify(context.question)} expiring at ${context.questionExpiresAt} (asked at ${asked})`,
      );
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
  if (value === 'done' && (!context.success || context.evidence.length === 0))
    fail('P5 authority', 'done without a success criterion met by trusted evidence');
  if (value === 'answered' && context.success)
    fail('P5 authority', 'answered although the task declares a success criterion');
  problems.push(...planStateProblems(world));
  return problems;
}

/** Rules about one transition prev --move--> next. */
export function checkEdge(
  prev: World,
  move: Move,
  next: World,
  scope: AnyActorScope,
  input: AgentInput,
  count: (what: string) => void = () => {},
): string[] {
  const problems: string[] = [];
  const fail = (rule: string, detail: string) => problems.push(`${rule}: ${detail}`);
  const before = prev.machine;
  const after = next.machine;
  const from = valueOf(before);
  const to = valueOf(after);
  const event = move.event;
  const { limits, used } = before.context.budget;
  const changed = serializeWorld(next) !== serializeWorld(prev);
  const sameBatch = before.context.batch?.turn === after.context.batch?.turn;
  const fromReviewer = move.review?.reviewer === true && event?.type === 'review.resolved';
  // A stop whose writes are undone first (the undo world): rules about where a stop leads read the stop being undone.
  const undoingStarted = !before.context.unwinding && after.context.unwinding !== null;
  const held = undoingStarted ? after.context.unwinding!.stop : null;
  // An edge that ends the undoing of an earlier stop ends with that stop: not a decision on this edge's event.
  const undone = before.context.unwinding;
  const completesUndo =
    undone !== null &&
    FINAL_STATES.has(to) &&
    after.context.outcome?.status === undone.stop.status &&
    after.context.outcome.reason.code === undone.stop.reason.code;
  const ends = held
    ? held.status === 'budget_exhausted'
      ? 'budgetExhausted'
      : held.status
    : completesUndo
      ? null
      : to;
  const endCode = held ? held.reason.code : after.context.outcome?.reason.code;

  for (const call of startedCalls(before, after)) {
    // What the harness delivered up to and including this move (a verdict or confirmation may be this move)...
    const shadow = next.shadow.calls.find((c) => c.callId === call.callId);
    // ...and what it had seen of this call before it.
    const history = move.protocol ? undefined : prev.shadow.calls.find((c) => c.callId === call.callId);
    // The same call of the same batch (a new proposal may reuse the call ids of the one before).
    const old = sameBatch ? before.context.batch?.calls.find((c) => c.callId === call.callId) : undefined;
    const write = to === 'executing.writing';
    const what = `${write ? 'write' : 'read'} ${call.tool} (${call.callId})`;
    // A timeout is unknown, not none: no write runs on facts the world's read could not establish.
    if (write && prev.shadow.unknownReads > 0)
      fail('P1 verification', `${what} runs after ${prev.shadow.unknownReads} unknown read(s) and no success since`);
    // (1) Every gate before any effect.
    if (!shadow?.protocolOk) fail('P1 gates', `${what} runs but its proposal failed the protocol gate`);
    if (shadow?.tampered)
      fail('P1 tamper', `${what} runs although its stored arguments were altered after they were vetted`);
    if (!gatesOk(shadow))
      fail(
        'P1 gates',
        `${what} runs without passing schema, mandate, business and permission (${shadow ? (refusingGate(shadow) ?? 'no verdict') : 'unknown call'})`,
      );
    if (old && old.observation !== null) fail('P1 gates', `${what} runs although it already has an observation`);
    if (CATALOG[call.tool]?.effect !== (write ? 'write' : 'read'))
      fail('P1 gates', `${what} runs in the wrong executor`);
    const runs = hashArguments(call.args);
    if (shadow && (runs !== shadow.argsHash || call.argsHash !== shadow.argsHash)) {
      fail('P1 gates', `${what} runs with other arguments than were proposed and vetted`);
    }
    if (shadow?.needsConfirmation) {
      if (!shadow.grant)
        fail(shadow.approvers > 0 ? 'P1 approvals' : 'P1 confirmation', `${what} runs without a genuine confirmation`);
      else if (shadow.grant.argsHash !== runs)
        fail('P1 confirmation', `${what} runs with arguments other than those confirmed`);
      else {
        const problem = decisionsProblem(shadow, call);
        if (problem) fail(shadow.approvers > 0 ? 'P1 approvals' : 'P1 confirmation', `${what} runs, but ${problem}`);
      }
    }
    const when = event ? eventTime(event, after.context.startedAt) : after.context.startedAt;
    // An undo (the undo world's compensation of a booking) is never refused for budget: it is debited all the same.
    const undo = next.shadow.undoes && after.context.unwinding !== null;
    if (when >= after.context.budget.deadlineAt && !undo) fail('P1 budget', `${what} starts after the deadline`);
    if ((history?.starts ?? 0) === 0) {
      const calls = startedCalls(before, after).length;
      if (used.toolCalls + calls > limits.toolCalls && !undo)
        fail('P1 budget', `${what} starts with no tool-call budget left`);
      if (write) {
        if (used.writes + 1 > limits.writes && !undo) fail('P1 budget', `${what} starts with no write budget left`);
        // The money it moves is debited as it starts (the state rule keeps money used within its limit).
        const amount = shadow?.amount ?? 0;
        if (after.context.budget.used.money !== used.money + amount)
          fail('P4 budget', `${what} moves ${amount} but debits ${after.context.budget.used.money - used.money}`);
      }
    } else {
      // (2) Only a same-key resend of an unknown or held write: after a lookup found nothing, or on a reviewer's word.
      const allowed =
        history?.resend === 'lookup'
          ? history.unknown
          : history?.resend === 'review'
            ? history.unknown || history.needsReview
            : false;
      if (!write) fail('P2 unknown writes', `${what} runs a second time`);
      if (!history?.resend)
        fail(
          'P2 unknown writes',
          `${what} runs again without a lookup that found nothing or a reviewer's retry (after ${move.type})`,
        );
      else if (!allowed) fail('P2 unknown writes', `${what} runs again although its outcome was known`);
      if (!CATALOG[call.tool]?.sameKeyRetrySafe)
        fail('P2 unknown writes', `${what} is retried but the tool does not declare sameKeyRetrySafe`);
      if (used.retries + 1 > limits.retries) fail('P1 budget', `${what} is retried with no retry budget left`);
      if (after.context.budget.used.writes !== used.writes || after.context.budget.used.money !== used.money) {
        fail('P4 budget', `the retry of ${what} debits another write or its money again`);
      }
    }
    if (write) {
      // A write is sent (first, or again) only right after a passing re-check of exactly this call, from the state
      // that re-checks it (`rechecking.hooks` first, `resending` again), as the session that re-check saw.
      const again = (history?.starts ?? 0) > 0;
      const by = again ? 'executing.resending' : 'executing.rechecking.hooks';
      const rechecked =
        from === by && move.check?.gate === 'recheck' && move.check.ok && move.check.callId === call.callId;
      if (!rechecked || shadow?.recheck !== 'pass')
        fail('P1 recheck', `${what} is sent from ${from} after ${move.type}, not right after a passing re-check`);
      else if (
        event?.type === 'xstate.done.actor.recheck' &&
        JSON.stringify(call.runAs) !== JSON.stringify(event.output.principal)
      ) {
        fail(
          'P5 authority',
          `${what} runs as ${JSON.stringify(call.runAs)}, not as the session the re-check saw (${JSON.stringify(event.output.principal)})`,
        );
      }
    }
  }

  // (2) An unknown outcome is always reconciled; an inconsistent one always held for review.
  if (from === 'executing.writing' && !move.restart) {
    const outcome =
      event?.type === 'xstate.done.actor.write'
        ? event.output.outcome.kind
        : event?.type === 'xstate.error.actor.write'
          ? 'unknown'
          : null;
    if (outcome === 'unknown' && to !== 'executing.reconciling')
      fail('P2 unknown writes', `an unknown write outcome leads to ${to}`);
    if (outcome === 'review' && to !== 'reviewRequired')
      fail('P2 review', `a write the tool found inconsistent leads to ${to}`);
  }
  // The review desk: a write is held only when lookups could not settle it or its tool found it inconsistent, and
  // only a reviewer (the review scope, not the task's user) resolves it, as they said.
  if (to === 'reviewRequired' && from !== 'reviewRequired') {
    const lookup =
      event?.type === 'xstate.done.actor.lookup'
        ? event.output.result.kind
        : event?.type === 'xstate.error.actor.lookup'
          ? 'failed'
          : null;
    const inconsistent =
      from === 'executing.writing' &&
      event?.type === 'xstate.done.actor.write' &&
      event.output.outcome.kind === 'review';
    const unsettled = from === 'executing.reconciling' && lookup !== null && lookup !== 'found';
    // A resend a reviewer asked for that its re-check refused (or that failed) goes back to the review desk.
    const resend = prev.shadow.calls.find((c) => c.callId === before.context.batch?.current)?.resend;
    const refusedResend = from === 'executing.resending' && resend === 'review' && !(move.check?.ok ?? false);
    if (!inconsistent && !unsettled && !refusedResend)
      fail('P2 review', `a write is held for review from ${from} after ${move.type}`);
  }
  if (from === 'reviewRequired' && changed && !move.restart && event?.type !== 'task.cancelled') {
    const held = before.context.review;
    // (When undoing starts in the same step, the reviewed write's batch is gone: P7 checks it was remembered.)
    // Undoing may start in the same step (the batch closes, the task stops): the held write is then the last batch's.
    const call = after.context.batch?.calls.find((c) => c.callId === held?.callId);
    const observed = JSON.stringify(call?.observation ?? null);
    if (!fromReviewer) fail('P2 review', `the held write is released by ${move.type}, not by a reviewer`);
    else if (event.resolution === 'happened') {
      // The harness's reading of a valid result: what REVIEWED_RESULT says the tool returns.
      const valid =
        move.review?.valid === true &&
        held !== null &&
        JSON.stringify(event.result) === JSON.stringify(REVIEWED_RESULT[held.tool]);
      if (!valid)
        fail(
          'P2 review',
          `${held?.tool} is released on "happened" with a result the tool never returns: ${JSON.stringify(event.result)}`,
        );
      else if (
        !undoingStarted &&
        (!call?.observation?.ok || JSON.stringify(call.observation.data) !== JSON.stringify(event.result))
      ) {
        fail(
          'P2 review',
          `the reviewer found the write done with ${JSON.stringify(event.result)}, but it is observed as ${observed}`,
        );
      }
    } else if (
      event.resolution === 'not_happened' &&
      (call?.observation?.ok !== false || call.observation.code !== 'not_executed')
    ) {
      fail('P2 review', `a write found not done is observed as ${observed}`);
    }
    // (A retry is a start: the start rules above say when one may happen.)
  }

  // A resend is prepared only after a lookup found nothing, or on a genuine reviewer's retry, of a retry-safe write;
  // refused by its re-check, a resend a reviewer asked for goes back to them, one after a lookup is not sent.
  if (to === 'executing.resending' && from !== 'executing.resending') {
    const current = after.context.batch?.calls.find((c) => c.callId === after.context.batch?.current);
    const notFound =
      from === 'executing.reconciling' &&
      event?.type === 'xstate.done.actor.lookup' &&
      event.output.result.kind === 'not_found';
    const retry = from === 'reviewRequired' && fromReviewer && event.resolution === 'retry';
    if ((!notFound && !retry) || !current || !CATALOG[current.tool]?.sameKeyRetrySafe) {
      fail('P2 unknown writes', `a resend of ${current?.tool} is prepared from ${from} after ${move.type}`);
    }
  }
  if (from === 'executing.resending' && to !== 'executing.resending' && to !== 'executing.writing' && !move.restart) {
    const callId = before.context.batch?.current;
    const resend = prev.shadow.calls.find((c) => c.callId === callId)?.resend;
    if (resend === 'review' && to !== 'reviewRequired' && to !== 'cancelled')
      fail('P2 review', `a refused resend a reviewer asked for leads to ${to}`);
  }
  // A cancel while a write is held for review waits for the reviewer; once they resolved it, the task is cancelled.
  if (from === 'reviewRequired' && event?.type === 'task.cancelled') {
    const { cancelRequested: _was, ...rest } = before.context;
    const { cancelRequested, ...kept } = after.context;
    if (to !== 'reviewRequired' || cancelRequested === null || JSON.stringify(rest) !== JSON.stringify(kept)) {
      fail(
        'P2 review',
        `a cancel while a write is held for review leads to ${to} (cancel requested: ${JSON.stringify(cancelRequested)})`,
      );
    }
  }
  if (
    from === 'reviewRequired' &&
    prev.shadow.cancelAsked &&
    fromReviewer &&
    to !== 'reviewRequired' &&
    (ends ?? to) !== 'cancelled'
  ) {
    fail(
      'P2 review',
      `the review is resolved (${event.resolution}) with a cancel waiting, and the task goes on to ${to}`,
    );
  }

  // Only a lookup, or a reviewer, settles a write whose outcome is unknown or held.
  for (const shadow of prev.shadow.calls.filter((c) => c.unknown || c.needsReview)) {
    const was = before.context.batch?.calls.find((c) => c.callId === shadow.callId);
    const now = sameBatch ? after.context.batch?.calls.find((c) => c.callId === shadow.callId) : undefined;
    if (
      (was?.phase !== 'writing' && was?.phase !== 'reconciling' && was?.phase !== 'awaitingReview') ||
      now?.phase !== 'finished'
    )
      continue;
    const byLookup = event?.type === 'xstate.done.actor.lookup' || event?.type === 'xstate.error.actor.lookup';
    const byReview = from === 'reviewRequired' && fromReviewer && event.resolution !== 'retry';
    if (!byLookup && !byReview)
      fail('P2 unknown writes', `write ${shadow.callId} with an unknown outcome is settled by ${move.type}`);
    const found = event?.type === 'xstate.done.actor.lookup' && event.output.result.kind === 'found';
    const reported = byReview && event.resolution === 'happened' && move.review?.valid === true;
    if (now.observation?.ok && !found && !reported) {
      fail(
        'P2 unknown writes',
        `write ${shadow.callId} with an unknown outcome is reported ok without being found or reported by a reviewer`,
      );
    }
  }

  // A model outage: waited out while within the policy's limit (transient failures only), resumed only when due,
  // on the same turn.
  // (A prompt refused as too long is not an outage: the compaction rules, C5, say where it leads.)
  if (
    from === 'thinking' &&
    event?.type === 'xstate.done.actor.model' &&
    event.output.kind === 'failed' &&
    event.output.failure.code !== 'context_too_long'
  ) {
    const made = next.shadow.outage;
    const within =
      event.output.failure.transient && made !== null && made.lastFailureAt - made.since < input.policy.modelOutageMs;
    if (within && to !== 'waitingForModel')
      fail('P3 outage', `a transient model failure within the outage limit leads to ${to}`);
    if (!within && (to !== 'failed' || after.context.outcome?.reason.code !== 'model_unavailable')) {
      fail(
        'P3 outage',
        `a model failure past the outage limit (or not transient) leads to ${to} (${after.context.outcome?.reason.code})`,
      );
    }
  }
  if (from === 'waitingForModel' && to === 'thinking') {
    const made = prev.shadow.outage;
    // Early only at an operator's request, from an operator of the task's tenant, charged as one more model turn.
    const early =
      event?.type === 'operator.retryModel' &&
      event.actor.operator &&
      event.actor.tenantId === before.context.principal.tenantId;
    if (
      !early &&
      (event?.type !== 'timer.modelRetryDue' ||
        made === null ||
        event.at < expectedWake(input, made.lastFailureAt, made.failures))
    ) {
      fail('P3 outage', `the model is asked again after ${move.type}, before its wake-up`);
    }
    const turns = used.modelTurns + (early ? 1 : 0);
    if (after.context.turn !== before.context.turn || after.context.budget.used.modelTurns !== turns) {
      fail(
        'P4 budget',
        `resuming after an outage (${move.type}) charged ${after.context.budget.used.modelTurns - used.modelTurns} model turns`,
      );
    }
    if (early && after.context.budget.used.modelTurns > after.context.budget.limits.modelTurns)
      fail('P4 budget', "an operator's early retry overdrew the model turns");
  }

  // An unanswered question: it expires only at the policy's time after it was asked, then replans or stops as the
  // policy says.
  if (from === 'awaitingUser' && event?.type === 'timer.answerExpired') {
    const due = prev.shadow.questionAt !== null && event.at >= prev.shadow.questionAt + input.policy.answerTtlMs;
    if (!due && changed)
      fail('P3 question', `a question expired early (at ${event.at}, asked at ${prev.shadow.questionAt})`);
    if (due && to === 'awaitingUser') fail('P3 question', 'an expired question still waits');
    const stopped = to === 'failed' && after.context.outcome?.reason.code === 'no_answer';
    if (due && (input.policy.onAnswerExpiry === 'stop') !== stopped)
      fail('P3 question', `an expired question under policy ${input.policy.onAnswerExpiry} leads to ${to}`);
  }

  // Confirmation policies: a rejection or an expiry cancels the task exactly when the tool's policy says so.
  const pending = before.context.pendingConfirmation;
  if (from === 'executing.awaitingConfirmation' && pending) {
    const shadow = prev.shadow.calls.find((c) => c.callId === pending.callId);
    const approvers = shadow?.approvers ?? 0;
    // Who may decide, by the harness's reading: the requester, or (for approvals) a holder of the scope, once.
    const decider = (userId: string, scopes: string[]) =>
      approvers === 0
        ? userId === USER
        : userId !== USER &&
          scopes.includes(APPROVER_SCOPE) &&
          !shadow!.approvals.some((a) => a.confirmationId === pending.id && a.userId === userId);
    const rejected =
      event?.type === 'user.rejected' &&
      event.confirmationId === pending.id &&
      (event.userId === USER || (approvers > 0 && event.scopes.includes(APPROVER_SCOPE)));
    const expired =
      (event?.type === 'timer.confirmationExpired' &&
        event.confirmationId === pending.id &&
        event.at >= pending.expiresAt) ||
      (event?.type === 'user.confirmed' &&
        event.confirmationId === pending.id &&
        decider(event.userId, event.scopes) &&
        event.at >= pending.expiresAt);
    const cancelledFor = ends === 'cancelled' ? endCode : null;
    if (rejected && CANCELS_ON_REJECT.has(pending.tool) !== (cancelledFor === 'confirmation_rejected')) {
      fail('P1 confirmation', `a rejection of ${pending.tool} leads to ${to} (${cancelledFor ?? 'not cancelled'})`);
    }
    if (expired && CANCELS_ON_EXPIRY.has(pending.tool) !== (cancelledFor === 'confirmation_expired')) {
      fail(
        'P1 confirmation',
        `an expired confirmation of ${pending.tool} leads to ${to} (${cancelledFor ?? 'not cancelled'})`,
      );
    }
  }

  // A call denied before (permission or mandate), proposed again, never gets past vetting; with policy `stop` the
  // task stops at it with the denial's code. (With `replan`, the gates refuse it again, as the rules above check.)
  for (const shadow of next.shadow.calls) {
    const denial = prev.shadow.denied.find((d) => d.key === denialKey(shadow.tool, shadow.argsHash));
    // An undo is the host's call, not the model's proposal: the memory of denials does not apply to it.
    if (!denial || !shadow.schemaOk || (after.context.unwinding && shadow.callId.startsWith('undo-'))) continue;
    const was = sameBatch ? before.context.batch?.calls.find((c) => c.callId === shadow.callId) : undefined;
    const now = after.context.batch?.calls.find((c) => c.callId === shadow.callId);
    if (!now || now.phase === 'vetting' || (was && was.phase !== 'vetting')) continue;
    const observation = now.observation;
    const what = `${shadow.tool} (${shadow.callId}), denied before at the ${denial.gate} gate,`;
    const code = REPEAT_STOP[denial.gate];
    if (now.phase !== 'finished' || observation?.ok !== false)
      fail('P1 denial', `${what} is ${now.phase} after ${move.type}`);
    else if (
      !observation.gate &&
      FINAL_STATES.has(to) &&
      OTHER_STOPS.includes(observation.code) &&
      after.context.outcome?.reason.code === observation.code
    ) {
      // Left unrun by another stop (a cancel, a crashed hook) before it was vetted: not a decision on it.
    } else if (
      input.policy.onRepeatedDenial === 'stop' &&
      (to !== 'failed' || after.context.outcome?.reason.code !== code || observation.code !== code)
    ) {
      fail(
        'P1 denial',
        `${what} did not stop the task with ${code} (${to}, ${after.context.outcome?.reason.code}, ${observation.code})`,
      );
    }
  }

  // (1) A call the harness knows a vetting gate must refuse is never admitted: it does not reach `ready` (the re-check
  // before a write would refuse some of them again, but that is a second line, not the gate).
  for (const shadow of next.shadow.calls) {
    const was = sameBatch ? before.context.batch?.calls.find((c) => c.callId === shadow.callId) : undefined;
    const now = after.context.batch?.calls.find((c) => c.callId === shadow.callId);
    if (!now || now.phase === 'vetting' || now.phase === 'finished' || (was && was.phase !== 'vetting')) continue;
    const gate = vettingRefusal(shadow);
    if (gate !== null)
      fail(
        'P1 gates',
        `${shadow.tool} (${shadow.callId}) is admitted (${now.phase}) although the ${gate} gate must refuse it, after ${move.type}`,
      );
  }

  // (1) A call the harness knows must be refused gets its refusal from that gate, and no other result.
  for (const shadow of next.shadow.calls) {
    const was = sameBatch ? before.context.batch?.calls.find((c) => c.callId === shadow.callId) : undefined;
    const now = after.context.batch?.calls.find((c) => c.callId === shadow.callId);
    if (!now?.observation || was?.observation) continue;
    const gate = refusingGate(shadow);
    if (gate === null) continue;
    const got = now.observation.ok ? 'ok' : (now.observation.gate ?? now.observation.code);
    const stopped = !now.observation.ok && !now.observation.gate && SKIP_CODES.includes(now.observation.code);
    if (now.observation.ok || (!stopped && now.observation.gate !== gate)) {
      fail(
        'P1 gates',
        `${shadow.tool} (${shadow.callId}) should be refused at the ${gate} gate, got ${got} after ${move.type}`,
      );
    }
  }

  // (7) Compensation, in the undo world: a stop the policy undoes, with bookings that succeeded, undoes each of them
  // once, newest first, by releasing its room; any other stop undoes nothing; an undo is never undone.
  if (next.shadow.undoes) {
    const started = !before.context.unwinding && after.context.unwinding !== null;
    const stopped = !FINAL_STATES.has(from) && FINAL_STATES.has(to);
    if (started) {
      const status = after.context.unwinding!.stop.status;
      const expected = expectedUndos(next.shadow.written);
      const got = (after.context.batch?.calls ?? []).map((c) => ({ callId: c.callId, tool: c.tool, args: c.args }));
      if (!UNDOING_STOPS.has(status)) fail('P7 compensation', `a ${status} stop started undoing writes`);
      if (expected.length === 0) fail('P7 compensation', 'undoing started with no booking that succeeded');
      if (JSON.stringify(got) !== JSON.stringify(expected))
        fail('P7 compensation', `the undos are ${JSON.stringify(got)}, not ${JSON.stringify(expected)}`);
    }
    if (stopped && !before.context.unwinding && !started) {
      const status = after.context.outcome?.status ?? '';
      if (UNDOING_STOPS.has(status) && next.shadow.written.length > 0)
        fail('P7 compensation', `the task stopped ${status} with bookings that succeeded, and undid none`);
    }
    if (stopped && (before.context.unwinding || started)) {
      const listed = after.context.outcome?.compensations ?? [];
      if (listed.length !== next.shadow.written.length)
        fail(
          'P7 compensation',
          `the outcome lists ${listed.length} undo(s) for ${next.shadow.written.length} booking(s)`,
        );
      for (const c of listed) {
        const undo = next.shadow.calls.find((s) => s.callId === c.callId);
        if (c.result === 'compensated' && (undo?.starts ?? 0) === 0 && c.code === null)
          fail('P7 compensation', `${c.callId} is said compensated but never ran`);
      }
    }
    const undoWrites = after.context.compensable.filter((w) => w.tool !== 'book_room');
    if (undoWrites.length > 0) fail('P7 compensation', `an undo was remembered to be undone: ${undoWrites[0]!.tool}`);
  }

  // (8) Presence, in the presence world: while the harness says the user is away, no model turn starts and no write
  // starts (undoing a stop's writes aside); the machine's own record of it agrees; a pause ends only by the user's
  // return, its expiry (which cancels the task with user_away), or another stop.
  if (next.shadow.presence && !FINAL_STATES.has(to)) {
    if ((after.context.away !== null) !== next.shadow.away)
      fail('P8 presence', `the machine says the user is ${after.context.away ? 'away' : 'present'} after ${move.type}`);
    if (next.shadow.away && after.context.turn > before.context.turn)
      fail('P8 presence', `a model turn starts while the user is away, after ${move.type}`);
    if (next.shadow.away && !after.context.unwinding)
      for (const call of startedCalls(before, after))
        if (call.effect === 'write') fail('P8 presence', `${call.tool} starts while the user is away`);
    const pausedStates = new Set(['paused', 'executing.pausedBeforeWrite']);
    if (pausedStates.has(to) && !next.shadow.away) fail('P8 presence', `${to} while the user is present`);
  }
  if (next.shadow.presence && event?.type === 'timer.awayExpired' && !move.inert) {
    const code = after.context.outcome?.reason.code ?? after.context.unwinding?.stop.reason.code;
    if (code !== 'user_away') fail('P8 presence', `an expired pause leads to ${to} (${code ?? 'no stop'})`);
  }

  problems.push(...planEdgeProblems(prev, move, next));
  problems.push(...syncEdgeProblems(prev, move, next, count));
  problems.push(...compactionEdgeProblems(prev, move, next, input, count));

  // (4) Hard counters never go back.
  for (const dim of HARD_DIMENSIONS) {
    if (after.context.budget.used[dim] < used[dim])
      fail('P4 budget', `${dim} went back from ${used[dim]} to ${after.context.budget.used[dim]}`);
  }

  // (3) An actor's outcome always moves the machine: otherwise it would wait for an actor that has finished.
  if (event && /^xstate\.(done|error)\.actor\./.test(event.type) && !move.restart && !changed) {
    fail('P3 progress', `${move.type} leaves ${from} unchanged, with its actor finished`);
  }

  // (5) Output that claims an approval changes nothing that a neutral output would not.
  if (move.benign) {
    const twin = applyMove(prev, { ...move, event: move.benign, benign: undefined }, scope);
    if (authority(twin.machine) !== authority(after))
      fail('P5 authority', `${move.type} changes confirmation, permission or budget state`);
  }
  // Refused or premature human input (and early timers) change nothing at all.
  if (move.inert && changed) fail('P5 authority', `${move.type} changed the task in ${from}`);

  // Restarts restore exactly what was persisted; a write in flight comes back as "interrupted", then reconciles.
  if (move.restart) {
    if (from === 'executing.writing') {
      if (to !== 'executing.reconciling') fail('P2 unknown writes', `a restart during a write leads to ${to}`);
    } else {
      if (changed) fail('restart', `restoring ${from} changed the task`);
      const ids = (s: AgentSnapshot) => Object.keys(s.children).sort().join(',');
      if (ids(after) !== ids(before))
        fail('restart', `restoring ${from} brings back actors [${ids(after)}], not [${ids(before)}]`);
    }
  }

  // The protocol gate decides as the harness built the proposal to be decided.
  if (
    move.protocol &&
    event?.type === 'xstate.done.actor.model' &&
    event.output.kind === 'replied' &&
    event.output.event.type === 'model.toolsProposed'
  ) {
    const proposed = event.output.event.calls;
    // Undoing started in the same step (the batch ran and the task stopped): the batch is the undos, checked by P7.
    const undoing = !before.context.unwinding && after.context.unwinding !== null;
    if (move.protocol && undoing) {
      // (checked by P7; the proposal's batch ran and was closed before the stop)
    } else if (move.protocol === 'accepted') {
      const calls = after.context.batch?.calls ?? [];
      if (calls.length !== proposed.length || calls.some((c, i) => c.callId !== proposed[i]!.callId!.trim())) {
        fail('protocol', `${move.type}: the accepted batch is not the proposed calls`);
      }
      // (A call of a tool not offered in this step, by the harness's reading, is refused at the protocol gate.)
      const offered = (callId: string) => next.shadow.calls.find((c) => c.callId === callId)?.offered !== false;
      if (calls.some((c) => c.observation?.ok === false && c.observation.gate === 'protocol' && offered(c.callId)))
        fail('protocol', `${move.type} was refused at the protocol gate`);
    }
    if (move.protocol === 'unpairable' && !undoing) {
      if (JSON.stringify(after.context.batch) !== JSON.stringify(before.context.batch))
        fail('protocol', `${move.type} changed the batch`);
      if (after.context.invalidOutputs !== before.context.invalidOutputs + 1)
        fail('protocol', `${move.type} was not counted as invalid`);
    }
    if (move.protocol === 'rejected' && !undoing) {
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

/** What a tool output must never change: confirmations, permissions, budgets, denials, the state itself. */
function authority(snapshot: AgentSnapshot): string {
  const { context } = snapshot;
  return JSON.stringify({
    value: valueOf(snapshot),
    pending: context.pendingConfirmation,
    budget: context.budget,
    principal: context.principal,
    mandate: context.mandate,
    policy: context.policy,
    cancel: context.cancelRequested,
    denied: context.denied,
    review: context.review,
    calls: context.batch?.calls.map((c) => [
      c.callId,
      c.phase,
      c.confirmedBy,
      c.confirmation,
      c.confirmationRequests,
      c.argsHash,
    ]),
    current: context.batch?.current ?? null,
  });
}
