/** The host policy and budget limits a task gets when the host does not say otherwise. */
import type { BudgetLimits, Policy } from '../machines/context.js';
import { DEFAULT_PLANNING } from '../machines/plans.js';

export const DEFAULT_POLICY: Policy = {
  version: '1',
  maxCallsPerBatch: 8,
  maxArgumentBytes: 16_384,
  maxRejectedTurns: 3,
  maxInvalidOutputs: 2,
  confirmationTtlMs: 15 * 60_000,
  maxConfirmationRequests: 3,
  maxReconcileAttempts: 3,
  observationCapBytes: 8_192,
  onRepeatedDenial: 'stop',
  reviewScope: 'tasks:review',
  answerTtlMs: 24 * 60 * 60_000,
  onAnswerExpiry: 'stop',
  modelOutageMs: 60 * 60_000,
  modelWakeMs: { first: 5_000, longest: 5 * 60_000 },
  // Safe by default: every money-moving write is confirmed, the Rule of Two asks, nothing is loosened.
  unconfirmedMoneyUpTo: 0,
  highRiskApproval: null,
  ruleOfTwo: 'confirm',
  maxUnknownReads: 2,
  // A write whose tool names a compensation is undone when the task stops without meeting its goal.
  compensateOn: ['failed', 'budget_exhausted', 'cancelled'],
  // A task whose user went away waits a day for them, paused, then is cancelled.
  awayTtlMs: 24 * 60 * 60_000,
  // The model plans as it goes unless the host asks for plans; a plan with a write is approved by the user first.
  planning: { ...DEFAULT_PLANNING },
  loosened: [],
};

export const DEFAULT_LIMITS: BudgetLimits = {
  modelTurns: 12,
  toolCalls: 24,
  writes: 4,
  retries: 8,
  tokens: 200_000,
  costMicros: 2_000_000,
  /** No money moves unless the host budgets it: a tool that declares `amount` needs `limits.money`. */
  money: 0,
  wallClockMs: 10 * 60_000,
};
