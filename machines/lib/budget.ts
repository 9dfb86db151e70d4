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

/**
 * The first dimension that `need` would overdraw at time `now`, or null when it fits. A dimension the step spends
 * that is already overdrawn (a turn that used more than it reserved) refuses it even when it reserves nothing.
 */
export function shortfall(budget: BudgetState, need: Partial<BudgetCounters>, now: number): BudgetDimension | null {
  if (now >= budget.deadlineAt) return 'wallClock';
  // What `remaining` gives, per dimension asked (a guard asks every round: no object, no key list).
  const { limits, used } = budget;
  for (const key in need) {
    if (!Object.hasOwn(need, key)) continue;
    const dimension = key as keyof BudgetCounters;
    const amount = need[dimension];
    if (amount === undefined) continue;
    const left = limits[dimension] - used[dimension];
    if (left < 0 || (amount > 0 && amount > left)) return dimension;
  }
  return null;
}

/**
 * What the next model turn reserves: the model's declared reservation, or the most a settled turn of this task spent
 * when that is more (a model that reserves nothing, or too little, is charged what it has been seen to spend).
 */
export function modelTurnNeed(
  reservation: ModelReservation,
  budget: Pick<BudgetState, 'largestTurn'>,
): Partial<BudgetCounters> {
  return {
    modelTurns: 1,
    tokens: Math.max(reservation.tokens, budget.largestTurn.tokens),
    costMicros: Math.max(reservation.costMicros, budget.largestTurn.costMicros),
  };
}

/**
 * The turn's token and cost reservation given back (its model turn stays counted): a turn that failed without a
 * reply reported no usage, so it is charged nothing rather than everything it reserved.
 */
export function releaseTurn(budget: BudgetState, reservation: ModelReservation): BudgetState {
  const need = modelTurnNeed(reservation, budget);
  return debit(budget, { tokens: -(need.tokens ?? 0), costMicros: -(need.costMicros ?? 0) });
}

/** The turn's token and cost reservation taken again (a turn asked again after an outage wait). */
export function reserveTurnAgain(budget: BudgetState, reservation: ModelReservation): BudgetState {
  const need = modelTurnNeed(reservation, budget);
  return debit(budget, { tokens: need.tokens ?? 0, costMicros: need.costMicros ?? 0 });
}

export function debit(budget: BudgetState, amount: Partial<BudgetCounters>): BudgetState {
  const used = { ...budget.used };
  // A for-in over the amount's own keys (`Object.keys`' order, without the list).
  for (const key in amount)
    if (Object.hasOwn(amount, key)) used[key as keyof BudgetCounters] += amount[key as keyof BudgetCounters] ?? 0;
  return { ...budget, used };
}

export function describeShortfall(budget: BudgetState, dimension: BudgetDimension): string {
  if (dimension === 'wallClock') return `the wall-clock budget of ${budget.limits.wallClockMs} ms is spent`;
  return `the ${dimension} budget is spent (${budget.used[dimension]} of ${budget.limits[dimension]} used)`;
}
