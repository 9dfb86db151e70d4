/**
 * The path checks of sub-tasks (P11): the parent of `subtaskWorld.ts` explored exhaustively with fitting and unfitting
 * delegations, starts that succeed, fail or end unknown (then looked up), the child's outcome (done, failed, or
 * another child's), cancels and restarts in the wait. Charts broken on purpose must be caught.
 */
import { describe, expect, it } from 'vitest';
import { report } from './support/explore.js';
import { SUBTASK_CHART, exploreSubtasks, subtaskChartWith } from './support/subtaskWorld.js';
import { scaled } from './support/timeScale.js';

const MUST_WITNESS = [
  'child started (first send)',
  'child started (resend)',
  'waiting for the child',
  'outcome taken: child: done',
  'outcome taken: child: failed',
  'restart while waiting',
  'cancelled while waiting',
  'cancel deferred in the start, applied on waiting',
  'refused: subtask_mandate_not_narrower',
  'refused: subtask_tools_not_permitted',
  'refused: over_budget',
  'refused: subtask_failed',
  'share released: start: refused',
  'share released: reviewer: not happened',
  'stop: goal_met',
  'stop: cancelled',
];

describe('agent machine paths with a sub-task', () => {
  it(
    'keeps every P11 rule on every transition',
    () => {
      const result = exploreSubtasks(SUBTASK_CHART, { maxStates: 50_000 });
      console.log(
        `[machinePathsSubtask] ${result.states} states, ${result.transitions} transitions; ${JSON.stringify(result.byValue)} ${JSON.stringify(result.witnessed)}`,
      );
      expect(result.violations, report(result.violations)).toEqual([]);
      // 158 states when written: small, but every sub-task event is a move in every state that takes it.
      expect(result.states).toBeGreaterThan(150);
      for (const seen of MUST_WITNESS) expect(result.witnessed[seen] ?? 0, seen).toBeGreaterThan(0);
    },
    scaled(300_000),
  );

  describe('the checks catch a chart whose sub-task gates are broken', () => {
    const yes = () => true;
    const broken = (guards: Record<string, () => boolean>) =>
      exploreSubtasks(subtaskChartWith(guards), { maxStates: 50_000, maxViolations: 1 }).violations[0]?.problem;

    it.each<[string, Record<string, () => boolean>, RegExp]>([
      ['lets a child use tools the parent may not', { areSubtaskToolsWithinParent: yes }, /^P11 start: delegate_admin/],
      ['takes any outcome as the awaited one', { isOutcomeOfPendingSubtask: yes }, /^P11 outcome: another child/],
      ['never waits for the child', { hasSubtaskStarted: () => false }, /^P11 /],
    ])('%s', (_name, guards, rule) => {
      expect(broken(guards)).toMatch(rule);
    });
  });
});
