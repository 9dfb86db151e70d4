/**
 * The path checks of two parts of the chart no other world reaches: synchronous hooks (`hooks: 'sync'`, asked by the
 * vetting guards themselves) and `compacting` (near the threshold, and after the provider's `context_too_long`).
 *
 * The sync-hook world (`SYNC_CHART`, `syncHooks.ts`, `syncHookMoves.ts`): the booking's validate and authorize answer
 * as each proposal's move says (pass, refuse, unavailable, throw), one or two bookings a batch, or a booking after an
 * asynchronously validated payment; two model turns, so a booking denied by its hook can be proposed again. The
 * compaction world (`compactionChecks.ts`): a model summariser past 40 estimated tokens, four model turns. Both keep
 * every common safety rule, and their own (S1-S3, C1-C7). Charts broken on purpose must be caught.
 */
import { assign } from 'xstate';
import { describe, expect, it } from 'vitest';
import type { MachineEvent } from '../machines/actors.js';
import type { AgentMachine } from '../machines/agentMachine.js';
import type { AgentContext } from '../machines/context.js';
import { invokedVerdict, syncVerdict } from '../machines/lib/hooks.js';
import { judgedCall } from '../machines/lib/judged.js';
import { debit } from '../machines/lib/budget.js';
import { recordCompaction } from '../machines/steps/compaction.js';
import { CHART, SYNC_CHART, SYNC_TOOLKIT, syncChartWith, withLimits } from './support/agentWorld.js';
import { COMPACTION_INPUT } from './support/compactionChecks.js';
import { explore, report } from './support/explore.js';
import { scaled } from './support/timeScale.js';

const SYNC_INPUT = withLimits({ modelTurns: 3, writes: 2 });
const MAX_STATES = 40_000;

type Guards = Parameters<AgentMachine['provide']>[0]['guards'];
interface Args {
  context: AgentContext;
  event: MachineEvent;
}

/** The booking's synchronous verdict, as the chart's guards ask it. */
const syncOk = (context: AgentContext, hook: 'validate' | 'authorize') => {
  const call = judgedCall(context, SYNC_TOOLKIT);
  return call !== undefined && (syncVerdict(context, call, SYNC_TOOLKIT, hook)?.ok ?? true);
};

const SYNC_WITNESS = [
  'sync validate asked',
  'sync authorize asked',
  "sync hook asked in the step of another call's asynchronous verdict",
  'booking refused by its sync validate (refuse)',
  'booking refused by its sync validate (unavailable)',
  'booking refused by its sync validate (throws)',
  'booking refused by its sync authorize (refuse)',
  'booking refused by its sync authorize (unavailable)',
  'booking written after its sync hooks passed',
  'stop: permission_denied',
];

const COMPACTION_WITNESS = [
  'compacting near the limit',
  'compacting for a refused prompt',
  'model summariser turn reserved',
  'refused prompt with nothing older: stopped',
  'refused right after compacting: stopped',
  'refused prompt compacted',
  'facts note instead of the summariser',
  'summarise: facts note (no model turn reserved)',
  'model turn after compacting (summarise: facts note (no model turn reserved))',
  'model turn after compacting (summarise: model summary)',
  'model turn after compacting (summarise: model summary, still over the threshold)',
  'restart while compacting',
  'stop: internal_error',
  'stop: goal_met',
];

const stopWitness = (
  _prev: unknown,
  _move: unknown,
  next: { machine: { context: AgentContext } },
  count: (w: string) => void,
) => {
  const outcome = next.machine.context.outcome;
  if (outcome) count(`stop: ${outcome.reason.code}`);
};

/** A mutant's test: the first violation exploring the broken chart finds must be the rule expected to catch it. */
function caughtBy(firstBroken: (guards: Guards) => string | undefined) {
  return (name: string, guards: Guards, rule: RegExp) => {
    const problem = firstBroken(guards);
    console.log(`[machinePathsSyncCompaction] ${name}: ${problem}`);
    expect(problem).toMatch(rule);
  };
}

