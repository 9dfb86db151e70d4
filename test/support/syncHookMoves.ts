/**
 * The sync-hook world's model moves and rules (`SYNC_CHART`; the hooks themselves in `syncHooks.ts`). The model
 * proposes bookings (one, two, after an asynchronously validated payment, one outside the mandate) each with the host's
 * answers for its hooks; the rest of the world is the common one. Rules, read off the harness's own answers:
 * - S1 a hook is asked only for a call of the batch, with its proposed arguments, once per step, and only once every
 *   earlier gate passed it (a validate after the schema and the mandate, an authorize after the validate and scopes);
 * - S2 a booking refused at business or permission carries its own hook's answer, never another call's;
 * - S3 a synchronous hook never leaves the judging step (no `validating` or `authorizing` for the booking).
 * That a refused hook never lets the call run, nor be admitted, is the common P1 gates rules', on the shadow's verdicts.
 */
import type { MachineEvent, ModelActorOutput } from '../../machines/actors.js';
import type { ModelEvent, ProposedCall } from '../../machines/events.js';
import { hashArguments } from '../../src/hashing.js';
import { type Move, type World, valueOf } from './agentWorld.js';
import { type HookAnswers, type HookName, ONE_BOOKING, TWO_BOOKINGS, refusalOf } from './syncHooks.js';

const USAGE = { inputTokens: 60, outputTokens: 40, costMicros: 10 };
const book = (callId: string, room: string): ProposedCall => ({
  callId,
  name: 'book_room',
  arguments: JSON.stringify({ room }),
});
const PAYMENT: ProposedCall = { callId: 'c1', name: 'send_payment', arguments: '{"amount":5}' };

function said(event: ModelEvent): MachineEvent {
  const output: ModelActorOutput = { kind: 'replied', at: event.at, retriesUsed: 0, event };
  return { type: 'xstate.done.actor.model', output };
}

/** The model's moves in the sync-hook world: proposals with the host's answers for their bookings, or an answer. */
export function syncModelMoves(world: World): Move[] {
  const at = world.shadow.now;
  const propose = (type: string, calls: ProposedCall[], hooks: Record<string, HookAnswers>): Move => ({
    type: `model: ${type}`,
    protocol: 'accepted',
    calls: calls.map((c) => ({ callId: c.callId!, schemaOk: true })),
    hooks,
    event: said({ type: 'model.toolsProposed', at, calls, text: null, usage: USAGE }),
  });
  const moves: Move[] = [
    ...ONE_BOOKING.map(([label, a]) => propose(`booking (${label})`, [book('c1', 'A')], { c1: a })),
    ...TWO_BOOKINGS.map(([label, a, b]) =>
      propose(`two bookings (${label})`, [book('c1', 'A'), book('c2', 'B')], { c1: a, c2: b }),
    ),
    // The payment's validation is asynchronous: the booking after it is judged in the step of the payment's verdict.
    ...ONE_BOOKING.filter(([label]) => !label.includes('unavailable') && !label.includes('throws')).map(([label, a]) =>
      propose(`payment then booking (${label})`, [PAYMENT, book('c2', 'A')], { c2: a }),
    ),
    // Outside the mandate: refused before the hooks, which must not be asked.
    propose('booking outside the mandate', [book('c1', 'Z')], { c1: { validate: 'pass', authorize: 'pass' } }),
    { type: 'model: answer', event: said({ type: 'model.answered', at, text: 'Room A is booked.', usage: USAGE }) },
  ];
  return moves;
}

/**
 * The sync-hook world's alphabet: the common one, narrowed past vetting (what happens to a call once admitted does
 * not depend on how its hooks were asked): passing re-checks and writes, the user's confirmation or rejection, the
 * payment's asynchronous verdicts; restarts only while the payment is validated or authorized.
 */
const SYNC_KEEP = new Set([
  'recheck: pass',
  'write: ok',
  'reads: ok',
  'user: confirms',
  'user: rejects',
  'validate: pass',
  'validate: reject',
  'authorize: pass',
  'authorize: deny',
]);
export function syncAlphabet(world: World, all: Move[]): Move[] {
  const vetting = valueOf(world.machine).startsWith('vetting.');
  return all.filter((m) => m.type.startsWith('model: ') || SYNC_KEEP.has(m.type) || (vetting && m.restart));
}

