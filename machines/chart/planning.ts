/**
 * Plan-and-execute in the chart: what a proposed plan meets (the plan gate, in order, each refusal its own named
 * guard), and the state a plan waits in for its approval. An approval is a confirmation like a call's, bound to the
 * plan's hash, and decided by the same named checks (who, when, under which policy, for which plan).
 */
import { and, not } from 'xstate';
import { TAGS } from '../tags.js';
import type { ChartState } from './chartState.js';

/** `model.planProposed`, taken in `thinking`: refused (the model is told), the task stopped, held, or adopted. */
export const planProposed = [
  { guard: not('isPlanningOn'), target: 'deciding', actions: 'refusePlan' },
  { guard: not('hasPlanProposalsLeft'), target: 'stopping', actions: 'stopForPlanLimit' },
  { guard: not('isPlanReplaceable'), target: 'deciding', actions: 'refusePlan' },
  { guard: not('isPlanWellFormed'), target: 'deciding', actions: 'refusePlan' },
  { guard: not('arePlanToolsPermitted'), target: 'deciding', actions: 'refusePlan' },
  { guard: not('isPlanWithinMandate'), target: 'deciding', actions: 'refusePlan' },
  { guard: not('isPlanWithinBudget'), target: 'deciding', actions: 'refusePlan' },
  { guard: 'needsPlanApproval', target: 'awaitingPlanApproval', actions: 'requestPlanApproval' },
  { target: 'deciding', actions: 'adoptPlan' },
] as const;

export const awaitingPlanApproval = {
  description:
    'Persisted; the plan runs only once user.confirmed bound to its id, policy and hash comes from the task user or the approvers. Rejected or expired, it is dropped and the model told.',
  tags: [TAGS.waiting, TAGS.confirmation],
  on: {
    'user.confirmed': [
      { guard: not('isConfirmationForPendingCall'), actions: 'refuseConfirmation' },
      {
        guard: not(
          and(['isFromConfirmingUser', 'isNotSelfApproval', 'holdsApproverScope', 'isFirstDecisionOfApprover']),
        ),
        actions: 'refuseConfirmation',
      },
      // A request that can no longer be granted: expired, what its expiry does (dropped, the model told), whether
      // the timer or this late decision finds it first; asked under another host policy, asked again under it.
      { guard: not('isConfirmationUnexpired'), target: 'deciding', actions: 'expirePlanApproval' },
      { guard: and([not('isUnderSamePolicy'), 'canAskConfirmationAgain']), actions: 'askPlanApprovalAgain' },
      { guard: not('isUnderSamePolicy'), target: 'deciding', actions: 'expirePlanApproval' },
      // Given for another plan than the request shows: refused, and the request stands as it is.
      { guard: not('doesConfirmationMatchArguments'), actions: 'refuseConfirmation' },
      { guard: 'completesApprovals', target: 'deciding', actions: 'grantPlanApproval' },
      { actions: 'recordApproval' },
    ],
    'user.rejected': [
      { guard: 'isRejectionOfPendingConfirmation', target: 'deciding', actions: 'rejectPlan' },
      { actions: 'refuseRejection' },
    ],
    'timer.confirmationExpired': [
      { guard: 'hasPendingConfirmationExpired', target: 'deciding', actions: 'expirePlanApproval' },
    ],
  },
} satisfies ChartState;
