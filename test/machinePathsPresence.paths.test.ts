/**
 * The path checks of pausing while the user is away: the adversarial world where the harness also says the task's
 * user left (while the model, a read or a write works) and came back, or lets the pause expire; two model turns
 * explored exhaustively with the safety rules and P8: while the user is away no model turn and no write starts (a
 * resend of a write whose lookup found nothing included), the machine's record of it agrees with the harness's, and an
 * expired pause cancels the task with user_away. Charts broken on purpose must be caught.
 */
import { describe, expect, it } from 'vitest';
import { PRESENCE_CHART, presenceChartWith, withLimits } from './support/agentWorld.js';
import { explore, report } from './support/explore.js';
import { scaled } from './support/timeScale.js';

describe('agent machine paths with the user going away, two model turns', () => {
  it(
    'keeps every safety rule, P8 included, on every transition',
    () => {
      const result = explore(withLimits({ modelTurns: 2 }), {
        maxStates: 120_000,
        chart: PRESENCE_CHART,
        witness: (prev, move, next, count) => {
          const from = JSON.stringify(prev.machine.value);
          const to = JSON.stringify(next.machine.value);
          if (from !== to && (to === '"paused"' || to === '{"executing":"pausedBeforeWrite"}'))
            count(`paused in ${to}`);
          if (move.type === 'user: returns' && from !== to) count(`resumed from ${from}`);
          if (next.machine.context.outcome?.reason.code === 'user_away') count('cancelled: user_away');
        },
      });
      console.log(`[machinePathsPresence] ${result.states} states; ${JSON.stringify(result.witnessed)}`);
      expect(result.violations, report(result.violations)).toEqual([]);
      // 82,277 states when written.
      expect(result.states).toBeGreaterThan(75_000);
      for (const seen of [
        'paused in "paused"',
        'paused in {"executing":"pausedBeforeWrite"}',
        'resumed from "paused"',
        'resumed from {"executing":"pausedBeforeWrite"}',
        'cancelled: user_away',
      ]) {
        expect(result.witnessed[seen] ?? 0, seen).toBeGreaterThan(0);
      }
    },
    scaled(600_000),
  );

  describe('the checks catch a chart whose pause is broken', () => {
    const yes = () => true;
    const no = () => false;
    const firstBroken = (guards: Record<string, () => boolean>) =>
      explore(withLimits({ modelTurns: 2 }), {
        maxStates: 120_000,
        maxViolations: 1,
        chart: presenceChartWith(guards),
      }).violations[0]?.problem;

    it.each<[string, Record<string, () => boolean>, RegExp]>([
      ['never pauses', { isUserAway: no }, /^P8 presence: .* starts while the user is away/],
      ['ends a pause before it is due', { hasAbsenceExpired: yes }, /^P5 authority: timer: away expiry early changed/],
      ['takes anyone as the task user', { isAboutTaskUser: yes }, /^P8 presence: the machine says the user is away/],
    ])(
      '%s',
      (_name, guards, rule) => {
        expect(firstBroken(guards)).toMatch(rule);
      },
      scaled(600_000),
    );
  });
});
