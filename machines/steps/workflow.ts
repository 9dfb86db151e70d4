/**
 * Workflows, the steps: the program's call of a step becomes a batch of one that the vetting and executing states run
 * like any call; the model's decision of a step is taken (or refused and asked again); each step's fact decides, by
 * the program's rule, which step comes next; the end of the flow ends the task by its success criterion.
 */
import type { MachineEvent } from '../actors.js';
import type { AgentContext, CallState, Observation } from '../context.js';
import { createBatch } from '../lib/batch.js';
import { advance, checkDecision, currentStep, workflowCallArgs } from '../lib/workflow.js';
import { DECISION_TOOL, type WorkflowFact, type WorkflowState } from '../workflows.js';
import type { AuditEntry, TranscriptEntry } from '../journal.js';
import { auditEntry, timeOf } from '../journal.js';
import type { Toolkit } from '../toolkit.js';
import { describeFields, type Step, type StepResult } from './step.js';
import { keptArguments } from './turn.js';
import { stop } from './stop.js';

function workflowEntry(
  context: AgentContext,
  event: MachineEvent,
  body: Omit<
    Extract<AuditEntry, { kind: 'workflow' }>,
    'kind' | 'at' | 'turn' | 'workflow' | 'model' | 'prompt' | 'policy' | 'session' | 'toolVersion'
  >,
): AuditEntry {
  return auditEntry(context, event, { kind: 'workflow', workflow: context.workflow?.name ?? '', ...body });
}

/** What the audit says of a step's fact, and the step that follows it. */
function stepEntry(context: AgentContext, event: MachineEvent, step: string, fact: WorkflowFact, next: WorkflowState) {
  return workflowEntry(context, event, {
    action: 'step',
    step,
    next: next.current,
    callId: null,
    code: fact.ok ? null : fact.code,
    summary:
      next.problem ?? (fact.ok ? `${step} ${fact.kind === 'decision' ? 'decided' : 'succeeded'}` : `${step} failed`),
  });
}

/**
 * The program's call of the current step: its arguments from the facts so far, as a batch of one that takes the same
 * path as a model's proposal (schema, mandate, business rules, permission, budget, confirmation, the re-check). The
 * model is shown it as a call the program made, with its result.
 */
export const startWorkflowCall: Step = (context, event, toolkit) => {
  const at = currentStep(context, toolkit)!;
  const built = workflowCallArgs(context, toolkit);
  const state = context.workflow!;
  const callId = `wf-${state.runs + 1}-${at.id}`.slice(0, 128);
  if (!built.ok) return {};
  const text = JSON.stringify(built.args);
  const transcript: TranscriptEntry[] = [
    {
      kind: 'proposal',
      at: timeOf(context, event),
      turn: context.turn,
      text: `[workflow ${state.name}, step ${at.id}: the program calls ${built.tool}]`,
      calls: [{ callId, tool: built.tool, arguments: keptArguments(text, context.policy.maxArgumentBytes) }],
    },
  ];
  return {
    context: {
      batch: createBatch(context.turn, [{ callId, tool: built.tool, args: built.args }], context.catalog),
      // The program's call is the one call this step allows.
      offered: [built.tool],
      pendingConfirmation: null,
    },
    transcript,
    audit: [
      workflowEntry(context, event, {
        action: 'call',
        step: at.id,
        next: null,
        callId,
        code: null,
        summary: at.step.purpose ?? `the program calls ${built.tool}`,
      }),
    ],
  };
};

/**
 * The fact of the workflow's call step once its batch closed: the result (or the refusal or failure: the program's
 * `next` sees it), and the step that follows. Called as the batch closes.
 */
export function workflowCallProgress(
  context: AgentContext,
  event: MachineEvent,
  calls: readonly CallState[],
  toolkit: Toolkit,
): StepResult {
  const state = context.workflow;
  // Most tasks follow no workflow: nothing more is looked at (every batch's close asks).
  if (!state) return {};
  const at = currentStep(context, toolkit);
  const call = calls.find((c) => c.callId.startsWith('wf-'));
  if (!state || !at?.step.call || !call?.observation) return {};
  const fact = factOf(call.observation, timeOf(context, event));
  const next = advance(context, toolkit, fact);
  return { context: { workflow: next }, audit: [stepEntry(context, event, at.id, fact, next)] };
}

function factOf(observation: Observation, at: number): WorkflowFact {
  return observation.ok
    ? { kind: 'call', ok: true, value: observation.data, at }
    : { kind: 'call', ok: false, code: observation.code, summary: observation.summary.slice(0, 1_000), at };
}

type DecisionEvent = Extract<MachineEvent, { type: 'model.decided' }>;

function decisionTranscript(context: AgentContext, event: DecisionEvent, observation: Observation): TranscriptEntry[] {
  return [
    {
      kind: 'proposal',
      at: event.at,
      turn: context.turn,
      text: event.text,
      calls: [
        {
          callId: event.callId,
          tool: DECISION_TOOL,
          arguments: keptArguments(event.arguments, context.policy.maxArgumentBytes),
        },
      ],
    },
    { kind: 'result', at: event.at, turn: context.turn, observation },
  ];
}

