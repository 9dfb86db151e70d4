/**
 * The agent statechart. The model only proposes (it is the invoked `model` actor, whose single output is a
 * `model.*` event); the host's rules are the named guards below; tools run as invoked actors the runtime provides.
 *
 * Every gate is visible here by name: (a) protocol as guards on the model's proposal, (b) schema, (c) business
 * validation and (d) permission as the states of `vetting` (one call at a time), (e) budget and (f) confirmation
 * as guards of `executing.selecting`. Nothing here does I/O. Actors are placeholders until
 * `machine.provide({ actors })`; every guard is a pure question in `guards/`, every action a pure step in `steps/`
 * that returns a context patch, the journal entries to append, and for host events the chart's answer.
 */
import { and, enqueueActions, fromPromise, not, setup } from 'xstate';
import type * as A from './actors.js';
import type { AgentContext, AgentInput, Outcome } from './context.js';
import type { AgentEvent } from './events.js';
import { budgetGuards as budget } from './guards/budget.js';
import { confirmationGuards as confirmation } from './guards/confirmation.js';
import { executionGuards as execution } from './guards/execution.js';
import type { Guard } from './guards/guard.js';
import { modelGuards as model } from './guards/model.js';
import { vettingGuards as vetting } from './guards/vetting.js';
import type { MachineEmitted } from './journal.js';
import { checkInput, lookupInput, modelInput, readsInput, writeInput } from './lib/inputs.js';
import * as asking from './steps/confirmation.js';
import * as running from './steps/execution.js';
import * as reconciling from './steps/reconcile.js';
import * as replies from './steps/replies.js';
import type { Step } from './steps/step.js';
import * as stopping from './steps/stop.js';
import * as turn from './steps/turn.js';
import * as judging from './steps/vetting.js';
import { TAGS, type Tag } from './tags.js';
import { type Toolkit, emptyToolkit } from './toolkit.js';

/** Bumped whenever a change makes old snapshots unsafe to restore; stored in every persisted envelope. */
export const AGENT_MACHINE_VERSION = 'agent/3';

function notProvided<TOutput, TInput>(name: string) {
  return fromPromise<TOutput, TInput>(async () => {
    throw new Error(`actor "${name}" is not provided; attach it with machine.provide({ actors })`);
  });
}

/**
 * The agent chart for the host's tools: the schema and permission guards read the tools' current definitions,
 * hashing uses the injected SHA-256. The chart's shape does not depend on the tools.
 */
