/** Questions of a workflow: is the task following one, what kind of step is next, does the model's decision fit. */
import { checkDecision, currentStep, workflowCallArgs } from '../lib/workflow.js';
import type { Guard } from './guard.js';

export const workflowGuards = {
  /** The task follows a host-defined flow (`start({ workflow })`), whether or not it has ended. */
  isFollowingWorkflow: (context) => context.workflow !== null,

  /** The flow has ended: its last step had no next, or a rule of the program failed (`workflow.problem`). */
  hasWorkflowEnded: (context) => context.workflow !== null && context.workflow.current === null,

  /** The flow ended because a rule of the program failed: nothing runs on a rule that did not answer. */
  didWorkflowFail: (context) => context.workflow?.problem != null,

  /** The next step is a call the program makes (its arguments from the facts so far). */
  isNextWorkflowStepCall: (context, _event, toolkit) => currentStep(context, toolkit)?.step.call !== undefined,

  /** The program's rule gives the next call's arguments (a rule that throws or answers a promise does not). */
  isWorkflowCallBuildable: (context, _event, toolkit) => workflowCallArgs(context, toolkit).ok,

  /** The task waits for the model's decision of the current step (only then is a decision taken). */
  isAwaitingDecision: (context, _event, toolkit) => currentStep(context, toolkit)?.step.decide !== undefined,

  /** The model's decision matches the step's choices or output schema. */
  isDecisionValid: (context, event, toolkit) => checkDecision(context, event, toolkit).ok,
} satisfies Record<string, Guard>;
