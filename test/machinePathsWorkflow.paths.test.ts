/**
 * The path checks of workflows (P10): the booking flow of `workflowWorld.ts` explored exhaustively, the exploring
 * model proposing valid and invalid decisions, answers and real tool calls in decision turns; tools answering ok,
 * failing or leaving the outcome unknown; cancels and restarts. Charts broken on purpose must be caught.
 */
import { describe, expect, it } from 'vitest';
import { report } from './support/explore.js';
import { exploreFlow } from './support/workflowProperties.js';
import { WORKFLOW_CHART, WORKFLOW_INPUT, workflowChartWith } from './support/workflowWorld.js';
import { scaled } from './support/timeScale.js';

const MUST_WITNESS = [
  'pick recorded',
  'look recorded',
  'look failed',
  'choose recorded',
  'book recorded',
  'book failed',
  'decision refused',
  'answer refused',
  'call search_rooms started',
  'call book_room started',
  'model call tried',
  'stop: goal_met',
  'stop: goal_not_met',
  'stop: cancelled',
  'task: cancelled in thinking',
  'task: cancelled in executing.reading',
  'task: cancelled while a write is unsettled in executing.writing',
  'restart in executing.reading',
  'restart (write interrupted) in executing.writing',
];

describe('agent machine paths with a workflow', () => {
  it(
    'keeps every P10 rule on every transition',
    () => {
      const result = exploreFlow(WORKFLOW_INPUT, WORKFLOW_CHART, { maxStates: 60_000 });
      console.log(
        `[machinePathsWorkflow] ${result.states} states, ${result.transitions} transitions in ${result.elapsedMs} ms; ${JSON.stringify(result.byValue)} ${JSON.stringify(result.witnessed)}`,
      );
      expect(result.violations, report(result.violations)).toEqual([]);
      // 1,361 states when written.
      expect(result.states).toBeGreaterThan(1_200);
      for (const seen of MUST_WITNESS) expect(result.witnessed[seen] ?? 0, seen).toBeGreaterThan(0);
    },
    scaled(300_000),
  );

  // (`isDecisionValid` forced true is not among them: `recordDecision` checks the decision again and records nothing
  // that does not fit, so that mutation leaves the machine safe and no rule breaks.)
  describe('the checks catch a chart whose workflow gate is broken', () => {
    const yes = () => true;
    const no = () => false;
    const broken = (guards: Record<string, () => boolean>) =>
      exploreFlow(WORKFLOW_INPUT, workflowChartWith(guards), { maxStates: 60_000, maxViolations: 4 }).violations.map(
        (v) => v.problem,
      );

    it.each<[string, Record<string, () => boolean>, RegExp]>([
      [
        "asks the model where the program's call is due",
        { isNextWorkflowStepCall: no },
        /^P10 program calls: search_rooms \{"day":"tue"\} \(c1\) starts; the program's call is search_rooms \{"day":"mon"\}/,
      ],
      [
        'ends done without a trusted booking',
        { isGoalMet: yes },
        /^P10 done: done with the flow at null and no trusted booking/,
      ],
      [
        "runs the model's own call in a decision turn",
        { isToolOffered: yes },
        /^P10 program calls: search_rooms \{"day":"tue"\} \(c1\) starts, but the flow is at pick/,
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
