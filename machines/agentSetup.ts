/**
 * The agent chart's vocabulary, bound to the host's tools: the types, the actor placeholders, every guard by the
 * name the chart uses, and every step wired as an action. `agentMachine.ts` draws the chart from these names.
 *
 * Actors are placeholders until `machine.provide({ actors })`; every guard is a pure question in `guards/`, every
 * action a pure step in `steps/` that returns a context patch, the journal entries to append, and for host events
 * the chart's answer.
 */
import { type EventObject, fromPromise, setup } from 'xstate';
import type * as A from './actors.js';
import type { AgentContext, AgentInput, Outcome } from './context.js';
import type { AgentEvent } from './events.js';
import { budgetGuards as budget } from './guards/budget.js';
import { compensationGuards as compensation } from './guards/compensation.js';
import { presenceGuards as presence } from './guards/presence.js';
import { compactionGuards as compaction } from './guards/compaction.js';
import { planGuards as plan } from './guards/plan.js';
import { workflowGuards as workflow } from './guards/workflow.js';
import { subtaskGuards as subtask } from './guards/subtask.js';
import { confirmationGuards as confirmation } from './guards/confirmation.js';
import { executionGuards as execution } from './guards/execution.js';
import type { Guard } from './guards/guard.js';
import { mandateGuards as mandate } from './guards/mandate.js';
import { modelGuards as model } from './guards/model.js';
import { recheckGuards as recheck } from './guards/recheck.js';
import { reviewGuards as review } from './guards/review.js';
import { vettingGuards as vetting } from './guards/vetting.js';
import type { AuditEntry, MachineEmitted, TranscriptEntry } from './journal.js';
import type { CompactionState } from './compactions.js';
import { entriesTokens } from './lib/conversationSize.js';
import * as asking from './steps/confirmation.js';
import * as undoing from './steps/compensate.js';
import * as presenceSteps from './steps/presence.js';
import * as compacting from './steps/compaction.js';
import * as planning from './steps/plan.js';
import * as flow from './steps/workflow.js';
import * as delegating from './steps/subtask.js';
import * as running from './steps/execution.js';
import * as fitting from './steps/mandate.js';
import * as rechecking from './steps/recheck.js';
import * as reconciling from './steps/reconcile.js';
import * as replies from './steps/replies.js';
import * as reviewing from './steps/review.js';
import type { Step } from './steps/step.js';
import * as stopping from './steps/stop.js';
import * as turn from './steps/turn.js';
import * as judging from './steps/vetting.js';
import * as waiting from './steps/waits.js';
import type { Tag } from './tags.js';
import type { Toolkit } from './toolkit.js';
import { stepAction } from './stepAction.js';

function withEntries(state: CompactionState, entries: readonly TranscriptEntry[]): CompactionState {
  return { ...state, tokens: state.tokens + entriesTokens(entries, state.resultBytes) };
}

function notProvided<TOutput, TInput>(name: string) {
  return fromPromise<TOutput, TInput>(async () => {
    throw new Error(`actor "${name}" is not provided; attach it with machine.provide({ actors })`);
  });
}

