/** Gate (e), budgets: every dimension is checked before the operation that spends it starts. */
import { nextStep } from '../lib/batch.js';
import { modelTurnNeed, shortfall } from '../lib/budget.js';
import { timeOf } from '../journal.js';
import type { Guard } from './guard.js';

export const budgetGuards = {
  hasBudgetForModelTurn: (context, event) =>
    shortfall(context.budget, modelTurnNeed(context.modelReservation), timeOf(context, event)) === null,

  hasBudgetForNextStep: (context, event) => {
    const step = nextStep(context.batch);
    if (!step) return true;
    const writes = step.kind === 'write' ? 1 : 0;
    return shortfall(context.budget, { toolCalls: step.callIds.length, writes }, timeOf(context, event)) === null;
  },

  hasBudgetForRetry: (context, event) => shortfall(context.budget, { retries: 1 }, timeOf(context, event)) === null,
} satisfies Record<string, Guard>;
