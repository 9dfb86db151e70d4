/**
 * Sub-tasks, the steps: a call of a sub-task tool refused against its parent, the child's link recorded when the
 * write that starts it begins, the parent waiting once the start happened, and the child's outcome taken back as the
 * call's result (an observation), with the unused share of the budgets given back.
 */
import type { Json, Observation, SubtaskLink } from '../context.js';
import { currentCall, finishCall, updateCall } from '../lib/batch.js';
import { excessUsed, settleShare, subtaskEntry, subtaskProblem, unusedShare } from '../lib/subtask.js';
import { timeOf } from '../journal.js';
import { eventOf } from '../guards/guard.js';
import type { Step } from './step.js';
import { learnedFrom, written } from './execution.js';
import { current, refuse } from './vetting.js';
import { lookupEntry } from './reconcile.js';

/** The child would not stay within the parent (tools, mandate or share): refused at that gate, the model told. */
export const refuseSubtask: Step = (context, event, toolkit) => {
  const call = current(context);
  const problem = subtaskProblem(context, call, toolkit, timeOf(context, event)) ?? {
    gate: 'permission' as const,
    code: 'subtask_tools_not_permitted',
    summary: 'the sub-task does not stay within this task',
  };
  return refuse(context, event, problem.gate, problem.code, `sub-task refused: ${problem.summary}`, call);
};

/** The start happened (or its lookup found the child): the call waits for the child's outcome. */
export const recordSubtaskStarted: Step = (context, event) => {
  const call = currentCall(context.batch)!;
  const link = context.subtasks.find((l) => l.callId === call.callId);
  if (!link) return {};
  const running: SubtaskLink = { ...link, status: 'running' };
  return {
    context: {
      batch: updateCall(context.batch!, call.callId, { phase: 'awaitingSubtask' }),
      subtasks: context.subtasks.map((l) => (l.callId === call.callId ? running : l)),
      writtenKeys: written(context, call),
    },
    audit: [
      // Found by its key after an unknown start (a restart): the lookup is audited as for any write.
      ...(event.type === 'xstate.done.actor.lookup' ? [lookupEntry(context, event, call)] : []),
      subtaskEntry(
        context,
        event,
        running,
        'started',
        `started ${link.childTaskId} with tools ${link.tools.join(', ')}`,
      ),
    ],
  };
};

/**
 * The child ended: its outcome is the call's result. `done` or `answered` is a result the model sees as data (the
 * child's status, reason and evidence, never its model's text); any other end is a failure of the call. What the
 * child did not spend of its share goes back to this task; what it spent above the share is charged to it.
 */
export const finishSubtask: Step = (context, event, toolkit) => {
  const { outcome, childTaskId } = eventOf(event, 'subtask.finished');
  const call = currentCall(context.batch)!;
  const link = context.subtasks.find((l) => l.callId === call.callId)!;
  const at = timeOf(context, event);
  const finished: SubtaskLink = { ...link, status: 'finished', outcome };
  const returned = unusedShare(link.share, outcome.used);
  const charged = excessUsed(link.share, outcome.used);
  const ok = outcome.status === 'done' || outcome.status === 'answered';
  const value: Json = {
    child_task_id: childTaskId,
    status: outcome.status,
    code: outcome.code,
    reason: outcome.message,
    evidence: outcome.evidence.map((e) => ({ tool: e.tool, fields: e.fields })),
  };
  const observation: Observation = ok
    ? { callId: call.callId, tool: call.tool, ok: true, data: value, truncated: false }
    : {
        callId: call.callId,
        tool: call.tool,
        ok: false,
        code: 'subtask_failed',
        summary: `the sub-task ${childTaskId} ended ${outcome.status} (${outcome.code}): ${outcome.message}`.slice(
          0,
          2_000,
        ),
        retryable: false,
      };
  const learned: Partial<ReturnType<typeof learnedFrom>> = ok ? learnedFrom(context, call, value, at, toolkit) : {};
  // The outcome quotes the child's tool results (its evidence fields): untrusted input when one of its tools is.
  const exposure = learned.exposure ?? context.exposure;
  const untrusted = toolkit
    .rules(call.tool)
    ?.subtask?.tools.some((tool) => toolkit.rules(tool)?.untrustedOutput === true);
  return {
    context: {
      batch: finishCall(context.batch!, call.callId, observation),
      subtasks: context.subtasks.map((l) => (l.callId === call.callId ? finished : l)),
      budget: settleShare(context, link.share, outcome.used),
      ...learned,
      ...(untrusted && exposure.untrustedInput === null
        ? { exposure: { ...exposure, untrustedInput: { tool: call.tool, at } } }
        : {}),
    },
    audit: [
      subtaskEntry(context, event, finished, 'finished', `${childTaskId} ended ${outcome.status} (${outcome.code})`, {
        returned,
        ...(Object.values(charged).some((n) => n > 0) ? { charged } : {}),
      }),
    ],
  };
};

/** An outcome of a child this task does not wait for (it already has it, or it is another task's): changes nothing. */
export const refuseSubtaskOutcome: Step = () => ({
  reply: { accepted: false, code: 'nothing_due', message: 'this task waits for no such sub-task' },
});