export function createAgentMachine(toolkit: Toolkit) {
  /** Binds the named guards of a family to the toolkit; the names are listed, never read off a module. */
  const named = <F extends Record<string, Guard>, K extends keyof F & string>(family: F, names: readonly K[]) =>
    Object.fromEntries(
      names.map((name) => [name, ({ context, event }: { context: AgentContext; event: AgentEvent }) => family[name]!(context, event as A.MachineEvent, toolkit)]),
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
      executeReads: notProvided<A.ReadsActorOutput, A.ReadsActorInput>('executeReads'),
      executeWrite: notProvided<A.WriteActorOutput, A.WriteActorInput>('executeWrite'),
      lookupWrite: notProvided<A.LookupActorOutput, A.LookupActorInput>('lookupWrite'),
    },
    guards: {
      // the model's turn; gate (a), protocol
      ...named(model, ['didModelFail', 'hasPairableCallIds', 'isBatchWellFormed', 'canReaskModel', 'isGoalMet', 'isFromTaskUser']),
      // gates (b) schema, (c) business validation, (d) permission
      ...named(vetting, ['isEveryCallVetted', 'isRepeatingWithoutNewObservation', 'doArgumentsMatchSchema', 'hasBusinessRules']),
      ...named(vetting, ['isBusinessValid', 'hasScopesForTool', 'hasResourcePolicy', 'isAuthorized']),
      // gate (e), budget
      ...named(budget, ['hasBudgetForModelTurn', 'hasBudgetForNextStep', 'hasBudgetForRetry']),
      // executing and reconciling
      ...named(execution, ['isBatchComplete', 'hasTooManyRejectedTurns', 'isCancelRequested', 'isNextStepWrite', 'isNextWriteAlreadyDone']),
      ...named(execution, ['isWriteOutcomeUnknown', 'wasWriteFound', 'wasWriteNotFound', 'isLookupInconclusive']),
      ...named(execution, ['isSameKeyRetrySafe', 'canRetryWrite', 'canLookUpAgain']),
      // gate (f), confirmation
      ...named(confirmation, ['needsConfirmation', 'isConfirmedForExactArguments', 'isConfirmationForPendingCall', 'isFromConfirmingUser']),
      ...named(confirmation, ['isConfirmationUnexpired', 'isUnderSamePolicy', 'doesConfirmationMatchArguments', 'canAskConfirmationAgain']),
      ...named(confirmation, ['isRejectionOfPendingConfirmation', 'hasPendingConfirmationExpired']),
    },
  });

  /** Wires a pure step as an action: assign its context patch, emit its journal entries and its answer. */
  const action = (step: Step) =>
    base.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        const result = step(context, event as A.MachineEvent, toolkit);
        if (result.context) enqueue.assign(result.context);
        for (const entry of result.audit ?? []) enqueue.emit({ type: 'audit', entry });
        for (const entry of result.transcript ?? []) enqueue.emit({ type: 'transcript', entry });
        if (result.reply) enqueue.emit({ type: 'reply', reply: result.reply });
      }),
    );
  /** The named steps of a phase as actions; the names are listed, never read off a module's exports. */
  const steps = <F extends Record<string, unknown>, K extends keyof F & string>(phase: F, names: readonly K[]) =>
    Object.fromEntries(names.map((name) => [name, action(phase[name] as Step)])) as Record<K, ReturnType<typeof action>>;

  return base
    .extend({
      actions: {
        ...steps(turn, ['recordTaskStarted', 'startModelTurn', 'recordInvalidOutput', 'recordUnpairableProposal']),
        ...steps(turn, ['rejectWholeBatch', 'acceptProposal', 'recordQuestion', 'recordUserAnswer']),
        /** Settles the turn's budget, then hands the model's event to the chart as `model.*`. */
        relayModelOutput: base.createAction(
          enqueueActions(({ context, event, enqueue }) => {
            const result = turn.settleModelTurn(context, event as A.MachineEvent, toolkit);
            if (result.context) enqueue.assign(result.context);
            for (const entry of result.audit ?? []) enqueue.emit({ type: 'audit', entry });
            const output = (event as unknown as { output: A.ModelActorOutput }).output;
            if (output.kind === 'replied') enqueue.raise(output.event);
          }),
        ),
        ...steps(judging, ['takeNextCall', 'refuseForSchema', 'acceptArguments', 'passWithoutBusinessRules', 'noteBusinessCheck']),
        ...steps(judging, ['passBusiness', 'refuseForBusiness', 'notePermissionCheck', 'refuseForPermission', 'admitCall', 'finishVetting']),
        ...steps(running, ['closeBatch', 'startReads', 'finishReads', 'startWrite', 'finishWrite', 'refuseDuplicateWrite']),
        ...steps(reconciling, ['noteUnknownWrite', 'finishReconciledWrite', 'abandonWriteForCancel', 'retryWriteWithSameKey']),
        ...steps(reconciling, ['lookUpAgain', 'stopForUnknownWrite']),
        ...steps(asking, ['requestConfirmation', 'grantConfirmation', 'refuseConfirmation', 'askConfirmationAgain']),
        ...steps(asking, ['rejectConfirmedCall', 'giveUpConfirmation']),
        ...steps(stopping, ['stopForBudget', 'stopCancelled', 'deferCancel', 'stopForModelFailure', 'stopForInternalError']),
        ...steps(stopping, ['stopForProtocolError', 'stopForRejections', 'stopForLoop', 'finishDone', 'finishUnmetGoal', 'finishRefused']),
        ...steps(replies, ['replyNotWaitingForConfirmation', 'replyNoSuchConfirmation', 'replyNotWaitingForAnswer', 'replyNothingDue']),
      },
    })
    .createMachine({
      id: 'agent',
      context: ({ input }) => turn.initialContext(input),
      entry: 'recordTaskStarted',
      initial: 'deciding',
      on: {
        'task.cancelled': { target: '.cancelled', actions: 'stopCancelled' },
        // Host events the current state does not take: answered, nothing changes.
        'user.confirmed': { actions: 'replyNotWaitingForConfirmation' },
        'user.rejected': { actions: 'replyNoSuchConfirmation' },
        'user.answered': { actions: 'replyNotWaitingForAnswer' },
        'timer.confirmationExpired': { actions: 'replyNothingDue' },
      },
      states: {
        deciding: {
          description: 'Before every model turn: is the task cancelled, is there budget for one more turn?',
          always: [
            { guard: 'isCancelRequested', target: 'cancelled', actions: 'stopCancelled' },
            { guard: not('hasBudgetForModelTurn'), target: 'budgetExhausted', actions: 'stopForBudget' },
            { target: 'thinking', actions: 'startModelTurn' },
          ],
        },
        thinking: {
          description: 'The model proposes; it never executes. Its output arrives as exactly one model.* event.',
          tags: [TAGS.model],
          invoke: {
            id: 'model',
            src: 'model',
            input: modelInput,
            onDone: [{ guard: 'didModelFail', target: 'failed', actions: 'stopForModelFailure' }, { actions: 'relayModelOutput' }],
            onError: { target: 'failed', actions: 'stopForInternalError' },
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
        reasking: {
          description: 'Unusable model output: re-ask a bounded number of times, then stop with protocol_error.',
          always: [{ guard: 'canReaskModel', target: 'deciding' }, { target: 'failed', actions: 'stopForProtocolError' }],
        },
        vetting: {
          description: 'Gates (b) schema, (c) business validation and (d) permission, one call at a time (batch.current).',
          initial: 'choosing',
          states: {
            choosing: {
              description: 'The next call to vet; once all are judged, a repeat with nothing new observed is a loop.',
              always: [
                { guard: and(['isEveryCallVetted', 'isRepeatingWithoutNewObservation']), target: '#agent.failed', actions: 'stopForLoop' },
                { guard: 'isEveryCallVetted', target: '#agent.executing', actions: 'finishVetting' },
                { target: 'checkingSchema', actions: 'takeNextCall' },
              ],
            },
            checkingSchema: {
              description: "Gate (b): the installed tool's input schema must accept the arguments as they are.",
              tags: [TAGS.gate],
              always: [
                { guard: not('doArgumentsMatchSchema'), target: 'choosing', actions: 'refuseForSchema' },
                { guard: 'hasBusinessRules', target: 'validating', actions: 'acceptArguments' },
                { target: 'checkingPermission', actions: ['acceptArguments', 'passWithoutBusinessRules'] },
              ],
            },
            validating: {
              description: "Gate (c): the tool's business validation (time order, capacity, refundable amount...).",
              tags: [TAGS.gate],
              entry: 'noteBusinessCheck',
              invoke: {
                id: 'validate',
                src: 'validateCall',
                input: checkInput,
                onDone: [
                  { guard: not('isBusinessValid'), target: 'choosing', actions: 'refuseForBusiness' },
                  { target: 'checkingPermission', actions: 'passBusiness' },
                ],
                onError: { target: '#agent.failed', actions: 'stopForInternalError' },
              },
            },
            checkingPermission: {
              description: 'Gate (d): the trusted principal must hold every scope the tool requires.',
              tags: [TAGS.gate],
              always: [
                { guard: not('hasScopesForTool'), target: 'choosing', actions: 'refuseForPermission' },
                { guard: 'hasResourcePolicy', target: 'authorizing' },
                { target: 'choosing', actions: 'admitCall' },
              ],
            },
            authorizing: {
              description: "Gate (d): the tool's resource-level permission for these arguments (e.g. executive rooms).",
              tags: [TAGS.gate],
              entry: 'notePermissionCheck',
              invoke: {
                id: 'authorize',
                src: 'authorizeCall',
                input: checkInput,
                onDone: [
                  { guard: not('isAuthorized'), target: 'choosing', actions: 'refuseForPermission' },
                  { target: 'choosing', actions: 'admitCall' },
                ],
                onError: { target: '#agent.failed', actions: 'stopForInternalError' },
              },
            },
          },
        },
        executing: {
          description: 'Runs the batch in proposal order: reads together, writes one at a time, each after gates (e) and (f).',
          initial: 'selecting',
          states: {
            selecting: {
              description: 'Chooses the next step; gate (e) budget and gate (f) confirmation are checked here, before it runs.',
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
              description: 'Reads run concurrently, with timeouts and bounded retries; a timeout means unknown, not none.',
              tags: [TAGS.effect],
              invoke: {
                id: 'reads',
                src: 'executeReads',
                input: readsInput,
                onDone: { target: 'selecting', actions: 'finishReads' },
                onError: { target: '#agent.failed', actions: 'stopForInternalError' },
              },
            },
            writing: {
              description: 'One write, with its idempotency key; it starts only once the snapshot holding its intent is durable.',
              tags: [TAGS.effect],
              invoke: {
                id: 'write',
                src: 'executeWrite',
                input: writeInput,
                onDone: [
                  { guard: 'isWriteOutcomeUnknown', target: 'reconciling', actions: 'noteUnknownWrite' },
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
            awaitingConfirmation: {
              description: 'Persisted; satisfied only by a user.confirmed bound to this id, user, policy and arguments hash.',
              tags: [TAGS.waiting, TAGS.confirmation],
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
                'user.rejected': { guard: 'isRejectionOfPendingConfirmation', target: 'selecting', actions: 'rejectConfirmedCall' },
                'timer.confirmationExpired': [
                  { guard: and(['hasPendingConfirmationExpired', 'canAskConfirmationAgain']), actions: 'askConfirmationAgain' },
                  { guard: 'hasPendingConfirmationExpired', target: 'selecting', actions: 'giveUpConfirmation' },
                ],
              },
            },
          },
        },
        awaitingUser: {
          description: 'The model asked the task user a question; only that user can answer it.',
          tags: [TAGS.waiting, TAGS.question],
          on: {
            'user.answered': [{ guard: 'isFromTaskUser', target: 'deciding', actions: 'recordUserAnswer' }, { actions: 'replyNotWaitingForAnswer' }],
          },
        },
        done: { type: 'final', tags: [TAGS.terminal], description: 'The goal is met: a trusted tool result shows it.' },
        failed: { type: 'final', tags: [TAGS.terminal], description: 'Stopped without meeting the goal; the outcome says why.' },
        budgetExhausted: { type: 'final', tags: [TAGS.terminal], description: 'Stopped before a step the budget could not pay for.' },
        cancelled: { type: 'final', tags: [TAGS.terminal], description: 'Cancelled by the task user or an administrator.' },
        reviewRequired: { type: 'final', tags: [TAGS.terminal], description: "A write's outcome could not be established: a human must look it up." },
      },
      output: ({ context }) => context.outcome,
    });
}

export type AgentMachine = ReturnType<typeof createAgentMachine>;

/** The chart with no tools installed: for diagrams and definitions. Tasks run on `createAgentMachine(toolkit)`. */
export const agentMachine: AgentMachine = createAgentMachine(emptyToolkit());
