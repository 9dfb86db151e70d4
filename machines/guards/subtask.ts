/**
 * Questions about sub-tasks: is the call a sub-task tool's, does the child it would start stay within the parent
 * (its tools, its mandate, its share of the budgets), did the start happen, and is a child's outcome the one the
 * parent waits for.
 */
import { outputOf } from '../actors.js';
import { currentCall } from '../lib/batch.js';
import { judgedCall, pendingCall } from '../lib/judged.js';
import { isSubtaskTool, subtaskProblem } from '../lib/subtask.js';
import { timeOf } from '../journal.js';
import { type Guard, eventOf } from './guard.js';

const problemOf: (...args: Parameters<Guard>) => ReturnType<typeof subtaskProblem> = (context, event, toolkit) => {
  const call = judgedCall(context, toolkit);
  return call ? subtaskProblem(context, call, toolkit, timeOf(context, event)) : null;
};

export const subtaskGuards = {
  /** The call being judged or run is a call of a sub-task tool (`defineSubtask`). */
  isSubtaskCall: (context, _event, toolkit) => {
    const call = pendingCall(context);
    return call !== undefined && isSubtaskTool(toolkit, call.tool);
  },

  /** Every tool the child would use is one this task may use, its principal holds its scopes, and none is a sub-task. */
  areSubtaskToolsWithinParent: (...args) => problemOf(...args)?.check !== 'tools',

  /** The child's mandate, from the tool's rule, is no wider than this task's (the rule said so, or both have none). */
  isSubtaskMandateNarrower: (...args) => problemOf(...args)?.check !== 'mandate',

  /** The child's share of the budgets (plus the call itself) fits what is left of this task's. */
  isSubtaskShareWithinBudget: (...args) => problemOf(...args)?.check !== 'budget',

  /** The start of the child happened (or was found by its key): the parent waits for its outcome. */
  hasSubtaskStarted: (context, event, toolkit) => {
    const call = currentCall(context.batch);
    if (call === undefined || !isSubtaskTool(toolkit, call.tool)) return false;
    if (event.type === 'xstate.done.actor.write') return outputOf(event, 'write').outcome.kind === 'ok';
    if (event.type === 'xstate.done.actor.lookup') return outputOf(event, 'lookup').result.kind === 'found';
    return false;
  },

  /** The outcome is of the child the current call waits for. */
  isOutcomeOfPendingSubtask: (context, event) => {
    const finished = eventOf(event, 'subtask.finished');
    const call = currentCall(context.batch);
    return (
      call?.phase === 'awaitingSubtask' &&
      context.subtasks.some(
        (link) => link.callId === call.callId && link.childTaskId === finished.childTaskId && link.status === 'running',
      )
    );
  },
} satisfies Record<string, Guard>;
