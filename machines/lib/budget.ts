/**
 * Budgets: every dimension is checked, and debited, before the operation that spends it starts. Pure.
 */
import type { BudgetCounters, BudgetDimension, BudgetState, ModelReservation } from '../context.js';

export const ZERO_COUNTERS: BudgetCounters = {
  modelTurns: 0,
  toolCalls: 0,
  writes: 0,
  retries: 0,
  tokens: 0,
  costMicros: 0,
  money: 0,
};

export function remaining(budget: BudgetState): BudgetCounters {
  const { limits, used } = budget;
  return {
    modelTurns: limits.modelTurns - used.modelTurns,
    toolCalls: limits.toolCalls - used.toolCalls,
    writes: limits.writes - used.writes,
    retries: limits.retries - used.retries,
    tokens: limits.tokens - used.tokens,
    costMicros: limits.costMicros - used.costMicros,
    money: limits.money - used.money,
  };
}

/** The first dimension that `need` would overdraw at time `now`, or null when it fits. */
export function shortfall(budget: BudgetState, need: Partial<BudgetCounters>, now: number): BudgetDimension | null {
  if (now >= budget.deadlineAt) return 'wallClock';
  const left = remaining(budget);
  for (const key of Object.keys(need) as (keyof BudgetCounters)[]) {
    const amount = need[key] ?? 0;
    if (amount > 0 && amount > left[key]) return key;
  }
  return null;
}

export function modelTurnNeed(reservation: ModelReservation): Partial<BudgetCounters> {
  return { modelTurns: 1, tokens: reservation.tokens, costMicros: reservation.costMicros };
}

export function debit(budget: BudgetState, amount: Partial<BudgetCounters>): BudgetState {
  const used = { ...budget.used };
  for (const key of Object.keys(amount) as (keyof BudgetCounters)[]) used[key] += amount[key] ?? 0;
  return { ...budget, used };
}

export function describeShortfall(budget: BudgetState, dimension: BudgetDimension): string {
  if (dimension === 'wallClock') return `the wall-clock budget of ${budget.limits.wallClockMs} ms is spent`;
  return `the ${dimension} budget is spent (${budget.used[dimension]} of ${budget.limits[dimension]} used)`;
}
