/**
 * The agent statechart. The model only proposes (it is the invoked `model` actor, whose single output is a
 * `model.*` event); the host's rules are the named guards; tools run as invoked actors the runtime provides.
 *
 * Nothing here does I/O. Actors are placeholders until `agentMachine.provide({ actors })`; every guard is a pure
 * function in `guards.ts`, every action a pure step in `steps.ts` that returns a context patch plus the audit and
 * transcript entries the runtime appends to the task's journal.
 */
import { and, enqueueActions, fromPromise, not, setup } from 'xstate';
import type {
  LookupActorInput,
  LookupActorOutput,
  ModelActorInput,
  ModelActorOutput,
  ReadsActorInput,
  ReadsActorOutput,
  VetActorInput,
  VetActorOutput,
  WriteActorInput,
  WriteActorOutput,
} from './actorContracts.js';
import type { AgentEvent } from './agentEvents.js';
import type { AnyAgentEvent } from './agentEventsInternal.js';
import type { AgentContext, AgentInput, Outcome } from './agentTypes.js';
import type { AuditEntry, TranscriptEntry } from './journal.js';
import { nextStep } from './batch.js';
import { remaining } from './budget.js';
import { type Guard, guards, runningCall } from './guards.js';
import * as steps from './steps.js';

/** Bumped whenever a change makes old snapshots unsafe to restore; stored in every persisted envelope. */
export const AGENT_MACHINE_VERSION = 'agent/2';

export type JournalEmitted = { type: 'audit'; entry: AuditEntry } | { type: 'transcript'; entry: TranscriptEntry };

function notProvided<TOutput, TInput>(name: string) {
  return fromPromise<TOutput, TInput>(async () => {
    throw new Error(`actor "${name}" is not provided; attach it with agentMachine.provide({ actors })`);
  });
}

type StepName = {
  [K in keyof typeof steps]: (typeof steps)[K] extends steps.Step ? K : never;
}[keyof typeof steps];

const guardFns = Object.fromEntries(
  Object.entries(guards).map(([name, guard]) => [
    name,
    ({ context, event }: { context: AgentContext; event: AgentEvent }) =>
      (guard as Guard)(context, event as AnyAgentEvent),
  ]),
) as Record<keyof typeof guards, (args: { context: AgentContext; event: AgentEvent }) => boolean>;

const base = setup({
  types: {
    context: {} as AgentContext,
    input: {} as AgentInput,
    events: {} as AgentEvent,
    emitted: {} as JournalEmitted,
    output: {} as Outcome | null,
  },
  actors: {
    model: notProvided<ModelActorOutput, ModelActorInput>('model'),
    vetCalls: notProvided<VetActorOutput, VetActorInput>('vetCalls'),
    executeReads: notProvided<ReadsActorOutput, ReadsActorInput>('executeReads'),
    executeWrite: notProvided<WriteActorOutput, WriteActorInput>('executeWrite'),
    lookupWrite: notProvided<LookupActorOutput, LookupActorInput>('lookupWrite'),
  },
  guards: guardFns,
});

/** Wires a pure step as an action: assign its context patch, emit its journal entries. */
function apply(step: steps.Step) {
  return base.createAction(
    enqueueActions(({ context, event, enqueue }) => {
      const result = step(context, event as AnyAgentEvent);
      if (result.context) enqueue.assign(result.context);
      for (const entry of result.audit ?? []) enqueue.emit({ type: 'audit', entry });
      for (const entry of result.transcript ?? []) enqueue.emit({ type: 'transcript', entry });
    }),
  );
}

const stepActions = Object.fromEntries(
  (Object.keys(steps) as (keyof typeof steps)[])
    .filter((name) => typeof steps[name] === 'function' && !['initialContext', 'safeErrorText'].includes(name))
    .map((name) => [name, apply(steps[name] as steps.Step)]),
) as Record<StepName, ReturnType<typeof apply>>;

