/**
 * The path checks of compensation: the adversarial world where a booking is undone by releasing its room, one model
 * turn explored exhaustively (every stop after a booking, the undo's confirmation, re-check, lost response, review,
 * cancel and restart), with the safety rules and P7: a stop the policy undoes releases each booking once, newest
 * first; any other stop undoes nothing; an undo is never undone. Charts broken on purpose must be caught.
 */
import { describe, expect, it } from 'vitest';
import { UNDO_CHART, undoChartWith, withLimits } from './support/agentWorld.js';
import { explore, report } from './support/explore.js';
import { scaled } from './support/timeScale.js';

describe('agent machine paths with compensation, one model turn', () => {
  it(
    'keeps every safety rule, P7 included, on every transition',
    () => {
      const result = explore(withLimits({ modelTurns: 1 }), {
        maxStates: 60_000,
        chart: UNDO_CHART,
        witness: (_prev, _move, next, count) => {
          const outcome = next.machine.context.outcome;
          for (const c of outcome?.compensations ?? []) count(`${outcome!.status}: ${c.result}`);
          const value = JSON.stringify(next.machine.value);
          if (next.machine.context.unwinding && !next.machine.context.unwinding.finished) count(`undoing in ${value}`);
        },
      });
      console.log(`[machinePathsUndo] ${result.states} states; ${JSON.stringify(result.witnessed)}`);
      expect(result.violations, report(result.violations)).toEqual([]);
      // 35,245 states when written (the same world without compensation: about 6,400).
      expect(result.states).toBeGreaterThan(30_000);
      // The undo is seen through every stop the policy undoes and every state a write goes through.
      for (const seen of [
        'cancelled: compensated',
        'budget_exhausted: compensated',
        'cancelled: not_run',
        'budget_exhausted: failed',
        // An undo cut short by a host step that failed (its check threw): the task ends failed, the effect standing.
        'failed: not_run',
        'undoing in {"executing":"awaitingConfirmation"}',
        'undoing in {"executing":"reconciling"}',
        'undoing in "reviewRequired"',
      ]) {
        expect(result.witnessed[seen] ?? 0, seen).toBeGreaterThan(0);
      }
    },
    scaled(300_000),
  );

  describe('the checks catch a chart whose undo is broken', () => {
    const no = () => false;
    const firstBroken = (guards: Record<string, () => boolean>) =>
      explore(withLimits({ modelTurns: 1 }), { maxStates: 60_000, maxViolations: 1, chart: undoChartWith(guards) })
        .violations[0]?.problem;

    it.each<[string, Record<string, () => boolean>, RegExp]>([
      ['never undoes', { mustCompensate: no }, /^P7 compensation: the task stopped .* and undid none/],
      ['runs an undo without its confirmation', { needsConfirmation: no }, /^P1 confirmation/],
    ])(
      '%s',
      (_name, guards, rule) => {
        expect(firstBroken(guards)).toMatch(rule);
      },
      scaled(300_000),
    );
  });
});
