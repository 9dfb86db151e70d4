/**
 * The lean read round (see test/leanRound.paths.test.ts) in the worlds that test does not explore: the user going
 * away and coming back, plans, undo, workflows, sub-tasks, and compaction thresholds the results may or may not
 * reach (so that `hasRoomForResults` both holds and fails). Each world is explored with the chart and with its
 * shortcuts' guards held false, and the explorations must match. Also: after every move of the two-turn world, the
 * snapshot's tags and value are those of its active states (steps apply patches without recomputing them).
 *
 * The worlds where the shortcuts are rare or never taken (the user going away, plans, undo, workflows) take about four
 * minutes together, so `npm test` runs them only with PATHS_FULL=1 (`PATHS_FULL=1 npm run test:paths`); the suite
 * keeps the two compaction worlds, where `hasRoomForResults` both holds and fails, sub-tasks and the tags check.
 */
import { describe, expect, it } from 'vitest';
import type { AgentMachine } from '../machines/agentMachine.js';
import {
  CHART,
  PLAN_CHART,
  PRESENCE_CHART,
  UNDO_CHART,
  planChartWith,
  presenceChartWith,
  undoChartWith,
  withLimits,
} from './support/agentWorld.js';
import { COMPACTION_INPUT } from './support/compactionChecks.js';
import { explore, report } from './support/explore.js';
import { PLAN_INPUT } from './support/planMoves.js';
import { SUBTASK_CHART, exploreSubtasks, subtaskChartWith } from './support/subtaskWorld.js';
import { type Guards, STEPWISE, counted } from './support/leanShortcuts.js';
import { scaled } from './support/timeScale.js';
import { exploreFlow } from './support/workflowProperties.js';
import { WORKFLOW_CHART, WORKFLOW_INPUT, workflowChartWith } from './support/workflowWorld.js';

const FULL = process.env.PATHS_FULL === '1';

const plain = (guards: Guards) => CHART.provide({ guards }) as AgentMachine;
const atThreshold = (atTokens: number, resultBytes: number) => ({
  ...COMPACTION_INPUT,
  compaction: { atTokens, resultBytes, summariser: 'model' as const },
});

describe('the lean read round in more worlds', () => {
  type World = readonly [string, object, AgentMachine, (guards: Guards) => AgentMachine, number, boolean];
  // [world, input, its chart, how to replace its guards, maxStates, whether the shortcut to thinking is taken]
  const compares = (
    name: string,
    input: object,
    base: AgentMachine,
    chartWith: World[3],
    maxStates: number,
    shortcut: boolean,
  ) => {
    const lean = counted(base, chartWith);
    const fast = explore(input as typeof COMPACTION_INPUT, { maxStates, chart: lean.chart });
    const slow = explore(input as typeof COMPACTION_INPUT, { maxStates, chart: chartWith(STEPWISE) });
    console.log(`[leanRoundWorlds] ${name}: ${fast.states} states; reads straight to thinking ${lean.taken()} times`);
    expect(fast.violations, report(fast.violations)).toEqual([]);
    if (shortcut) expect(lean.taken()).toBeGreaterThan(0);
    expect({ ...fast, elapsedMs: 0 }).toEqual({ ...slow, elapsedMs: 0 });
  };
  it.each<World>([
    // Results of 16 bytes against 60 tokens: room for some batches' results, not for others'.
    ['compaction near the threshold', atThreshold(60, 16), CHART, plain, 120_000, true],
    ['compaction, larger results', atThreshold(120, 64), CHART, plain, 120_000, true],
  ])('%s', { timeout: scaled(900_000) }, compares);
  it.runIf(FULL).each<World>([
    ['the user going away', withLimits({ modelTurns: 2 }), PRESENCE_CHART, presenceChartWith, 120_000, true],
    ['plans', PLAN_INPUT, PLAN_CHART, planChartWith, 40_000, false],
    ['undo', withLimits({ modelTurns: 1 }), UNDO_CHART, undoChartWith, 60_000, false],
  ])('%s (PATHS_FULL=1)', { timeout: scaled(900_000) }, compares);

  it.runIf(FULL)('a workflow (PATHS_FULL=1)', { timeout: scaled(900_000) }, () => {
    const fast = exploreFlow(WORKFLOW_INPUT, WORKFLOW_CHART, { maxStates: 60_000 });
    const slow = exploreFlow(WORKFLOW_INPUT, workflowChartWith(STEPWISE), { maxStates: 60_000 });
    expect(fast.violations, report(fast.violations)).toEqual([]);
    expect({ ...fast, elapsedMs: 0 }).toEqual({ ...slow, elapsedMs: 0 });
  });

  it('sub-tasks', { timeout: scaled(300_000) }, () => {
    const fast = exploreSubtasks(SUBTASK_CHART, { maxStates: 50_000 });
    expect(fast.violations, report(fast.violations)).toEqual([]);
    expect(fast).toEqual(exploreSubtasks(subtaskChartWith(STEPWISE), { maxStates: 50_000 }));
  });

  it("keeps each snapshot's tags and value those of its active states", { timeout: scaled(300_000) }, () => {
    const wrong: string[] = [];
    explore(withLimits({ modelTurns: 2 }), {
      // A stale tag shows within the first few hundred moves; the full run walks further.
      maxStates: FULL ? 20_000 : 5_000,
      chart: CHART,
      witness: (_prev, move, next) => {
        const snapshot = next.machine as unknown as { _nodes: { tags: string[] }[]; tags: Set<string> };
        const tags = [...new Set(snapshot._nodes.flatMap((node) => [...node.tags]))].sort();
        const fresh = CHART.resolveState({ value: next.machine.value, context: next.machine.context });
        const seen = JSON.stringify([...snapshot.tags].sort());
        if (seen !== JSON.stringify(tags) || JSON.stringify(fresh.value) !== JSON.stringify(next.machine.value))
          wrong.push(`${move.type} -> ${JSON.stringify(next.machine.value)}: tags ${seen}, active states' ${tags}`);
      },
    });
    expect(wrong.slice(0, 5)).toEqual([]);
  });
});
