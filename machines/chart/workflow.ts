/**
 * A fixed workflow in the chart: `following` picks what the flow's current step needs. The program's call goes to
 * `vetting` as a batch of one (every gate applies); a decision is a model turn offered only that decision (the same
 * budget, cancel and presence checks as any turn); the end of the flow ends the task by its success criterion.
 */
import { and, not } from 'xstate';

export const followingState = {
  description:
    "A host-defined workflow: the program's call of the current step runs through every gate; a decision step asks the model, confined to that decision; when the flow ends, the task ends by its success criterion.",
  always: [
    { guard: and(['hasWorkflowEnded', 'didWorkflowFail']), target: 'stopping', actions: 'finishWorkflowUnmet' },
    {
      guard: and(['hasWorkflowEnded', not('hasSuccessCriterion')]),
      target: 'answered',
      actions: 'finishWorkflowAnswered',
    },
    { guard: and(['hasWorkflowEnded', 'isGoalMet']), target: 'done', actions: 'finishWorkflowDone' },
    { guard: 'hasWorkflowEnded', target: 'stopping', actions: 'finishWorkflowUnmet' },
    {
      guard: and(['isNextWorkflowStepCall', not('isWorkflowCallBuildable')]),
      target: 'stopping',
      actions: 'stopForWorkflowRule',
    },
    { guard: 'isNextWorkflowStepCall', target: 'vetting', actions: 'startWorkflowCall' },
    { guard: not('hasBudgetForModelTurn'), target: 'stopping', actions: 'stopForBudget' },
    { guard: 'isUserAway', target: 'paused', actions: 'pauseForAbsence' },
    { target: 'thinking', actions: 'startModelTurn' },
  ],
} as const;

/** `model.decided`, taken in `thinking`: the step's decision recorded, or refused and asked again. */
export const decided = [
  { guard: not('isAwaitingDecision'), target: 'reasking', actions: 'refuseDecision' },
  { guard: not('isDecisionValid'), target: 'reasking', actions: 'refuseDecision' },
  { target: 'deciding', actions: 'recordDecision' },
] as const;
