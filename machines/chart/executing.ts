/**
 * The `executing` state of the agent chart (agentMachine.ts): the batch runs in proposal order, reads together,
 * writes one at a time, each after the budget (e) and confirmation (f) gates; right before a write runs,
 * `rechecking` asks every gate again on the exact arguments; a write whose outcome is unknown is looked up by its
 * idempotency key before anything else. Its own file because it is half the chart; the guards and steps it names
 * are wired in `agentSetup.ts`.
 */
import { and, not } from 'xstate';
import { lookupInput, readsInput, recheckInput, resendInput, writeInput } from '../lib/inputs.js';
import { TAGS } from '../tags.js';
import type { ChartState } from './chartState.js';
import { pausedState } from './paused.js';

export const executingState = {
  description: 'Runs the batch in proposal order: reads together, writes one at a time, each after gates (e) and (f).',
  initial: 'selecting',
  states: {
    selecting: {
      description:
        'Chooses the next step; a write waits for unverified facts to be read again, then gate (e) budget and gate (f) confirmation are checked, before it runs.',
      always: [
        // Undoing a stop's writes: a cancel stops what is left; once all have run, the task ends with that stop.
        { guard: and(['isUnwinding', 'isCancelRequested']), target: '#agent.stopping', actions: 'stopCancelled' },
        { guard: and(['isBatchComplete', 'isUnwinding']), target: '#agent.stopping', actions: 'finishCompensation' },
        {
          guard: and(['isBatchComplete', 'hasTooManyRejectedTurns']),
          target: '#agent.stopping',
          actions: 'stopForRejections',
        },
        { guard: 'isBatchComplete', target: '#agent.deciding', actions: 'closeBatch' },
        { guard: 'isCancelRequested', target: '#agent.stopping', actions: 'stopCancelled' },
        { guard: 'isNextWriteAlreadyDone', target: 'selecting', actions: 'refuseDuplicateWrite' },
        {
          guard: and(['dependsOnUnverifiedFacts', 'haveRereadsKeptFailing']),
          target: '#agent.stopping',
          actions: 'stopForUnverifiedFacts',
        },
        { guard: 'dependsOnUnverifiedFacts', target: 'selecting', actions: 'refuseForUnverifiedFacts' },
        { guard: not('hasBudgetForNextStep'), target: '#agent.stopping', actions: 'stopForBudget' },
        {
          guard: and(['needsConfirmation', not('isConfirmedForExactArguments')]),
          target: 'awaitingConfirmation',
          actions: 'requestConfirmation',
        },
        // A write waits for its user (undoing a stop's writes goes on without them).
        {
          guard: and(['isNextStepWrite', 'isUserAway', not('isUnwinding')]),
          target: 'pausedBeforeWrite',
          actions: 'pauseForAbsence',
        },
        { guard: 'isNextStepWrite', target: 'rechecking', actions: 'startRecheck' },
        { target: 'reading', actions: 'startReads' },
      ],
    },
    pausedBeforeWrite: pausedState(
      "The task's user went away: no write runs until they return (reads before it have finished); cancelled after the policy's awayTtlMs.",
      '#agent.executing.selecting',
    ),
    rechecking: {
      description: 'Right before a write: every gate again on the exact arguments, after any wait and after a restart.',
      initial: 'arguments',
      states: {
        arguments: {
          description:
            'The stored arguments must hash to what was confirmed, still match the schema and the mandate; a tool whose re-check waits for nothing is re-checked here (scopes, business validation, resource permission, budget).',
          tags: [TAGS.gate],
          always: [
            {
              guard: not('areArgumentsIntact'),
              target: '#agent.executing.selecting',
              actions: 'refuseChangedArguments',
            },
            {
              guard: not('doArgumentsMatchSchema'),
              target: '#agent.executing.selecting',
              actions: 'refuseForSchema',
            },
            { guard: not('isWithinMandate'), target: '#agent.executing.selecting', actions: 'refuseForMandate' },
            {
              guard: not('isConfirmationRuleSound'),
              target: '#agent.executing.selecting',
              actions: 'refuseForConfirmationRule',
            },
            {
              guard: not('isConfirmationStillSufficient'),
              target: '#agent.executing.awaitingConfirmation',
              actions: 'askForFreshConfirmation',
            },
            // Nothing the re-check asks waits (synchronous hooks or none, no rate limit, no session refresh): the
            // gate asks it itself, in this step, each refusal its own transition as on the actor's answer.
            {
              guard: and(['canRecheckNow', not('holdsScopesNow')]),
              target: '#agent.executing.selecting',
              actions: ['noteRecheck', 'refuseAtRecheckNow'],
            },
            {
              guard: and(['canRecheckNow', not('isStillBusinessValid')]),
              target: '#agent.executing.selecting',
              actions: ['noteRecheck', 'refuseAtRecheckNow'],
            },
            {
              guard: and(['canRecheckNow', not('isStillAuthorized')]),
              target: '#agent.executing.selecting',
              actions: ['noteRecheck', 'refuseAtRecheckNow'],
            },
            {
              guard: and(['canRecheckNow', not('hasBudgetForNextStep')]),
              target: '#agent.stopping',
              actions: ['noteRecheck', 'stopForBudgetAtRecheck'],
            },
            { guard: 'canRecheckNow', target: '#agent.executing.writing', actions: ['noteRecheck', 'startWriteNow'] },
            { target: 'hooks' },
          ],
        },
        hooks: {
          description:
            "The principal's current scopes, business validation, resource permission and the rate limit, asked again.",
          tags: [TAGS.gate],
          entry: 'noteRecheck',
          invoke: {
            id: 'recheck',
            src: 'recheckCall',
            input: recheckInput,
            onDone: [
              { guard: not('holdsScopesNow'), target: '#agent.executing.selecting', actions: 'refuseAtRecheck' },
              {
                guard: not('isStillBusinessValid'),
                target: '#agent.executing.selecting',
                actions: 'refuseAtRecheck',
              },
              {
                guard: not('isStillAuthorized'),
                target: '#agent.executing.selecting',
                actions: 'refuseAtRecheck',
              },
              {
                guard: not('isWithinRateLimit'),
                target: '#agent.executing.selecting',
                actions: 'refuseAtRecheck',
              },
              { guard: not('hasBudgetForNextStep'), target: '#agent.stopping', actions: 'stopForBudget' },
              { target: '#agent.executing.writing', actions: 'startWrite' },
            ],
            onError: { target: '#agent.stopping', actions: 'stopForInternalError' },
          },
        },
      },
    },
    recheckingResend: {
      description:
        'Before a write is sent again with its key: a tool whose re-check waits for nothing is re-checked here (the session, the resource permission); else in `resending`.',
      tags: [TAGS.gate],
      always: [
        { guard: not('canRecheckNow'), target: 'resending' },
        {
          guard: and(['holdsScopesNow', 'isStillAuthorized']),
          target: 'writing',
          actions: ['noteRecheck', 'resendWriteNow'],
        },
        // Refused: a retry a reviewer asked for goes back to them (the first attempt is still unknown).
        {
          guard: 'isResendAfterReview',
          target: '#agent.reviewRequired',
          actions: ['noteRecheck', 'holdRefusedResendNow'],
        },
        { target: 'selecting', actions: ['noteRecheck', 'refuseAtRecheckNow'] },
      ],
    },
    resending: {
      description:
        'Before a write is sent again with its key: the session, the resource permission and the rate limit, again.',
      tags: [TAGS.gate],
      entry: 'noteRecheck',
      invoke: {
        id: 'recheck',
        src: 'recheckCall',
        input: resendInput,
        onDone: [
          {
            guard: and(['holdsScopesNow', 'isStillAuthorized', 'isWithinRateLimit']),
            target: 'writing',
            actions: 'resendWrite',
          },
          // Refused: a retry a reviewer asked for goes back to them (the first attempt is still unknown).
          { guard: 'isResendAfterReview', target: '#agent.reviewRequired', actions: 'holdRefusedResend' },
          { target: 'selecting', actions: 'refuseAtRecheck' },
        ],
        onError: [
          { guard: 'isResendAfterReview', target: '#agent.reviewRequired', actions: 'holdRefusedResend' },
          { target: '#agent.stopping', actions: 'stopForInternalError' },
        ],
      },
    },
    reading: {
      description: 'Reads run concurrently, with timeouts and bounded retries; a timeout means unknown, not none.',
      tags: [TAGS.effect],
      invoke: {
        id: 'reads',
        src: 'executeReads',
        input: readsInput,
        onDone: [
          // The reads were the batch's last step and nothing stands before the next model turn: straight to it, in
          // this one step, with the steps `selecting` and `deciding` would take. Each guard is theirs, asked before
          // the results are recorded, where the results cannot change its answer (`areReadsLastStep`: the batch is
          // complete after them; `hasRoomForResults`: they cannot bring the conversation to compaction); when one
          // does not hold, `selecting` and then `deciding` decide as before, on the recorded results.
          {
            guard: and([
              'areReadsLastStep',
              not('isUnwinding'),
              not('hasTooManyRejectedTurns'),
              not('isCancelRequested'),
              not('isFollowingWorkflow'),
              'hasBudgetForModelTurn',
              not('isUserAway'),
              'hasRoomForResults',
            ]),
            target: '#agent.thinking',
            actions: ['finishReads', 'closeBatch', 'startModelTurn'],
          },
          { target: 'selecting', actions: 'finishReads' },
        ],
        onError: { target: '#agent.stopping', actions: 'stopForInternalError' },
      },
    },
    writing: {
      description:
        'One write, with its idempotency key; it starts only once the snapshot holding its intent is durable.',
      tags: [TAGS.effect],
      invoke: {
        id: 'write',
        src: 'executeWrite',
        input: writeInput,
        onDone: [
          // A sub-task tool's write started the child: the parent waits for its outcome.
          { guard: 'hasSubtaskStarted', target: 'awaitingSubtask', actions: 'recordSubtaskStarted' },
          { guard: 'isWriteOutcomeUnknown', target: 'reconciling', actions: 'noteUnknownWrite' },
          { guard: 'doesWriteNeedReview', target: '#agent.reviewRequired', actions: 'holdWriteForReview' },
          { target: 'selecting', actions: 'finishWrite' },
        ],
        onError: { target: 'reconciling', actions: 'noteUnknownWrite' },
      },
      on: { 'task.cancelled': { actions: 'deferCancel' } },
    },
    reconciling: {
      description: 'Outcome unknown: the write is looked up by its idempotency key before anything else.',
      tags: [TAGS.effect, TAGS.reconciling],
      invoke: {
        id: 'lookup',
        src: 'lookupWrite',
        input: lookupInput,
        onDone: [
          { guard: 'hasSubtaskStarted', target: 'awaitingSubtask', actions: 'recordSubtaskStarted' },
          { guard: 'wasWriteFound', target: 'selecting', actions: 'finishReconciledWrite' },
          {
            guard: and(['wasWriteNotFound', 'isCancelRequested']),
            target: 'selecting',
            actions: 'abandonWriteForCancel',
          },
          {
            guard: and(['wasWriteNotFound', 'isUserAway', not('isUnwinding')]),
            target: 'selecting',
            actions: 'abandonWriteForAbsence',
          },
          {
            guard: and(['wasWriteNotFound', 'isSameKeyRetrySafe', 'canRetryWrite', 'hasBudgetForRetry']),
            target: 'recheckingResend',
            actions: 'prepareResend',
          },
          {
            guard: and(['isLookupInconclusive', 'canLookUpAgain', 'hasBudgetForRetry']),
            target: 'reconciling',
            reenter: true,
            actions: 'lookUpAgain',
          },
          { target: '#agent.reviewRequired', actions: 'holdForReview' },
        ],
        onError: { target: '#agent.reviewRequired', actions: 'holdForReview' },
      },
      on: { 'task.cancelled': { actions: 'deferCancel' } },
    },
    awaitingSubtask: {
      description:
        "Persisted: a sub-task tool's call started a child task; the parent waits for the child's outcome (subtask.finished, from the orchestrator), which becomes the call's result. A cancel of the parent cancels the child.",
      tags: [TAGS.waiting, TAGS.subtask],
      // A cancel deferred while the start was in flight applies now (the orchestrator then cancels the child).
      always: { guard: 'isCancelRequested', target: '#agent.stopping', actions: 'stopCancelled' },
      on: {
        'subtask.finished': [
          { guard: 'isOutcomeOfPendingSubtask', target: 'selecting', actions: 'finishSubtask' },
          { actions: 'refuseSubtaskOutcome' },
        ],
      },
    },
    awaitingConfirmation: {
      description:
        'Persisted; satisfied only by user.confirmed bound to this id, policy and arguments hash, from the user or enough approvers.',
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
          // A request that can no longer be granted (expired, or asked under another host policy): what its
          // expiry does, whether the timer or this late decision finds it first.
          {
            guard: and([not('isConfirmationUnexpired'), 'cancelsOnExpiry']),
            target: '#agent.stopping',
            actions: 'cancelForConfirmation',
          },
          {
            guard: and([not(and(['isConfirmationUnexpired', 'isUnderSamePolicy'])), 'canAskConfirmationAgain']),
            actions: 'askConfirmationAgain',
          },
          {
            guard: not(and(['isConfirmationUnexpired', 'isUnderSamePolicy'])),
            target: 'selecting',
            actions: 'giveUpConfirmation',
          },
          // Given for other arguments than the request shows: refused, and the request stands as it is.
          { guard: not('doesConfirmationMatchArguments'), actions: 'refuseConfirmation' },
          { guard: 'completesApprovals', target: 'selecting', actions: 'grantConfirmation' },
          { actions: 'recordApproval' },
        ],
        'user.rejected': [
          {
            guard: and(['isRejectionOfPendingConfirmation', 'cancelsOnReject']),
            target: '#agent.stopping',
            actions: 'cancelForConfirmation',
          },
          { guard: 'isRejectionOfPendingConfirmation', target: 'selecting', actions: 'rejectConfirmedCall' },
          { actions: 'refuseRejection' },
        ],
        'timer.confirmationExpired': [
          {
            guard: and(['hasPendingConfirmationExpired', 'cancelsOnExpiry']),
            target: '#agent.stopping',
            actions: 'cancelForConfirmation',
          },
          {
            guard: and(['hasPendingConfirmationExpired', 'canAskConfirmationAgain']),
            actions: 'askConfirmationAgain',
          },
          { guard: 'hasPendingConfirmationExpired', target: 'selecting', actions: 'giveUpConfirmation' },
        ],
      },
    },
  },
} satisfies ChartState;