export const agentMachine = base.extend({
  actions: {
    ...stepActions,
    /** Settles the turn's budget, then hands the model's event to the chart as `model.*`. */
    relayModelOutput: base.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        const result = steps.settleModelTurn(context, event as AnyAgentEvent);
        if (result.context) enqueue.assign(result.context);
        for (const entry of result.audit ?? []) enqueue.emit({ type: 'audit', entry });
        const done = event as unknown as Extract<AnyAgentEvent, { type: 'xstate.done.actor.model' }>;
        const { retriesUsed: _spent, ...modelEvent } = done.output;
        enqueue.raise(modelEvent);
      }),
    ),
  },
}).createMachine({
  id: 'agent',
  context: ({ input }) => steps.initialContext(input),
  entry: 'recordTaskStarted',
  initial: 'deciding',
  on: {
    'task.cancelled': { target: '.cancelled', actions: 'stopCancelled' },
  },
  states: {
    /** Before every model turn: is the task cancelled, is there budget for one more turn? */
    deciding: {
      always: [
        { guard: 'isCancelRequested', target: 'cancelled', actions: 'stopCancelled' },
        { guard: not('hasBudgetForModelTurn'), target: 'budgetExhausted', actions: 'stopForBudget' },
        { target: 'thinking', actions: 'startModelTurn' },
      ],
    },
    /** The model proposes; it never executes. Its output arrives as exactly one `model.*` event. */
    thinking: {
      invoke: {
        id: 'model',
        src: 'model',
        input: ({ context }) => ({
          taskId: context.taskId,
          turn: context.turn,
          observations: context.batch?.calls.flatMap((c) => (c.observation ? [c.observation] : [])) ?? [],
          retryAllowance: Math.max(0, remaining(context.budget).retries),
        }),
        onDone: { actions: 'relayModelOutput' },
        onError: { target: 'failed', actions: 'stopForModelError' },
      },
      on: {
        'model.toolsProposed': [
          { guard: not('hasPairableCallIds'), target: 'reasking', actions: 'recordUnpairableProposal' },
          { guard: not('isBatchWellFormed'), target: 'executing', actions: 'rejectWholeBatch' },
          { target: 'vetting', actions: 'acceptProposal' },
        ],
        'model.answered': [
          { guard: 'isGoalMet', target: 'done', actions: 'finishDone' },
          { target: 'failed', actions: 'finishUnmetGoal' },
        ],
        'model.askedUser': { target: 'awaitingUser', actions: 'recordQuestion' },
        'model.refused': { target: 'failed', actions: 'finishRefused' },
        'model.invalidOutput': { target: 'reasking', actions: 'recordInvalidOutput' },
      },
    },
    /** Unusable model output: re-ask a bounded number of times, then stop with protocol_error. */
    reasking: {
      always: [
        { guard: 'canReaskModel', target: 'deciding' },
        { target: 'failed', actions: 'stopForProtocolError' },
      ],
    },
    /** Gates (b)-(d) per call: schema, business validation, permission of the trusted principal. */
    vetting: {
      invoke: {
        id: 'vet',
        src: 'vetCalls',
        input: ({ context }) => ({
          taskId: context.taskId,
          principal: context.principal,
          calls: (context.batch?.calls ?? [])
            .filter((c) => c.phase === 'vetting')
            .map((c) => ({ callId: c.callId, tool: c.tool, args: c.args })),
        }),
        onDone: [
          { guard: 'isRepeatingWithoutNewObservation', target: 'failed', actions: 'stopForLoop' },
          { target: 'executing', actions: 'applyVerdicts' },
        ],
        onError: { target: 'failed', actions: 'stopForInternalError' },
      },
    },
    /** Runs the batch in order: reads together, writes one at a time, each after budget and confirmation. */
    executing: {
      initial: 'selecting',
      states: {
        selecting: {
          always: [
            { guard: and(['isBatchComplete', 'hasTooManyRejectedTurns']), target: '#agent.failed', actions: 'stopForRejections' },
            { guard: 'isBatchComplete', target: '#agent.deciding', actions: 'closeBatch' },
            { guard: 'isCancelRequested', target: '#agent.cancelled', actions: 'stopCancelled' },
            { guard: 'isNextWriteAlreadyDone', target: 'selecting', actions: 'refuseDuplicateWrite' },
            { guard: not('hasBudgetForNextStep'), target: '#agent.budgetExhausted', actions: 'stopForBudget' },
            {
              guard: and(['needsConfirmation', not('isConfirmedForExactArguments')]),
              target: 'awaitingConfirmation',
              actions: 'requestConfirmation',
            },
            { guard: 'isNextStepWrite', target: 'writing', actions: 'startWrite' },
            { target: 'reading', actions: 'startReads' },
          ],
        },
        reading: {
          invoke: {
            id: 'reads',
            src: 'executeReads',
            input: ({ context }) => ({
              taskId: context.taskId,
              principal: context.principal,
              calls: (context.batch?.calls ?? [])
                .filter((c) => c.phase === 'running')
                .map((c) => ({ callId: c.callId, tool: c.tool, args: c.args })),
              retryAllowance: Math.max(0, remaining(context.budget).retries),
            }),
            onDone: { target: 'selecting', actions: 'finishReads' },
            onError: { target: '#agent.failed', actions: 'stopForInternalError' },
          },
        },
        /** The intent (idempotency key, args hash) is in the snapshot the executor waits to see persisted. */
        writing: {
          invoke: {
            id: 'write',
            src: 'executeWrite',
            input: ({ context }) => writeInput(context),
            onDone: [
              { guard: 'isWriteOutcomeUnknown', target: 'reconciling', actions: 'noteUnknownWrite' },
              { target: 'selecting', actions: 'finishWrite' },
            ],
            onError: { target: 'reconciling', actions: 'noteUnknownWrite' },
          },
          on: { 'task.cancelled': { actions: 'deferCancel' } },
        },
        /** Outcome unknown: look the write up by its idempotency key before anything else. */
        reconciling: {
          invoke: {
            id: 'lookup',
            src: 'lookupWrite',
            input: ({ context }) => {
              const { taskId, principal, call, idempotencyKey } = writeInput(context);
              return { taskId, principal, call, idempotencyKey, attempt: runningCall(context)!.lookups };
            },
            onDone: [
              { guard: 'wasWriteFound', target: 'selecting', actions: 'finishReconciledWrite' },
              { guard: and(['wasWriteNotFound', 'isCancelRequested']), target: 'selecting', actions: 'abandonWriteForCancel' },
              {
                guard: and(['wasWriteNotFound', 'isSameKeyRetrySafe', 'canRetryWrite', 'hasBudgetForRetry']),
                target: 'writing',
                actions: 'retryWriteWithSameKey',
              },
              {
                guard: and(['isLookupInconclusive', 'canLookUpAgain', 'hasBudgetForRetry']),
                target: 'reconciling',
                reenter: true,
                actions: 'lookUpAgain',
              },
              { target: '#agent.reviewRequired', actions: 'stopForUnknownWrite' },
            ],
            onError: { target: '#agent.reviewRequired', actions: 'stopForUnknownWrite' },
          },
          on: { 'task.cancelled': { actions: 'deferCancel' } },
        },
        /** Persisted; satisfied only by a `user.confirmed` bound to this id, user, policy and argument hash. */
        awaitingConfirmation: {
          on: {
            'user.confirmed': [
              { guard: not('isConfirmationForPendingCall'), actions: 'refuseConfirmation' },
              { guard: not('isFromConfirmingUser'), actions: 'refuseConfirmation' },
              {
                guard: and(['isConfirmationUnexpired', 'isUnderSamePolicy', 'doesConfirmationMatchArguments']),
                target: 'selecting',
                actions: 'grantConfirmation',
              },
              { guard: 'canAskConfirmationAgain', actions: 'askConfirmationAgain' },
              { target: 'selecting', actions: 'giveUpConfirmation' },
            ],
            'user.rejected': {
              guard: 'isRejectionOfPendingConfirmation',
              target: 'selecting',
              actions: 'rejectConfirmedCall',
            },
            'timer.confirmationExpired': [
              { guard: and(['hasPendingConfirmationExpired', 'canAskConfirmationAgain']), actions: 'askConfirmationAgain' },
              { guard: 'hasPendingConfirmationExpired', target: 'selecting', actions: 'giveUpConfirmation' },
            ],
          },
        },
      },
    },
    awaitingUser: {
      on: {
        'user.answered': { guard: 'isFromTaskUser', target: 'deciding', actions: 'recordUserAnswer' },
      },
    },
    done: { type: 'final' },
    failed: { type: 'final' },
    budgetExhausted: { type: 'final' },
    cancelled: { type: 'final' },
    reviewRequired: { type: 'final' },
  },
  output: ({ context }) => context.outcome,
});

function writeInput(context: AgentContext): WriteActorInput {
  const call = runningCall(context);
  if (!call || !call.idempotencyKey) throw new Error('no write is in flight');
  return {
    taskId: context.taskId,
    principal: context.principal,
    call: { callId: call.callId, tool: call.tool, args: call.args },
    idempotencyKey: call.idempotencyKey,
    attempt: call.writeAttempts,
  };
}

export type AgentMachine = typeof agentMachine;

/** The step the executing state would take next; exported for status views. */
export { nextStep };
