/**
 * The re-check a gate asks itself (`canRecheckNow`: a tool whose hooks are synchronous or absent, with no rate limit,
 * under a host that refreshes no session) is the invoked re-check it replaces, taken in the move that reaches the
 * write: the same worlds are reached, with the same journal on every move. The sync-hook world is explored twice per
 * answer the hooks give at the re-check (and at the re-check of a resend): with the booking re-checked by the gate,
 * and with it re-checked by the invoked actor whose answer comes within the same move (`recheckNowWorld.ts`). The
 * two explorations, the journal each move emitted included, must match. Mutant gates are caught.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AgentMachine } from '../machines/agentMachine.js';
import { type Move, type World, valueOf, withLimits } from './support/agentWorld.js';
import { type Exploration, type Violation, explore, report } from './support/explore.js';
import { journals, leanChart, recheckHost, resendMoves, stepwiseChart } from './support/recheckNowWorld.js';
import type { HookAnswers } from './support/syncHooks.js';
import { scaled } from './support/timeScale.js';

const INPUT = withLimits({ modelTurns: 2, writes: 2 });
const MAX_STATES = 60_000;
const PASS: HookAnswers = { validate: 'pass', authorize: 'pass' };
const RECHECKED = 'checked again before the write';
const hashOf = (value: unknown) => createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 16);
const EMPTY = hashOf([]);

/** The world explored with `chart`, each move's journal counted by its hash (so the explorations compare it too). */
function explored(chart: AgentMachine, first: HookAnswers, resend = PASS, moves?: (w: World) => Move[]): Exploration {
  recheckHost.answers = first;
  recheckHost.resend = resend;
  return explore(INPUT, {
    maxStates: MAX_STATES,
    chart,
    ...(moves ? { moves } : {}),
    witness: (prev, move, next, count) => {
      count(`journal ${move.type} ${hashOf(journals.get(next.machine) ?? [])}`);
      const to = valueOf(next.machine);
      const { batch } = next.machine.context;
      const current = batch?.calls.find((c) => c.callId === batch.current);
      if (to === 'executing.writing' && valueOf(prev.machine) !== to && current?.tool === 'book_room')
        count(current.writeAttempts > 1 ? 'booking sent again' : 'booking written');
      for (const call of batch?.calls ?? []) {
        const was = prev.machine.context.batch?.calls.find((p) => p.callId === call.callId);
        const refused = call.observation?.ok === false && call.observation.summary.includes(RECHECKED);
        if (call.tool === 'book_room' && refused && !was?.observation)
          count(`booking refused at the re-check (${call.observation!.ok ? '' : call.observation!.gate})`);
      }
      if (to === 'reviewRequired' && move.type === 'reviewer: retry') count('retry refused, back to the reviewer');
    },
  });
}

/**
 * Three common rules know the invoked re-check only, as a world of its own: a write comes right after
 * `rechecking.hooks` (or `resending`); a write is sent again after the move that permits it (here it is sent in that
 * move); a retry refused in `resending` is held again (here it is refused in the reviewer's move).
 */
const invokedOnly = ({ problem, path }: Violation) =>
  (problem.startsWith('P2 review') &&
    problem.includes('is not for the held write') &&
    path.at(-1) === 'reviewer: retry') ||
  (problem.startsWith('P1 recheck') && problem.includes('not right after a passing re-check')) ||
  (problem.startsWith('P2 unknown writes') &&
    /runs again without a lookup that found nothing or a reviewer's retry \(after (lookup: not found|reviewer: retry)\)$/.test(
      problem,
    ));

function compare(name: string, lean: Exploration, stepwise: Exploration, expected: string) {
  const seen = lean.witnessed[expected] ?? 0;
  console.log(`[recheckNow] ${name}: ${lean.states} states, ${lean.transitions} transitions; ${expected}: ${seen}`);
  const broken = lean.violations.filter((v) => !invokedOnly(v));
  expect(broken, report(broken)).toEqual([]);
  // Not vacuous: the booking reaches the re-check, whose outcome is the one expected, and moves record something.
  expect(seen).toBeGreaterThan(0);
  expect(Object.keys(lean.witnessed).some((k) => k.startsWith('journal ') && !k.endsWith(EMPTY))).toBe(true);
  expect({ ...lean, elapsedMs: 0 }).toEqual({ ...stepwise, elapsedMs: 0 });
}

describe('the gate re-checks a write as the invoked re-check does', () => {
  it.each<[string, HookAnswers, string]>([
    ['hooks pass', PASS, 'booking written'],
    ['validate refuses', { validate: 'refuse', authorize: 'pass' }, 'booking refused at the re-check (business)'],
    ['validate throws', { validate: 'throws', authorize: 'pass' }, 'booking refused at the re-check (business)'],
    ['authorize refuses', { validate: 'pass', authorize: 'refuse' }, 'booking refused at the re-check (permission)'],
    [
      'authorize unavailable',
      { validate: 'pass', authorize: 'unavailable' },
      'booking refused at the re-check (permission)',
    ],
  ])('%s at the re-check', { timeout: scaled(600_000) }, (name, answers, expected) => {
    compare(name, explored(leanChart(), answers), explored(stepwiseChart(), answers), expected);
  });

  it.each<[string, HookAnswers, string]>([
    ['hooks pass', PASS, 'booking sent again'],
    // Business validation is not asked again before a resend: its refusal would not stop one.
    ['validate refuses', { validate: 'refuse', authorize: 'pass' }, 'booking sent again'],
    ['authorize refuses', { validate: 'pass', authorize: 'refuse' }, 'retry refused, back to the reviewer'],
    [
      'authorize unavailable',
      { validate: 'pass', authorize: 'unavailable' },
      'booking refused at the re-check (permission)',
    ],
  ])('%s at the re-check of a resend', { timeout: scaled(600_000) }, (name, answers, expected) => {
    const lean = explored(leanChart(), PASS, answers, resendMoves);
    const stepwise = explored(stepwiseChart(), PASS, answers, resendMoves);
    compare(`resend, ${name}`, lean, stepwise, expected);
  });

  it('catches a gate that lets through what the invoked re-check refuses', { timeout: scaled(600_000) }, () => {
    const answers: HookAnswers = { validate: 'pass', authorize: 'refuse' };
    const mutant = explored(leanChart({ guards: { isStillAuthorized: () => true } } as never), answers);
    expect({ ...mutant, elapsedMs: 0 }).not.toEqual({ ...explored(stepwiseChart(), answers), elapsedMs: 0 });
  });

  it('catches a gate that records less than the invoked re-check', { timeout: scaled(600_000) }, () => {
    // Only the journal differs: the re-check's `check_started` entry is not recorded.
    const mutant = leanChart({ actions: { noteRecheck: () => {} } } as never);
    const lean = explored(mutant, PASS);
    const stepwise = explored(stepwiseChart(), PASS);
    expect(lean.states).toBe(stepwise.states);
    expect(lean.witnessed).not.toEqual(stepwise.witnessed);
  });
});