/** The sync-hook world's rules on one transition (empty elsewhere). */
export function syncEdgeProblems(prev: World, move: Move, next: World, count: (what: string) => void): string[] {
  const answers = next.shadow.hooks;
  if (!answers) return [];
  const problems: string[] = [];
  const fail = (rule: string, detail: string) => problems.push(`${rule}: ${detail}`);
  const before = prev.machine.context;
  const after = next.machine.context;
  const sameBatch = before.batch?.turn === after.batch?.turn;
  const shadowOf = (callId: string) => next.shadow.calls.find((c) => c.callId === callId);
  // S1: who is asked what, and when.
  const seen = new Set<string>();
  for (const q of next.asked ?? []) {
    const what = `${q.hook} of ${q.callId}`;
    const shadow = shadowOf(q.callId);
    const call = after.batch?.calls.find((c) => c.callId === q.callId);
    const was = sameBatch && !move.protocol ? before.batch?.calls.find((c) => c.callId === q.callId) : undefined;
    if (!shadow || !call) {
      fail('S1 sync hooks', `${what} is asked, but no such call is in the batch`);
      continue;
    }
    const key = `${q.hook} ${q.callId}${q.recheck ? ' again' : ''}`;
    if (seen.has(key)) fail('S1 sync hooks', `${what} is asked twice in one step`);
    seen.add(key);
    if (hashArguments(JSON.parse(q.args)) !== shadow.argsHash)
      fail('S1 sync hooks', `${what} is asked about other arguments than were proposed`);
    // The re-check right before the write asks them again (a tool whose re-check the gate asks itself).
    if (q.recheck) {
      // It ends the re-check: the write runs, or the re-check refuses it
      const ended =
        call.phase === 'writing' ||
        // (a reviewer's retry it refuses goes back to them)
        call.phase === 'awaitingReview' ||
        (call.observation?.ok === false && call.observation.summary.includes('checked again before the write'));
      if (call.tool !== 'book_room' || !ended)
        fail('S1 sync hooks', `${what} is asked by a re-check that decided nothing`);
      count(`sync ${q.hook} asked at the re-check`);
      continue;
    }
    if (was && was.phase !== 'vetting') fail('S1 sync hooks', `${what} is asked after the call was judged`);
    const earlier = shadow.protocolOk && shadow.offered && shadow.schemaOk && shadow.mandateOk;
    const forAuthorize = shadow.business === 'pass' && shadow.scopeOk;
    if (!earlier || (q.hook === 'authorize' && !forAuthorize))
      fail('S1 sync hooks', `${what} is asked although an earlier gate refuses the call`);
    count(`sync ${q.hook} asked`);
    if (valueOf(prev.machine) === 'vetting.validating' || valueOf(prev.machine) === 'vetting.authorizing')
      count("sync hook asked in the step of another call's asynchronous verdict");
  }
  // S2: a booking's refusal is its own hook's answer.
  for (const call of after.batch?.calls ?? []) {
    const was = sameBatch ? before.batch?.calls.find((c) => c.callId === call.callId) : undefined;
    const observation = call.observation;
    // Refused in vetting (the re-check before the write has verdicts of its own).
    if (call.tool !== 'book_room' || !observation || observation.ok || was?.observation) continue;
    if (was && was.phase !== 'vetting') continue;
    if (observation.gate !== 'business' && observation.gate !== 'permission') continue;
    // Refused by the re-check right before the write, which says so (`recheckNowWorld.ts` asks its hooks there).
    if (observation.summary.includes('checked again before the write')) continue;
    const hook: HookName = observation.gate === 'business' ? 'validate' : 'authorize';
    const answer = answers[call.callId]?.[hook];
    const own = refusalOf(hook, call.callId);
    const matches =
      answer === 'refuse'
        ? observation.code === own.code && observation.summary === own.summary
        : answer === 'unavailable' || answer === 'throws'
          ? observation.code === 'unavailable'
          : false;
    if (!matches)
      fail(
        'S2 sync hooks',
        `${call.callId} is refused at ${observation.gate} with ${observation.code} "${observation.summary}", but its ${hook} hook answered ${answer ?? 'nothing'}`,
      );
    count(`booking refused by its sync ${hook} (${answer})`);
  }
  // S3: never an invoked hook state for the booking.
  const to = valueOf(next.machine);
  const current = after.batch?.calls.find((c) => c.callId === after.batch?.current);
  if ((to === 'vetting.validating' || to === 'vetting.authorizing') && current?.tool === 'book_room')
    fail('S3 sync hooks', `the booking ${current.callId} waits in ${to}`);
  if (to === 'executing.writing' && current?.tool === 'book_room' && valueOf(prev.machine) !== to)
    count('booking written after its sync hooks passed');
  return problems;
}