/** The model's decision fits the step: recorded as the step's fact (a decision, not a fact of the world). */
export const recordDecision: Step = (context, event, toolkit) => {
  if (event.type !== 'model.decided') return {};
  const at = currentStep(context, toolkit)!;
  const checked = checkDecision(context, event, toolkit);
  if (!checked.ok) return {};
  const fact: WorkflowFact = { kind: 'decision', ok: true, value: checked.value, at: event.at };
  const next = advance(context, toolkit, fact);
  const summary =
    checked.value !== null && typeof checked.value === 'object' && !Array.isArray(checked.value)
      ? describeFields(checked.value)
      : JSON.stringify(checked.value);
  return {
    context: { workflow: next },
    transcript: decisionTranscript(context, event, {
      callId: event.callId,
      tool: DECISION_TOOL,
      ok: true,
      data: { step: at.id, decided: checked.value },
      truncated: false,
    }),
    audit: [
      workflowEntry(context, event, {
        action: 'decided',
        step: at.id,
        next: null,
        callId: event.callId,
        code: null,
        summary,
      }),
      stepEntry(context, event, at.id, fact, next),
    ],
  };
};

/** A decision that does not fit (or none is asked for): the model is told why and asked again (bounded). */
export const refuseDecision: Step = (context, event, toolkit) => {
  if (event.type !== 'model.decided') return {};
  const checked = checkDecision(context, event, toolkit);
  const summary = checked.ok ? 'no decision is asked for now' : checked.summary;
  const step = currentStep(context, toolkit)?.id ?? null;
  return {
    context: { invalidOutputs: context.invalidOutputs + 1 },
    transcript: decisionTranscript(context, event, {
      callId: event.callId,
      tool: DECISION_TOOL,
      ok: false,
      code: 'invalid_decision',
      summary,
      retryable: true,
    }),
    audit: [
      workflowEntry(context, event, {
        action: 'refused',
        step,
        next: null,
        callId: event.callId,
        code: 'invalid_decision',
        summary,
      }),
    ],
  };
};

/** The model answered where the flow asks it for a decision: it is told so and asked again (bounded). */
export const refuseAnswerForDecision: Step = (context, event, toolkit) => {
  const step = currentStep(context, toolkit)?.id ?? '';
  const detail = `the workflow asks for the decision of step ${step} through ${DECISION_TOOL}, not a final answer`;
  return {
    context: { invalidOutputs: context.invalidOutputs + 1 },
    transcript: [
      ...(event.type === 'model.answered'
        ? [{ kind: 'answer' as const, at: event.at, turn: context.turn, text: event.text }]
        : []),
      { kind: 'invalid_output', at: timeOf(context, event), turn: context.turn, detail },
    ],
    audit: [
      workflowEntry(context, event, {
        action: 'refused',
        step,
        next: null,
        callId: null,
        code: 'invalid_decision',
        summary: detail,
      }),
    ],
  };
};

function ending(context: AgentContext): string {
  const state = context.workflow!;
  const ran = Object.keys(state.facts).join(', ') || 'no step';
  return `workflow ${state.name} ended after ${state.runs} step(s) (${ran})`;
}

/** The program could not say what the step calls (its arguments rule failed): the flow ends, the task stops. */
export const stopForWorkflowRule: Step = (context, event, toolkit) => {
  const built = workflowCallArgs(context, toolkit);
  const problem = built.ok ? 'the step could not be run' : built.summary;
  const ended = { ...context, workflow: { ...context.workflow!, current: null, problem } };
  const result = finishWorkflowUnmet(ended, event, toolkit);
  return { ...result, context: { workflow: ended.workflow, ...result.context } };
};

/** The flow ended and a trusted result meets the task's criterion: done. */
export const finishWorkflowDone: Step = (context, event) => {
  const evidence = context.evidence.at(-1);
  const message = `goal met: ${evidence ? `${evidence.tool} returned ${describeFields(evidence.fields)}` : 'no trusted result is recorded'}; ${ending(context)}`;
  return withEnd(context, event, stop(context, event, 'done', { code: 'goal_met', message }));
};

/** The flow ended and the task declares no criterion: answered, claiming nothing beyond the writes that succeeded. */
export const finishWorkflowAnswered: Step = (context, event) =>
  withEnd(
    context,
    event,
    stop(context, event, 'answered', {
      code: 'answered_without_criterion',
      message: `${ending(context)}; the task declares no success criterion, so success is not claimed`,
    }),
  );

/** The flow ended without a trusted result that meets the criterion, or a rule of the program failed. */
export const finishWorkflowUnmet: Step = (context, event) => {
  const state = context.workflow!;
  const reason = state.problem
    ? { code: 'internal_error' as const, message: `${ending(context)}: ${state.problem}` }
    : {
        code: 'goal_not_met' as const,
        message: `${ending(context)} without ${context.success?.description ?? `a trusted result of ${context.success?.tool}`}`,
      };
  return withEnd(context, event, stop(context, event, 'failed', reason));
};

function withEnd(context: AgentContext, event: MachineEvent, result: StepResult): StepResult {
  return {
    ...result,
    audit: [
      workflowEntry(context, event, {
        action: 'ended',
        step: null,
        next: null,
        callId: null,
        code: context.workflow?.problem ? 'workflow_rule_failed' : null,
        summary: context.workflow?.problem ?? ending(context),
      }),
      ...(result.audit ?? []),
    ],
  };
}
