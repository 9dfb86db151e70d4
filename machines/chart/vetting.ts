/**
 * Vetting in the chart: gates (b) schema, the mandate, (c) business validation and (d) permission, one call at a time,
 * as ONE ordered list of named guarded transitions of `vetting.judging`. The first guard that holds decides the next
 * call in one microstep: each refusal is its own transition with its own step, the call that passes every gate is
 * admitted; then the list is asked again for the call after it. The steps of a transition audit every gate the call
 * passed before the one that decided, in gate order. Only a tool whose hook answers asynchronously leaves the list,
 * for the invoked `validating` or `authorizing` state, whose done event is judged by the rest of the list.
 */
import { and, not } from 'xstate';
import { checkInput } from '../lib/inputs.js';
import { TAGS } from '../tags.js';
import type { ChartState } from './chartState.js';

/** What a call past the schema and the mandate passed, audited in that order before the gate that decides. */
const PAST_MANDATE = ['acceptArguments', 'passMandate'] as const;
const PAST_BUSINESS = [...PAST_MANDATE, 'passBusiness'] as const;

export const vettingState = {
  description:
    'Gates (b) schema, mandate, (c) business validation and (d) permission, one call at a time: one ordered list of named guards.',
  initial: 'judging',
  states: {
    judging: {
      description:
        'The next call to vet, judged by the ordered gates in one step: the first that holds refuses it (each refusal its own transition), stops the task, hands it to an asynchronous hook, or admits it. Once all are judged, a repeat with nothing new observed is a loop.',
      tags: [TAGS.gate],
      always: [
        {
          guard: and(['isEveryCallVetted', 'isRepeatingWithoutNewObservation']),
          target: '#agent.stopping',
          actions: 'stopForLoop',
        },
        // The batch starts with reads that may run now: they start in this same step (what `executing.selecting`
        // would choose: no cancel, no confirmation to ask, budget for them); anything else is chosen there.
        {
          guard: and([
            'isEveryCallVetted',
            not('isCancelRequested'),
            'isNextStepRead',
            not('needsConfirmation'),
            'hasBudgetForNextStep',
          ]),
          target: '#agent.executing.reading',
          actions: ['finishVetting', 'startReads'],
        },
        { guard: 'isEveryCallVetted', target: '#agent.executing', actions: 'finishVetting' },
        // Gate (b): offered in this step (the host's offer rule), and the input schema accepts the arguments as they are.
        { guard: not('isToolOffered'), target: 'judging', actions: 'refuseNotOffered' },
        { guard: not('doArgumentsMatchSchema'), target: 'judging', actions: 'refuseForSchema' },
        // A sub-task tool's child must stay within this task: its tools, its mandate, its share of the budgets.
        {
          guard: and(['isSubtaskCall', not('areSubtaskToolsWithinParent')]),
          target: 'judging',
          actions: ['acceptArguments', 'refuseSubtask'],
        },
        {
          guard: and(['isSubtaskCall', not('isSubtaskMandateNarrower')]),
          target: 'judging',
          actions: ['acceptArguments', 'refuseSubtask'],
        },
        {
          guard: and(['isSubtaskCall', not('isSubtaskShareWithinBudget')]),
          target: 'judging',
          actions: ['acceptArguments', 'refuseSubtask'],
        },
        // The mandate: a call denied before stops the task; the arguments must fit what the user asked for.
        {
          guard: and(['isRepeatOfDeniedCall', 'stopsOnRepeatedDenial']),
          target: '#agent.stopping',
          actions: ['acceptArguments', 'stopForRepeatedDenial'],
        },
        { guard: not('isWithinMandate'), target: 'judging', actions: ['acceptArguments', 'refuseForMandate'] },
        // Gate (c): the tool's business validation; a synchronous hook is asked by the guard itself.
        { guard: 'hasAsyncBusinessRules', target: 'validating', actions: [...PAST_MANDATE, 'takeNextCall'] },
        { guard: not('isBusinessValid'), target: 'judging', actions: [...PAST_MANDATE, 'refuseForBusiness'] },
        // Gate (d): the principal's scopes, then the tool's resource-level permission (synchronous: asked here).
        { guard: not('hasScopesForTool'), target: 'judging', actions: [...PAST_BUSINESS, 'refuseForPermission'] },
        { guard: 'hasAsyncResourcePolicy', target: 'authorizing', actions: [...PAST_BUSINESS, 'takeNextCall'] },
        { guard: not('isAuthorized'), target: 'judging', actions: [...PAST_BUSINESS, 'refuseForPermission'] },
        // Who must confirm is decided at admission: a rule that cannot decide refuses the call.
        {
          guard: not('isConfirmationRuleSound'),
          target: 'judging',
          actions: [...PAST_BUSINESS, 'refuseForConfirmationRule'],
        },
        { target: 'judging', actions: [...PAST_BUSINESS, 'admitCall'] },
      ],
    },
    validating: {
      description:
        "Gate (c), asynchronous: the tool's business validation (time order, capacity, refundable amount...); its answer is judged by the rest of the gates.",
      tags: [TAGS.gate],
      entry: 'noteBusinessCheck',
      invoke: {
        id: 'validate',
        src: 'validateCall',
        input: checkInput,
        onDone: [
          { guard: not('isBusinessValid'), target: 'judging', actions: 'refuseForBusiness' },
          { guard: not('hasScopesForTool'), target: 'judging', actions: ['passBusiness', 'refuseForPermission'] },
          { guard: 'hasAsyncResourcePolicy', target: 'authorizing', actions: 'passBusiness' },
          { guard: not('isAuthorized'), target: 'judging', actions: ['passBusiness', 'refuseForPermission'] },
          {
            guard: not('isConfirmationRuleSound'),
            target: 'judging',
            actions: ['passBusiness', 'refuseForConfirmationRule'],
          },
          { target: 'judging', actions: ['passBusiness', 'admitCall'] },
        ],
        onError: { target: '#agent.stopping', actions: 'stopForInternalError' },
      },
    },
    authorizing: {
      description:
        "Gate (d), asynchronous: the tool's resource-level permission for these arguments (e.g. executive rooms).",
      tags: [TAGS.gate],
      entry: 'notePermissionCheck',
      invoke: {
        id: 'authorize',
        src: 'authorizeCall',
        input: checkInput,
        onDone: [
          { guard: not('isAuthorized'), target: 'judging', actions: 'refuseForPermission' },
          { guard: not('isConfirmationRuleSound'), target: 'judging', actions: 'refuseForConfirmationRule' },
          { target: 'judging', actions: 'admitCall' },
        ],
        onError: { target: '#agent.stopping', actions: 'stopForInternalError' },
      },
    },
  },
} satisfies ChartState;
