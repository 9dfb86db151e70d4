/**
 * The agent statechart. The model only proposes (it is the invoked `model` actor, whose single output is a
 * `model.*` event); the host's rules are the named guards below; tools run as invoked actors the runtime provides.
 *
 * Every gate is visible here by name: (a) protocol as guards on the model's proposal; (b) schema, the user's
 * mandate, (c) business validation and (d) permission as one ordered list of guards of `vetting.judging` (one call
 * at a time, `chart/vetting.ts`; a tool's asynchronous hook in its own invoked state); (e) budget
 * and (f) confirmation (by the user, or by approvers) as guards of `executing.selecting`. Right before a write runs,
 * `executing.rechecking` asks all of them again on the exact arguments. Every stop that did not meet the goal passes
 * through `stopping`, where the writes the task made are undone (compensated) first when the policy says so, by
 * calls that go through the same gates. When the conversation nears the model's window, `compacting` summarises its
 * older turns before the next turn. Nothing here does I/O: the guards and steps are wired by name in
 * `agentSetup.ts`.
 */
import { and, not, or } from 'xstate';
import { agentSetup } from './agentSetup.js';
import { modelInput, summariseInput } from './lib/inputs.js';
import { TAGS } from './tags.js';
import { type Toolkit, emptyToolkit } from './toolkit.js';
import { initialContext } from './steps/turn.js';
import { executingState } from './chart/executing.js';
import { vettingState } from './chart/vetting.js';
import { pausedState } from './chart/paused.js';
import { awaitingPlanApproval, planProposed } from './chart/planning.js';
import { decided, followingState } from './chart/workflow.js';

/** Bumped whenever a change makes old snapshots unsafe to restore; stored in every persisted envelope. */
export const AGENT_MACHINE_VERSION = 'agent/8';

/**
 * The agent chart for the host's tools: the gates read the tools' current definitions, hashing uses the injected
 * SHA-256. The chart's shape does not depend on the tools.
 */