describe('agent machine paths with synchronous hooks', () => {
  it(
    'keeps every safety rule, S1-S3 included, on every transition',
    () => {
      const result = explore(SYNC_INPUT, { maxStates: MAX_STATES, chart: SYNC_CHART, witness: stopWitness });
      console.log(
        `[machinePathsSyncCompaction] sync hooks: ${result.states} states, ${result.transitions} transitions, ${result.elapsedMs} ms; ${JSON.stringify(result.witnessed)}`,
      );
      expect(result.violations, report(result.violations)).toEqual([]);
      expect(result.states).toBeGreaterThan(1_000);
      for (const seen of SYNC_WITNESS) expect(result.witnessed[seen] ?? 0, seen).toBeGreaterThan(0);
    },
    scaled(120_000),
  );

  describe('the checks catch a chart whose synchronous hooks are broken', () => {
    const firstBroken = (guards: Guards) =>
      explore(SYNC_INPUT, { maxStates: MAX_STATES, maxViolations: 1, chart: syncChartWith(guards) }).violations[0]
        ?.problem;
    it.each<[string, Guards, RegExp]>([
      [
        'ignores the synchronous validate',
        { isBusinessValid: ({ context, event }: Args) => invokedVerdict(context, event, 'validate')?.ok ?? true },
        /^P1 gates: book_room \(c\d\) is admitted .* business gate must refuse/,
      ],
      [
        'ignores the synchronous authorize',
        { isAuthorized: ({ context, event }: Args) => invokedVerdict(context, event, 'authorize')?.ok ?? true },
        /^P1 gates: book_room \(c\d\) is admitted .* permission gate must refuse/,
      ],
      [
        "takes another call's asynchronous verdict for the booking's",
        {
          isBusinessValid: ({ context, event }: Args) =>
            event.type === 'xstate.done.actor.validate' ? event.output.verdict.ok : syncOk(context, 'validate'),
        },
        /^(S2 sync hooks: c2 is refused|P1 gates: book_room \(c2\) is admitted)/,
      ],
    ])('%s', caughtBy(firstBroken), scaled(120_000));
  });
});

describe('agent machine paths with compaction', () => {
  it(
    'keeps every safety rule, C1-C7 included, on every transition',
    () => {
      const result = explore(COMPACTION_INPUT, { maxStates: MAX_STATES, chart: CHART, witness: stopWitness });
      console.log(
        `[machinePathsSyncCompaction] compaction: ${result.states} states, ${result.transitions} transitions, ${result.elapsedMs} ms; ${JSON.stringify(result.witnessed)}`,
      );
      expect(result.violations, report(result.violations)).toEqual([]);
      expect(result.states).toBeGreaterThan(100);
      for (const seen of COMPACTION_WITNESS) expect(result.witnessed[seen] ?? 0, seen).toBeGreaterThan(0);
    },
    scaled(120_000),
  );

  it('catches a chart whose compaction that replaced nothing drops the summary standing for older turns', () => {
    // The step as written, except that a summariser's answer with no summary clears the one in force.
    const forgets = CHART.provide({
      actions: {
        recordCompaction: assign(({ context, event }) => {
          const patch = recordCompaction(context, event as MachineEvent, SYNC_TOOLKIT).context!;
          const replaced = (event as unknown as Extract<MachineEvent, { type: 'xstate.done.actor.summarise' }>).output
            .summary;
          return {
            ...patch,
            compaction: { ...patch.compaction!, summary: replaced ? patch.compaction!.summary : null },
          };
        }),
      },
    }) as AgentMachine;
    const problem = explore(COMPACTION_INPUT, { maxStates: MAX_STATES, maxViolations: 1, chart: forgets }).violations[0]
      ?.problem;
    console.log(`[machinePathsSyncCompaction] forgets the summary: ${problem}`);
    expect(problem).toMatch(/^C3 compaction: a compaction that replaced nothing changed the summary/);
  });

  it("catches a chart that reserves the summariser's turn without room for the turn it compacts for", () => {
    const greedy = CHART.provide({
      actions: {
        startCompaction: assign(({ context }) => {
          const reserved = { tokens: context.modelReservation.tokens, costMicros: context.modelReservation.costMicros };
          return { budget: debit(context.budget, reserved), compaction: { ...context.compaction, reserved } };
        }),
      },
    }) as AgentMachine;
    const problem = explore(COMPACTION_INPUT, { maxStates: MAX_STATES, maxViolations: 1, chart: greedy }).violations[0]
      ?.problem;
    console.log(`[machinePathsSyncCompaction] reserves without room: ${problem}`);
    expect(problem).toMatch(/^C7 compaction: a summariser's turn is reserved with \d+ tokens left/);
  });

  describe('the checks catch a chart whose compaction is broken', () => {
    const firstBroken = (guards: Guards) =>
      explore(COMPACTION_INPUT, {
        maxStates: MAX_STATES,
        maxViolations: 1,
        chart: CHART.provide({ guards }) as AgentMachine,
      }).violations[0]?.problem;
    it.each<[string, Guards, RegExp]>([
      [
        'compacts again before the next turn (a loop)',
        {
          isTranscriptNearLimit: ({ context }: Args) => {
            const { atTokens, tokens, requested } = context.compaction;
            return requested !== null || (atTokens !== null && tokens >= atTokens);
          },
        },
        /^C1 compaction/,
      ],
      ['never compacts near the limit', { isTranscriptNearLimit: () => false }, /^C[25] compaction/],
      [
        'compacts again for a prompt refused right after compacting',
        { canCompactForRefusal: () => true },
        /^C5 compaction/,
      ],
      ['goes on after a refusal with nothing older to replace', { didCompactionReplace: () => true }, /^C4 compaction/],
    ])('%s', caughtBy(firstBroken), scaled(120_000));
  });
});