/** The chart's setup for the host's tools: the gates read the tools' current definitions through `toolkit`. */
export function agentSetup(toolkit: Toolkit) {
  /** Binds the named guards of a family to the toolkit; the names are listed, never read off a module. */
  const named = <F extends Record<string, Guard>, K extends keyof F & string>(family: F, names: readonly K[]) =>
    Object.fromEntries(
      names.map((name) => {
        // Looked up once, here: a guard runs a few dozen times a round.
        const guard = family[name]!;
        return [
          name,
          (args: { context: AgentContext; event: AgentEvent }) =>
            guard(args.context, args.event as A.MachineEvent, toolkit),
        ];
      }),
    ) as Record<K, (args: { context: AgentContext; event: AgentEvent }) => boolean>;

  const base = setup({
    types: {
      context: {} as AgentContext,
      input: {} as AgentInput,
      events: {} as AgentEvent,
      emitted: {} as MachineEmitted,
      output: {} as Outcome | null,
      tags: {} as Tag,
    },
    actors: {
      model: notProvided<A.ModelActorOutput, A.ModelActorInput>('model'),
      validateCall: notProvided<A.CheckActorOutput, A.CheckActorInput>('validateCall'),
      authorizeCall: notProvided<A.CheckActorOutput, A.CheckActorInput>('authorizeCall'),
      recheckCall: notProvided<A.RecheckActorOutput, A.RecheckActorInput>('recheckCall'),
      executeReads: notProvided<A.ReadsActorOutput, A.ReadsActorInput>('executeReads'),
      executeWrite: notProvided<A.WriteActorOutput, A.WriteActorInput>('executeWrite'),
      lookupWrite: notProvided<A.LookupActorOutput, A.LookupActorInput>('lookupWrite'),
      summariseConversation: notProvided<A.SummariseActorOutput, A.SummariseActorInput>('summariseConversation'),
    },
    guards: {
      // the model's turn, gate (a) protocol, and the waits around the model
      ...named(model, [
        'didModelFail',
        'isModelOutage',
        'canWaitOutModel',
        'isModelRetryDue',
        'hasPairableCallIds',
        'isBatchWellFormed',
      ]),
      ...named(model, [
        'canReaskModel',
        'hasSuccessCriterion',
        'isGoalMet',
        'isFromTaskUser',
        'isQuestionUnexpired',
        'hasQuestionExpired',
      ]),
      ...named(model, ['replansOnAnswerExpiry', 'isFromOperatorOfTenant']),
      // gates (b) schema, mandate, (c) business validation, (d) permission
      ...named(vetting, [
        'isEveryCallVetted',
        'isRepeatingWithoutNewObservation',
        'doArgumentsMatchSchema',
        'hasAsyncBusinessRules',
      ]),
      ...named(vetting, ['isToolOffered']),
      ...named(vetting, [
        'isBusinessValid',
        'hasScopesForTool',
        'hasAsyncResourcePolicy',
        'isAuthorized',
        'isConfirmationRuleSound',
      ]),
      ...named(mandate, ['isWithinMandate', 'isRepeatOfDeniedCall', 'stopsOnRepeatedDenial']),
      // gate (e), budget
      ...named(budget, ['hasBudgetForModelTurn', 'hasBudgetForNextStep', 'hasBudgetForRetry']),
      ...named(budget, ['hasBudgetForModelRetry']),
      // executing, the re-check before a write, reconciling
      ...named(execution, [
        'isBatchComplete',
        'hasTooManyRejectedTurns',
        'isCancelRequested',
        'isNextStepWrite',
        'isNextWriteAlreadyDone',
      ]),
      ...named(execution, ['isNextStepRead', 'areReadsLastStep']),
      ...named(execution, [
        'isWriteOutcomeUnknown',
        'doesWriteNeedReview',
        'wasWriteFound',
        'wasWriteNotFound',
        'isLookupInconclusive',
      ]),
      ...named(execution, [
        'isSameKeyRetrySafe',
        'canRetryWrite',
        'canLookUpAgain',
        'dependsOnUnverifiedFacts',
        'haveRereadsKeptFailing',
      ]),
      ...named(recheck, [
        'areArgumentsIntact',
        'isConfirmationStillSufficient',
        'holdsScopesNow',
        'isStillBusinessValid',
      ]),
      ...named(recheck, ['isStillAuthorized', 'isWithinRateLimit', 'isResendAfterReview', 'canRecheckNow']),
      // gate (f), confirmation, with approvers
      ...named(confirmation, [
        'needsConfirmation',
        'isConfirmedForExactArguments',
        'isConfirmationForPendingCall',
        'isFromConfirmingUser',
      ]),
      ...named(confirmation, [
        'isNotSelfApproval',
        'holdsApproverScope',
        'isFirstDecisionOfApprover',
        'completesApprovals',
      ]),
      ...named(confirmation, [
        'isConfirmationUnexpired',
        'isUnderSamePolicy',
        'doesConfirmationMatchArguments',
        'canAskConfirmationAgain',
      ]),
      ...named(confirmation, [
        'cancelsOnReject',
        'cancelsOnExpiry',
        'isRejectionOfPendingConfirmation',
        'hasPendingConfirmationExpired',
      ]),
      // the review desk
      ...named(review, [
        'isFromReviewer',
        'isResolvedAsHappened',
        'isResolvedAsNotHappened',
        'isResolvedAsRetry',
        'isReviewResultValid',
      ]),
      ...named(review, ['isHeldWriteRetrySafe']),
      // a stop, and the compensation of the task's writes
      ...named(compensation, ['mustCompensate', 'isUnwinding', 'stoppedAsFailed', 'stoppedAsCancelled']),
      // compaction of the conversation
      ...named(compaction, ['isTranscriptNearLimit', 'isContextTooLong', 'canCompactForRefusal']),
      ...named(compaction, ['hasRoomForResults']),
      ...named(compaction, ['didCompactionReplace', 'wasCompactionRequested']),
      // the user's presence
      ...named(presence, ['isUserAway', 'isAboutTaskUser', 'hasAbsenceExpired']),
      // the plan gate (plan-and-execute)
      ...named(plan, ['isPlanningOn', 'hasPlanProposalsLeft', 'isPlanReplaceable', 'isPlanWellFormed']),
      ...named(plan, ['arePlanToolsPermitted']),
      ...named(plan, ['isPlanWithinMandate', 'isPlanWithinBudget', 'needsPlanApproval', 'isPlanApprovalPending']),
      // a host-defined workflow
      ...named(workflow, ['isFollowingWorkflow', 'hasWorkflowEnded', 'didWorkflowFail', 'isNextWorkflowStepCall']),
      ...named(workflow, ['isWorkflowCallBuildable', 'isAwaitingDecision', 'isDecisionValid']),
      // sub-tasks
      ...named(subtask, ['isSubtaskCall', 'areSubtaskToolsWithinParent', 'isSubtaskMandateNarrower']),
      ...named(subtask, ['isSubtaskShareWithinBudget', 'hasSubtaskStarted', 'isOutcomeOfPendingSubtask']),
    },
  });

  const NOTHING_EMITTED = Object.freeze([]) as unknown as MachineEmitted[];
  /** Wires a pure step as an action: assign its context patch, emit its journal entries and its answer. */
  const action = (step: Step) =>
    base.createAction(
      stepAction((context, event) => {
        const result = step(context, event as A.MachineEvent, toolkit);
        const entries = result.transcript;
        // What the conversation grows by, counted as it is recorded (the guard of `compacting` reads it).
        const grown = entries?.length ? withEntries(result.context?.compaction ?? context.compaction, entries) : null;
        const patch = grown ? { ...result.context, compaction: grown } : (result.context ?? null);
        // Most steps emit nothing: they share one empty list (stepAction only reads it).
        if (!result.audit?.length && !entries?.length && !result.reply) return { patch, emitted: NOTHING_EMITTED };
        // Made at its size (a list grown by push starts with room for sixteen).
        const audit = result.audit ?? NOTHING_EMITTED;
        const transcript = entries ?? NOTHING_EMITTED;
        const emitted = new Array<MachineEmitted>(audit.length + transcript.length + (result.reply ? 1 : 0));
        let at = 0;
        for (let i = 0; i < audit.length; i++) emitted[at++] = { type: 'audit', entry: audit[i] as AuditEntry };
        for (let i = 0; i < transcript.length; i++)
          emitted[at++] = { type: 'transcript', entry: transcript[i] as TranscriptEntry };
        if (result.reply) emitted[at] = { type: 'reply', reply: result.reply };
        return { patch, emitted };
      }) as unknown as Parameters<typeof base.createAction>[0],
    );
  /** The named steps of a phase as actions; the names are listed, never read off a module's exports. */
  const steps = <F extends Record<string, unknown>, K extends keyof F & string>(phase: F, names: readonly K[]) =>
    Object.fromEntries(names.map((name) => [name, action(phase[name] as Step)])) as Record<
      K,
      ReturnType<typeof action>
    >;

  return base.extend({
    actions: {
      ...steps(turn, ['recordTaskStarted', 'startModelTurn', 'recordInvalidOutput', 'recordUnpairableProposal']),
      ...steps(turn, ['rejectWholeBatch', 'acceptProposal', 'recordQuestion', 'recordUserAnswer']),
      /** Settles the turn's budget, then hands the model's event to the chart as `model.*`. */
      relayModelOutput: base.createAction(
        stepAction((context, event) => {
          const result = turn.settleModelTurn(context, event as A.MachineEvent, toolkit);
          const audit = result.audit ?? NOTHING_EMITTED;
          const emitted = new Array<MachineEmitted>(audit.length);
          for (let i = 0; i < audit.length; i++) emitted[i] = { type: 'audit', entry: audit[i] as AuditEntry };
          const output = (event as unknown as { output: A.ModelActorOutput }).output;
          const raised = output.kind === 'replied' ? (output.event as EventObject) : undefined;
          return { patch: result.context ?? null, emitted, raised };
        }) as unknown as Parameters<typeof base.createAction>[0],
      ),
      ...steps(waiting, ['pauseForModel', 'resumeModel', 'expireQuestion', 'stopForNoAnswer']),
      ...steps(waiting, ['retryModelNow', 'refuseModelRetry']),
      ...steps(judging, ['takeNextCall', 'refuseForSchema', 'acceptArguments', 'noteBusinessCheck']),
      ...steps(judging, [
        'passBusiness',
        'refuseForBusiness',
        'notePermissionCheck',
        'refuseForPermission',
        'admitCall',
        'finishVetting',
      ]),
      ...steps(judging, ['refuseForConfirmationRule', 'refuseNotOffered']),
      ...steps(fitting, ['passMandate', 'refuseForMandate', 'stopForRepeatedDenial']),
      ...steps(running, [
        'closeBatch',
        'startReads',
        'finishReads',
        'startWrite',
        'finishWrite',
        'refuseDuplicateWrite',
        'refuseForUnverifiedFacts',
      ]),
      ...steps(rechecking, [
        'startRecheck',
        'noteRecheck',
        'refuseChangedArguments',
        'askForFreshConfirmation',
        'refuseAtRecheck',
      ]),
      ...steps(rechecking, ['resendWrite', 'refuseAtRecheckNow', 'stopForBudgetAtRecheck', 'startWriteNow']),
      ...steps(rechecking, ['resendWriteNow', 'holdRefusedResendNow']),
      ...steps(reconciling, [
        'noteUnknownWrite',
        'finishReconciledWrite',
        'abandonWriteForCancel',
        'abandonWriteForAbsence',
        'prepareResend',
        'lookUpAgain',
      ]),
      ...steps(reviewing, [
        'holdForReview',
        'holdWriteForReview',
        'acceptReviewedWrite',
        'closeReviewedWrite',
        'prepareReviewedResend',
      ]),
      ...steps(reviewing, ['holdRefusedResend', 'refuseReview', 'replyNotWaitingForReview', 'deferCancelInReview']),
      ...steps(asking, [
        'requestConfirmation',
        'grantConfirmation',
        'recordApproval',
        'refuseConfirmation',
        'askConfirmationAgain',
      ]),
      ...steps(asking, ['refuseRejection']),
      ...steps(asking, ['rejectConfirmedCall', 'giveUpConfirmation', 'cancelForConfirmation']),
      ...steps(stopping, [
        'stopForBudget',
        'stopCancelled',
        'deferCancel',
        'stopForModelFailure',
        'stopForInternalError',
      ]),
      ...steps(stopping, [
        'stopForProtocolError',
        'stopForRejections',
        'stopForLoop',
        'finishDone',
        'finishUnmetGoal',
        'finishRefused',
      ]),
      ...steps(stopping, ['finishAnswered', 'stopForUnverifiedFacts']),
      ...steps(undoing, ['beginCompensation', 'finishCompensation']),
      ...steps(compacting, ['startCompaction', 'compactForRefusal', 'recordCompaction', 'stopUncompactable']),
      ...steps(presenceSteps, ['recordUserAway', 'recordUserBack', 'pauseForAbsence', 'resumeForUser']),
      ...steps(presenceSteps, ['stopForAbsence', 'refusePresenceOfOther']),
      ...steps(planning, ['refusePlan', 'stopForPlanLimit', 'adoptPlan', 'requestPlanApproval']),
      ...steps(planning, ['grantPlanApproval', 'rejectPlan', 'expirePlanApproval', 'askPlanApprovalAgain']),
      ...steps(flow, ['startWorkflowCall', 'recordDecision', 'refuseDecision', 'refuseAnswerForDecision']),
      ...steps(flow, ['stopForWorkflowRule', 'finishWorkflowDone', 'finishWorkflowAnswered', 'finishWorkflowUnmet']),
      ...steps(delegating, ['refuseSubtask', 'recordSubtaskStarted', 'finishSubtask', 'refuseSubtaskOutcome']),
      ...steps(replies, ['replyNotWaitingForConfirmation', 'replyNotWaitingForAnswer', 'replyNothingDue']),
      ...steps(replies, ['replyNotWaitingForModel']),
    },
  });
}
