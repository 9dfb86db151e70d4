/** Gate (e), budgets: every dimension is checked before the operation that spends it starts. */
import type { AgentContext, BudgetCounters } from '../context.js';
import { findCall, nextStep } from '../lib/batch.js';
import { modelTurnNeed, shortfall } from '../lib/budget.js';
import { amountOf } from '../lib/toolRules.js';
import { timeOf } from '../journal.js';
import type { Toolkit } from '../toolkit.js';
import type { Guard } from './guard.js';
import { endWait } from '../steps/step.js';
import { shareNeed, subtaskSpec } from '../lib/subtask.js';

/**
 * What the next step of the batch spends: its calls, a write, and the money a write moves by its tool's rule. A rule
 * that cannot say how much a write moves needs an infinite amount, which no budget holds (not even the unbounded one
 * of a task migrated from agent/3): the write does not run.
 */
export function nextStepNeed(context: AgentContext, toolkit: Toolkit): Partial<BudgetCounters> | null {
  const step = nextStep(context.batch);
  if (!step) return null;
  if (step.kind === 'read') return { toolCalls: step.callIds.length };
  const call = findCall(context.batch, step.callIds[0]!)!;
  const money = amountOf(context, call, toolkit.rules(call.tool));
  // A sub-task tool's call also takes the child's share, before the child starts.
  const sub = toolkit.rules(call.tool)?.subtask ? subtaskSpec(context, call, toolkit) : null;
  if (sub?.ok)
    return { ...shareNeed(sub.spec.share), money: (money ?? Number.POSITIVE_INFINITY) + sub.spec.share.money };
  return { toolCalls: 1, writes: 1, money: money ?? Number.POSITIVE_INFINITY };
}

export const budgetGuards = {
  hasBudgetForModelTurn: (context, event) =>
    shortfall(context.budget, modelTurnNeed(context.modelReservation, context.budget), timeOf(context, event)) === null,

  hasBudgetForNextStep: (context, event, toolkit) => {
    // Undoing the task's own writes is never refused for budget (it is debited all the same, and audited).
    const need = nextStepNeed(context, toolkit);
    if (context.unwinding !== null) return need === null || Number.isFinite(need.money ?? 0);
    return need === null || shortfall(context.budget, need, timeOf(context, event)) === null;
  },

  /**
   * An operator's early model retry fits: it is one more model turn with its token and cost reservation (the model's
   * own retries have been spent by then), checked before anything is spent, on the budget as the wait leaves it
   * (waiting does not spend the wall clock).
   */
  hasBudgetForModelRetry: (context, event) => {
    const { budget } = endWait(context, event);
    return shortfall(budget, modelTurnNeed(context.modelReservation, budget), timeOf(context, event)) === null;
  },

  hasBudgetForRetry: (context, event) => shortfall(context.budget, { retries: 1 }, timeOf(context, event)) === null,
} satisfies Record<string, Guard>;
