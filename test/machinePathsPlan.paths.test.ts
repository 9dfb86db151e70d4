/**
 * The path checks of plan-and-execute: the adversarial world where the model proposes plans (a read then a booking
 * that depends on it, a read-only one, a cyclic one, one not JSON, one with a tool nobody installed) and calls the
 * plan's tools in order or out of it; the user approves (the plan's hash or another's), rejects, lets the approval
 * expire, or cancels; intruders, early timers and restarts try too. Five model turns in `plan_first` mode explored
 * exhaustively with every safety rule and P9 (`planProperties.ts`). Charts broken on purpose must be caught.
 */
import { describe, expect, it } from 'vitest';
import { PLAN_CHART, type World, planChartWith, valueOf } from './support/agentWorld.js';
import { explore, report } from './support/explore.js';
import { PLAN_INPUT } from './support/planMoves.js';
import { scaled } from './support/timeScale.js';

/** Plan situations the exploration must have gone through, or P9 would hold vacuously. */
function witness(prev: World, _move: unknown, next: World, count: (what: string) => void) {
  const [from, to] = [valueOf(prev.machine), valueOf(next.machine)];
  const [was, is] = [prev.machine.context.plan?.current, next.machine.context.plan?.current];
  if (is && is.id !== was?.id) count(`plan ${is.status}`);
  if (was?.status === 'awaiting_approval' && is?.id === was.id && is.status === 'adopted') count('plan approved');
  if (from === 'awaitingPlanApproval' && to !== from) count(`from approval to ${to}`);
  for (const step of is?.steps ?? []) {
    const old = was?.id === is?.id ? was?.steps.find((s) => s.id === step.id) : undefined;
    if (old && old.status !== step.status) count(`step ${step.effect} ${step.status}`);
  }
  for (const call of next.machine.context.batch?.calls ?? []) {
    const before = prev.machine.context.batch?.calls.find((c) => c.callId === call.callId);
    if (call.observation?.ok === false && !before?.observation && call.observation.code === 'not_offered')
      count(`${call.effect} refused as not offered`);
  }
  for (const e of next.emitted ?? []) {
    const { entry } = e as { entry?: { kind: string; observation?: { tool: string; ok: boolean; code?: string } } };
    if (entry?.kind === 'result' && entry.observation?.tool === 'propose_plan' && !entry.observation.ok)
      count(`plan result: ${entry.observation.code}`);
  }
  if (next.machine.context.outcome && !prev.machine.context.outcome)
    count(`stop: ${next.machine.context.outcome.reason.code}`);
}

const MUST_WITNESS = [
  'plan awaiting_approval',
  'plan adopted',
  'plan approved',
  'from approval to thinking',
  'from approval to cancelled',
  'step read succeeded',
  'step read failed',
  'step write succeeded',
  'step write failed',
  'read refused as not offered',
  'write refused as not offered',
  'plan result: plan_cycle',
  'plan result: unknown_tool',
  'plan result: plan_malformed',
  'plan result: over_budget',
  'plan result: plan_rejected',
  'plan result: plan_expired',
  'plan result: plan_limit',
  'plan result: cancelled',
  'stop: plan_limit',
  'stop: goal_met',
];

describe('agent machine paths with plans, five model turns', () => {
  it(
    'keeps every safety rule, P9 included, on every transition',
    () => {
      const result = explore(PLAN_INPUT, { maxStates: 40_000, chart: PLAN_CHART, witness });
      console.log(
        `[machinePathsPlan] ${result.states} states, ${result.transitions} transitions in ${result.elapsedMs} ms; ${JSON.stringify(result.witnessed)}`,
      );
      expect(result.violations, report(result.violations)).toEqual([]);
      // 10,753 states when written.
      expect(result.states).toBeGreaterThan(9_000);
      for (const seen of MUST_WITNESS) expect(result.witnessed[seen] ?? 0, seen).toBeGreaterThan(0);
    },
    scaled(300_000),
  );

  describe('the checks catch a chart whose plan gate is broken', () => {
    const yes = () => true;
    const no = () => false;
    /** The first rules broken (the one a mutation aims at may come with others on the same transition). */
    const broken = (guards: Record<string, () => boolean>) =>
      explore(PLAN_INPUT, { maxStates: 40_000, maxViolations: 4, chart: planChartWith(guards) }).violations.map(
        (v) => v.problem,
      );

    it.each<[string, Record<string, () => boolean>, RegExp]>([
      [
        'adopts a plan with a write unapproved',
        { needsPlanApproval: no },
        /^P9 plan gate: model: good plan needs approval/,
      ],
      [
        'takes the approval of another plan',
        { doesConfirmationMatchArguments: yes },
        /^P9 plan approval: plan-1 is approved by user: approves another plan/,
      ],
      [
        'takes anyone as the approving user',
        { isFromConfirmingUser: yes },
        /^P9 plan approval: plan-1 is approved by intruder/,
      ],
      ['lets the model plan past the limit', { hasPlanProposalsLeft: yes }, /^P9 plan gate: proposal 3 of at most 2/],
      [
        'runs tools before a plan is adopted',
        { isToolOffered: yes },
        /^P9 plan first: read search_rooms \(c1\) starts before a plan is adopted/,
      ],
    ])(
      '%s',
      (_name, guards, rule) => {
        expect(broken(guards)).toContainEqual(expect.stringMatching(rule));
      },
      scaled(300_000),
    );
  });
});
