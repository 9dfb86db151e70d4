/**
 * A workflow's progress, pure: which step is next, what the program's call of a step is, whether the model's
 * decision fits the step, and which step follows from the facts. The host's rules (`args`, `next`) are called here;
 * one that throws, returns a promise or names no step of the flow ends the flow with the problem recorded (fail
 * closed: nothing runs on a rule that did not answer).
 */
import { z } from 'zod';
import type { AgentContext, Json } from '../context.js';
import type { MachineEvent } from '../actors.js';
import type { Toolkit } from '../toolkit.js';
import {
  WORKFLOW_LIMITS,
  type WorkflowDefinition,
  type WorkflowFact,
  type WorkflowState,
  type WorkflowStep,
  type WorkflowTask,
} from '../workflows.js';
import { toJson } from './arguments.js';
import { parseStrictJson } from './strictJson.js';
import { safeErrorText, zodSummary } from './text.js';

/** The task's flow and the step it is at, or null when it follows none (or the flow has ended). */
export function currentStep(
  context: AgentContext,
  toolkit: Toolkit,
): { definition: WorkflowDefinition; id: string; step: WorkflowStep } | null {
  const state = context.workflow;
  if (!state || state.current === null) return null;
  const definition = toolkit.workflow?.(state.name);
  const step = definition?.steps[state.current];
  return definition && step ? { definition, id: state.current, step } : null;
}

export function workflowTask(context: AgentContext): WorkflowTask {
  return {
    mandate: context.mandate ? { kind: context.mandate.kind, terms: structuredClone(context.mandate.terms) } : null,
    principal: { userId: context.principal.userId, tenantId: context.principal.tenantId },
  };
}

/** The arguments of the program's call of the current step, or why there are none. */
export function workflowCallArgs(
  context: AgentContext,
  toolkit: Toolkit,
): { ok: true; tool: string; args: Json } | { ok: false; summary: string } {
  const at = currentStep(context, toolkit);
  const call = at?.step.call;
  if (!at || !call) return { ok: false, summary: 'the current step is not a call' };
  try {
    const args = call.args(structuredClone(context.workflow!.facts), workflowTask(context)) as unknown;
    if (args instanceof Promise) {
      args.catch(() => {});
      return { ok: false, summary: `the arguments rule of step ${at.id} returned a promise; it must be synchronous` };
    }
    return { ok: true, tool: call.tool, args: toJson(args) };
  } catch (error) {
    return {
      ok: false,
      summary: `the arguments rule of step ${at.id} failed: ${safeErrorText(error)}`.slice(0, 1_000),
    };
  }
}

/** The schema a decision's arguments must match: `{ choice }` among the choices, or the step's output schema. */
export function decisionSchema(decision: NonNullable<WorkflowStep['decide']>): z.ZodType {
  if (decision.output) return decision.output;
  const choices = [...(decision.choices ?? [])];
  return z.strictObject({ choice: z.enum(choices as [string, ...string[]]) });
}

const checked = new WeakMap<object, { ok: true; value: Json } | { ok: false; summary: string }>();

/** The model's decision for the current step, checked against its schema (once per event). */
export function checkDecision(
  context: AgentContext,
  event: MachineEvent,
  toolkit: Toolkit,
): { ok: true; value: Json } | { ok: false; summary: string } {
  if (event.type !== 'model.decided') return { ok: false, summary: 'no decision' };
  const cached = checked.get(event);
  if (cached) return cached;
  const result = check(context, event.arguments, toolkit);
  checked.set(event, result);
  return result;
}

function check(
  context: AgentContext,
  text: string,
  toolkit: Toolkit,
): { ok: true; value: Json } | { ok: false; summary: string } {
  const decide = currentStep(context, toolkit)?.step.decide;
  if (!decide) return { ok: false, summary: 'no decision is asked for now' };
  const json = parseStrictJson(text);
  if (!json.ok) return { ok: false, summary: `the decision is not valid JSON: ${json.message}` };
  try {
    const parsed = decisionSchema(decide).safeParse(json.value);
    if (!parsed.success) return { ok: false, summary: zodSummary(parsed.error as never) };
    return { ok: true, value: toJson(parsed.data) };
  } catch (error) {
    return { ok: false, summary: `the decision's schema failed (${safeErrorText(error)})` };
  }
}

/**
 * The flow after the current step established `fact`: the next step (by the step's `next`), or null with the problem
 * when the rule failed or named no step, or when the flow ran more steps than the bound.
 */
export function advance(context: AgentContext, toolkit: Toolkit, fact: WorkflowFact): WorkflowState {
  const state = context.workflow!;
  const at = currentStep(context, toolkit);
  const facts = { ...state.facts, ...(at ? { [at.id]: fact } : {}) };
  const runs = state.runs + 1;
  const ended = (problem: string | null): WorkflowState => ({ ...state, facts, runs, current: null, problem });
  if (!at?.step.next) return ended(null);
  let next: unknown;
  try {
    next = at.step.next(structuredClone(facts), workflowTask(context));
  } catch (error) {
    return ended(`the next-step rule of ${at.id} failed: ${safeErrorText(error)}`.slice(0, 1_000));
  }
  if (next === null) return ended(null);
  if (typeof next !== 'string' || !at.definition.steps[next])
    return ended(`the next-step rule of ${at.id} named no step of ${at.definition.name}: ${String(next).slice(0, 64)}`);
  if (runs >= WORKFLOW_LIMITS.runs) return ended(`the flow ran ${runs} steps, the most a task may run`);
  return { ...state, facts, runs, current: next };
}

/** Checks a workflow definition when the host installs it; throws a message naming the first problem. */
export function workflowProblem(definition: WorkflowDefinition, tools: (name: string) => boolean): string | null {
  const ids = Object.keys(definition.steps ?? {});
  if (!definition.name || typeof definition.name !== 'string') return 'a workflow needs a name';
  if (ids.length === 0 || ids.length > WORKFLOW_LIMITS.steps)
    return `a workflow has 1 to ${WORKFLOW_LIMITS.steps} steps`;
  if (!definition.steps[definition.start]) return `start names no step (${definition.start})`;
  for (const id of ids) {
    const step = definition.steps[id]!;
    if (id.length > WORKFLOW_LIMITS.stepId) return `step id ${id} is longer than ${WORKFLOW_LIMITS.stepId}`;
    if (Boolean(step.call) === Boolean(step.decide)) return `step ${id} must be either a call or a decision`;
    if (step.call && !tools(step.call.tool)) return `step ${id} calls ${step.call.tool}, which is not installed`;
    if (step.call && typeof step.call.args !== 'function') return `step ${id}: call.args must be a function`;
    if (step.decide && !step.decide.output && !(step.decide.choices && step.decide.choices.length > 0))
      return `step ${id}: a decision needs choices or an output schema`;
    if (step.next !== undefined && typeof step.next !== 'function') return `step ${id}: next must be a function`;
  }
  return null;
}
