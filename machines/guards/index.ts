/** Every guard of the agent chart, by the name the chart uses. Each family is one file. */
import { budgetGuards } from './budget.js';
import { confirmationGuards } from './confirmation.js';
import { executionGuards } from './execution.js';
import type { Guard } from './guard.js';
import { mandateGuards } from './mandate.js';
import { modelGuards } from './model.js';
import { recheckGuards } from './recheck.js';
import { reviewGuards } from './review.js';
import { vettingGuards } from './vetting.js';

export type { Guard } from './guard.js';
export { CONFIRMATION_CHECKS, asksAgain, confirmationRefusal } from './confirmation.js';

export const guards = {
  ...budgetGuards,
  ...modelGuards,
  ...vettingGuards,
  ...mandateGuards,
  ...executionGuards,
  ...recheckGuards,
  ...confirmationGuards,
  ...reviewGuards,
} satisfies Record<string, Guard>;

export type GuardName = keyof typeof guards;
