/**
 * The plan gate: questions asked of a proposed plan, in the order the chart asks them. `planRefusal` derives the
 * refusal (code and summary) from the same functions, so each check exists once.
 */
import type { MachineEvent } from '../actors.js';
import type { AgentContext } from '../context.js';
import {
  estimateOf,
  estimateShortfall,
  isPlanStuck,
  parsedPlan,
  planningOf,
  uncheckedWrite,
  unpermittedTool,
} from '../lib/plan.js';
import type { Toolkit } from '../toolkit.js';
import type { Guard } from './guard.js';

export const planGuards = {
  /** The host's policy lets the model plan (`planning.mode` is not `off`). */
  isPlanningOn: (context) => context.policy.planning.mode !== 'off',

  /** Fewer plans were proposed than the policy allows (refused ones count: re-planning is bounded). */
  hasPlanProposalsLeft: (context) => planningOf(context).proposals < context.policy.planning.maxProposals,

  /**
   * No plan is in force that can still go on: there is none, or a step of it failed, or nothing of it can run. A plan
   * that can go on is not replaced (its ready steps are what the model may do); one that finished is answered.
   */
  isPlanReplaceable: (context: AgentContext) => {
    const planning = planningOf(context);
    return planning.current === null || isPlanStuck(planning);
  },

  /** The plan parses, its step ids are unique, each step is an installed tool, its dependencies exist and are acyclic. */
  isPlanWellFormed: (context, event, toolkit) => parsedPlan(context, event, toolkit).ok,

  /** The task's principal holds the scopes of every step's tool (else those steps could never run). */
  arePlanToolsPermitted: (context, event, toolkit) => {
    const parsed = parsedPlan(context, event, toolkit);
    return parsed.ok && unpermittedTool(context, parsed.steps, toolkit) === null;
  },

  /** With a mandate, every write step's tool declares a rule against it (else each of its calls would be refused). */
  isPlanWithinMandate: (context, event, toolkit) => {
    const parsed = parsedPlan(context, event, toolkit);
    return parsed.ok && uncheckedWrite(context, parsed.steps, toolkit) === null;
  },

  /** The plan's estimated cost fits what is left of every budget. */
  isPlanWithinBudget: (context, event, toolkit) => {
    const parsed = parsedPlan(context, event, toolkit);
    return parsed.ok && estimateShortfall(context, estimateOf(context, parsed.steps, parsed.depth)) === null;
  },

  /** The policy has the plan approved before it runs: always, or (the default) when it has a write step. */
  needsPlanApproval: (context, event, toolkit) => {
    const { approval } = context.policy.planning;
    if (approval === 'never') return false;
    if (approval === 'always') return true;
    const parsed = parsedPlan(context, event, toolkit);
    return parsed.ok && parsed.steps.some((s) => s.effect === 'write');
  },

  /** The confirmation the task waits on is a plan's approval (not a call's). */
  isPlanApprovalPending: (context) => planningOf(context).current?.status === 'awaiting_approval',
} satisfies Record<string, Guard>;

/** The first plan check a proposal fails, with its call code and a summary for the model, or null when none does. */
export function planRefusal(
  context: AgentContext,
  event: MachineEvent,
  toolkit: Toolkit,
): { code: string; summary: string } | null {
  if (context.policy.planning.mode === 'off')
    return { code: 'planning_off', summary: 'this task does not take plans: propose the next tool calls instead' };
  if (!planGuards.isPlanReplaceable(context))
    return {
      code: 'plan_in_force',
      summary: `${planningOf(context).current?.id} is in force and can go on: call its ready steps' tools, or answer`,
    };
  const parsed = parsedPlan(context, event, toolkit);
  if (!parsed.ok) return { code: parsed.code, summary: parsed.summary };
  const tool = unpermittedTool(context, parsed.steps, toolkit);
  if (tool !== null)
    return { code: 'permission_denied', summary: `the user may not use ${tool}; a plan with it cannot run` };
  const write = uncheckedWrite(context, parsed.steps, toolkit);
  if (write !== null)
    return {
      code: 'mandate_unchecked',
      summary: `${write} declares no rule against the user's mandate (${context.mandate?.kind}), so its calls would be refused`,
    };
  const estimate = estimateOf(context, parsed.steps, parsed.depth);
  const short = estimateShortfall(context, estimate);
  if (short !== null)
    return {
      code: 'over_budget',
      summary: `the plan needs about ${estimate[short]} ${short}, more than the task has left`,
    };
  return null;
}
