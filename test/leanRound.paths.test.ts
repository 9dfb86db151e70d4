/**
 * The read round's shortcuts (`vetting.judging` starting the reads itself; a read's done event going straight to
 * `thinking`) are the transient states they skip, taken in fewer microsteps: the same worlds are reached. Each world
 * is explored twice, with the chart and with its shortcuts' guards held false (every round then passes through
 * `executing.selecting` and `deciding` as before), and the two explorations must match state for state.
 */
import { describe, expect, it } from 'vitest';
import type { AgentMachine } from '../machines/agentMachine.js';
import { CHART, SYNC_CHART, syncChartWith, withLimits } from './support/agentWorld.js';
import { COMPACTION_INPUT } from './support/compactionChecks.js';
import { explore, report } from './support/explore.js';
import { type Guards, counted } from './support/leanShortcuts.js';
import { scaled } from './support/timeScale.js';

const FULL = process.env.PATHS_FULL === '1';
const plain = (guards: Guards) => CHART.provide({ guards }) as AgentMachine;

describe('the lean read round reaches the worlds the stepwise one does', () => {
  it.each([
    // [world, input, its chart, how to replace its guards, states explored, whether the shortcut can be taken]
    // Its 42,420 states with PATHS_FULL=1; `npm test` compares the first 12,000 of each exploration (breadth first,
    // so the same states when the worlds are the same), the shortcut taken in them too.
    ['two model turns', withLimits({ modelTurns: 2 }), CHART, plain, FULL ? 120_000 : 12_000, true],
    // Its batches end with the booking's write: vetting's shortcut to the reads only.
    ['synchronous hooks', withLimits({ modelTurns: 3, writes: 2 }), SYNC_CHART, syncChartWith, 120_000, false],
    // A 40-token threshold: results may always bring it there, so every round goes through `deciding`.
    ['compaction', COMPACTION_INPUT, CHART, plain, 120_000, false],
  ] as const)('%s', { timeout: scaled(600_000) }, (name, input, base, chartWith, maxStates, shortcut) => {
    const lean = counted(base, chartWith, false);
    const stepwise = counted(base, chartWith, true);
    const fast = explore(input, { maxStates, chart: lean.chart });
    const slow = explore(input, { maxStates, chart: stepwise.chart });
    console.log(
      `[leanRound] ${name}: ${fast.states} states, ${fast.transitions} transitions; ` +
        `reads straight to thinking ${lean.taken()} times`,
    );
    // A world cut at `maxStates` ends with that one finding, the same in both explorations (compared below).
    const broken = fast.violations.filter((v) => !v.problem.startsWith(`more than ${maxStates} states`));
    expect(broken, report(broken)).toEqual([]);
    // Not vacuous: the shortcut is taken where the world allows it, and only with it.
    if (shortcut) expect(lean.taken()).toBeGreaterThan(0);
    expect(stepwise.taken()).toBe(0);
    expect({ ...fast, elapsedMs: 0 }).toEqual({ ...slow, elapsedMs: 0 });
  });
});