export function createAgentMachine(toolkit: Toolkit) {
  return agentSetup(toolkit).createMachine({
    id: 'agent',
    context: ({ input }) => initialContext(input),
    entry: 'recordTaskStarted',
    initial: 'deciding',
    on: {
      'task.cancelled': { target: '.stopping', actions: 'stopCancelled' },
      // Host events the current state does not take: answered, nothing changes.
      'user.confirmed': { actions: 'replyNotWaitingForConfirmation' },
      'user.rejected': { actions: 'replyNotWaitingForConfirmation' },
      'user.answered': { actions: 'replyNotWaitingForAnswer' },
      'review.resolved': { actions: 'replyNotWaitingForReview' },
      'timer.confirmationExpired': { actions: 'replyNothingDue' },
      'timer.answerExpired': { actions: 'replyNothingDue' },
      'timer.modelRetryDue': { actions: 'replyNothingDue' },
      'operator.retryModel': { actions: 'replyNotWaitingForModel' },
      'timer.awayExpired': { actions: 'replyNothingDue' },
      'subtask.finished': { actions: 'refuseSubtaskOutcome' },
      // The user's presence, said by the host: remembered wherever the task is; the pauses act on it.
      'user.left': [{ guard: 'isAboutTaskUser', actions: 'recordUserAway' }, { actions: 'refusePresenceOfOther' }],
      'user.returned': [{ guard: 'isAboutTaskUser', actions: 'recordUserBack' }, { actions: 'refusePresenceOfOther' }],
    },
    states: {
      deciding: {
        description:
          'Before every model turn: is the task cancelled, does it follow a workflow, is there budget for one more turn, is its user still there?',
        always: [
          { guard: 'isCancelRequested', target: 'stopping', actions: 'stopCancelled' },
          { guard: 'isFollowingWorkflow', target: 'following' },
          { guard: not('hasBudgetForModelTurn'), target: 'stopping', actions: 'stopForBudget' },
          { guard: 'isUserAway', target: 'paused', actions: 'pauseForAbsence' },
          { guard: 'isTranscriptNearLimit', target: 'compacting', actions: 'startCompaction' },
          { target: 'thinking', actions: 'startModelTurn' },
        ],
      },
      compacting: {
        description:
          "The conversation nears the model's window (or the provider refused it as too long): older turns are summarised; the host's facts stay verbatim, the transcript stays whole.",
        invoke: {
          id: 'summarise',
          src: 'summariseConversation',
          input: summariseInput,
          onDone: [
            {
              guard: and(['wasCompactionRequested', not('didCompactionReplace')]),
              target: 'stopping',
              actions: 'stopUncompactable',
            },
            { target: 'deciding', actions: 'recordCompaction' },
          ],
          onError: { target: 'stopping', actions: 'stopForInternalError' },
        },
      },
      thinking: {
        description: 'The model proposes; it never executes. Its output arrives as exactly one model.* event.',
        tags: [TAGS.model],
        invoke: {
          id: 'model',
          src: 'model',
          input: modelInput,
          onDone: [
            {
              guard: and(['didModelFail', 'isModelOutage', 'canWaitOutModel']),
              target: 'waitingForModel',
              actions: 'pauseForModel',
            },
            {
              guard: and(['didModelFail', 'isContextTooLong', 'canCompactForRefusal']),
              target: 'compacting',
              actions: 'compactForRefusal',
            },
            { guard: 'didModelFail', target: 'stopping', actions: 'stopForModelFailure' },
            { actions: 'relayModelOutput' },
          ],
          onError: { target: 'stopping', actions: 'stopForInternalError' },
        },
        on: {
          'model.toolsProposed': [
            { guard: not('hasPairableCallIds'), target: 'reasking', actions: 'recordUnpairableProposal' },
            { guard: not('isBatchWellFormed'), target: 'executing', actions: 'rejectWholeBatch' },
            { target: 'vetting', actions: 'acceptProposal' },
          ],
          'model.answered': [
            { guard: 'isAwaitingDecision', target: 'reasking', actions: 'refuseAnswerForDecision' },
            { guard: not('hasSuccessCriterion'), target: 'answered', actions: 'finishAnswered' },
            { guard: 'isGoalMet', target: 'done', actions: 'finishDone' },
            { target: 'stopping', actions: 'finishUnmetGoal' },
          ],
          'model.planProposed': planProposed,
          'model.decided': decided,
          'model.askedUser': { target: 'awaitingUser', actions: 'recordQuestion' },
          'model.refused': { target: 'stopping', actions: 'finishRefused' },
          'model.invalidOutput': { target: 'reasking', actions: 'recordInvalidOutput' },
        },
      },
      following: followingState,
      waitingForModel: {
        description:
          'The model is down past its retries: persisted, the task waits for its wake-up time, then asks again; an operator of its tenant may ask again sooner, for one retry of the budget.',
        tags: [TAGS.waiting, TAGS.outage],
        on: {
          'timer.modelRetryDue': [
            { guard: 'isModelRetryDue', target: 'thinking', actions: 'resumeModel' },
            { actions: 'replyNothingDue' },
          ],
          // An operator of the task's tenant asks again now; it spends a retry, checked before anything is spent.
          'operator.retryModel': [
            { guard: not('isFromOperatorOfTenant'), actions: 'refuseModelRetry' },
            { guard: not('hasBudgetForModelRetry'), actions: 'refuseModelRetry' },
            { target: 'thinking', actions: 'retryModelNow' },
          ],
        },
      },
      paused: pausedState(
        "The task's user went away: persisted, no model turn is asked for nobody to read; it resumes when they return, or is cancelled after the policy's awayTtlMs.",
        '#agent.deciding',
      ),
      reasking: {
        description: 'Unusable model output: re-ask a bounded number of times, then stop with protocol_error.',
        always: [
          { guard: 'canReaskModel', target: 'deciding' },
          { target: 'stopping', actions: 'stopForProtocolError' },
        ],
      },
      vetting: vettingState,
      executing: executingState,
      awaitingPlanApproval,
      awaitingUser: {
        description: 'The model asked the task user a question; only that user can answer it, before it expires.',
        tags: [TAGS.waiting, TAGS.question],
        on: {
          'user.answered': [
            { guard: and(['isFromTaskUser', 'isQuestionUnexpired']), target: 'deciding', actions: 'recordUserAnswer' },
            // Too late: the question's expiry applies (the sweep would have applied it anyway).
            { guard: and(['isFromTaskUser', 'replansOnAnswerExpiry']), target: 'deciding', actions: 'expireQuestion' },
            { guard: 'isFromTaskUser', target: 'stopping', actions: 'stopForNoAnswer' },
            { actions: 'replyNotWaitingForAnswer' },
          ],
          'timer.answerExpired': [
            {
              guard: and(['hasQuestionExpired', 'replansOnAnswerExpiry']),
              target: 'deciding',
              actions: 'expireQuestion',
            },
            { guard: 'hasQuestionExpired', target: 'stopping', actions: 'stopForNoAnswer' },
            { actions: 'replyNothingDue' },
          ],
        },
      },
      reviewRequired: {
        description: "A write's outcome is unknown, or its tool found an inconsistency: a reviewer says what happened.",
        tags: [TAGS.waiting, TAGS.review],
        on: {
          'review.resolved': [
            { guard: not('isFromReviewer'), actions: 'refuseReview' },
            {
              guard: and(['isResolvedAsHappened', 'isReviewResultValid']),
              target: '#agent.executing.selecting',
              actions: 'acceptReviewedWrite',
            },
            { guard: 'isResolvedAsNotHappened', target: '#agent.executing.selecting', actions: 'closeReviewedWrite' },
            {
              guard: and([
                'isResolvedAsRetry',
                'isHeldWriteRetrySafe',
                'hasBudgetForRetry',
                not('isCancelRequested'),
                // No write is sent again while the task's user is away (undoing a stop's writes aside).
                or([not('isUserAway'), 'isUnwinding']),
              ]),
              target: '#agent.executing.recheckingResend',
              actions: 'prepareReviewedResend',
            },
            { actions: 'refuseReview' },
          ],
          // A cancel waits for the reviewer: it applies once the held write is resolved.
          'task.cancelled': { actions: 'deferCancelInReview' },
        },
      },
      stopping: {
        description:
          "A stop is recorded (the outcome says why). If the policy undoes this stop and the task's writes name compensations, they run first, newest first, each a call through every gate; then the task ends in the state its outcome names.",
        always: [
          { guard: 'mustCompensate', target: 'vetting', actions: 'beginCompensation' },
          { guard: 'stoppedAsFailed', target: 'failed' },
          { guard: 'stoppedAsCancelled', target: 'cancelled' },
          { target: 'budgetExhausted' },
        ],
      },
      done: { type: 'final', tags: [TAGS.terminal], description: 'The goal is met: a trusted tool result shows it.' },
      answered: {
        type: 'final',
        tags: [TAGS.terminal],
        description:
          'The model answered a task without a success criterion: its trusted results are listed, success is not claimed.',
      },
      failed: {
        type: 'final',
        tags: [TAGS.terminal],
        description: 'Stopped without meeting the goal; the outcome says why.',
      },
      budgetExhausted: {
        type: 'final',
        tags: [TAGS.terminal],
        description: 'Stopped before a step the budget could not pay for.',
      },
      cancelled: {
        type: 'final',
        tags: [TAGS.terminal],
        description: 'Cancelled by the task user, an administrator or a confirmation policy.',
      },
    },
    output: ({ context }) => context.outcome,
  });
}

export type AgentMachine = ReturnType<typeof createAgentMachine>;

/** The chart with no tools installed: for diagrams and definitions. Tasks run on `createAgentMachine(toolkit)`. */
export const agentMachine: AgentMachine = createAgentMachine(emptyToolkit());
