/**
 * The path checks on a small world: one model turn of the adversarial world explored exhaustively, and charts broken
 * on purpose (each must be caught, by the rule named, within two turns). The exploration across turns is
 * machinePaths.paths.test.ts; fuzzed model output against the gates, in the unit tier, is modelOutputFuzz.test.ts.
 */
import { and, assign, enqueueActions } from 'xstate';
import { describe, expect, it } from 'vitest';
import { agentSetup } from '../machines/agentSetup.js';
import { createAgentMachine } from '../machines/agentMachine.js';
import type { MachineEvent } from '../machines/actors.js';
import type { AgentContext, CallState } from '../machines/context.js';
import type { GuardName } from '../machines/guards/index.js';
import { lookupInput } from '../machines/lib/inputs.js';
import { pauseForModel } from '../machines/steps/waits.js';
import type { ToolRules } from '../machines/toolkit.js';
import { sha256Hex } from '../src/hashing.js';
import { CHART, INPUT, RULES, TOOLKIT, withLimits } from './support/agentWorld.js';
import { explore, report } from './support/explore.js';

type Chart = typeof CHART;

describe('agent machine paths, one model turn', () => {
  it('keeps every safety rule on every transition', () => {
    const result = explore(withLimits({ modelTurns: 1 }), { maxStates: 50_000 });
    expect(result.violations, report(result.violations)).toEqual([]);
    // The agent/6 world reaches 6,372 states in one turn (agent/4: 6,513; a write after an unknown read now stops short).
    expect(result.states).toBeGreaterThan(6_300);
  });

  /** The first broken rule found when exploring two turns of the world with `chart`. */
  const firstBroken = (chart: Chart) =>
    explore(withLimits({ modelTurns: 2 }), { maxStates: 50_000, maxViolations: 1, chart }).violations[0]?.problem;

  describe('the checks catch a chart whose gate is broken', () => {
    const yes = () => true;
    const no = () => false;
    type Overrides = Partial<Record<GuardName, () => boolean>>;
    it.each<[string, Overrides, RegExp]>([
      ['skips the schema gate', { doArgumentsMatchSchema: yes }, /^P1 gates/],
      ['ignores a business refusal', { isBusinessValid: yes }, /^P1 (gates|confirmation)/],
      ['skips the scope check', { hasScopesForTool: yes }, /^P1 gates: .* the permission gate must refuse it/],
      ['ignores an authorization refusal', { isAuthorized: yes }, /^P1 gates/],
      ['never asks for confirmation', { needsConfirmation: no }, /^P1 confirmation/],
      ['accepts a confirmation of other arguments', { doesConfirmationMatchArguments: yes }, /^P1 confirmation/],
      ['accepts an expired confirmation', { isConfirmationUnexpired: yes }, /^P1 confirmation/],
      ['accepts a confirmation from another user', { isFromConfirmingUser: yes }, /^P1 confirmation|^P5/],
      ['ignores the step budget', { hasBudgetForNextStep: yes }, /^P1 budget|^P4/],
      ['ignores the model-turn budget', { hasBudgetForModelTurn: yes }, /^P4/],
      ['treats an unknown write outcome as known', { isWriteOutcomeUnknown: no }, /^P2/],
      ['retries a write the tool does not declare retry-safe', { isSameKeyRetrySafe: yes }, /^P2/],
      // the mandate and the memory of denials
      ['ignores the mandate', { isWithinMandate: yes }, /^P1 gates: .* the mandate gate must refuse it/],
      ['forgets that a call was denied', { isRepeatOfDeniedCall: no }, /^P1 denial/],
      ['asks a denied call again where the policy stops', { stopsOnRepeatedDenial: no }, /^P1 denial/],
      // the re-check right before a write
      ['runs arguments changed in storage', { areArgumentsIntact: yes }, /^P1 tamper/],
      ['ignores scopes revoked since vetting', { holdsScopesNow: yes }, /^P1 recheck/],
      ['ignores the rate limit', { isWithinRateLimit: yes }, /^P1 recheck/],
      ['ignores business facts changed since vetting', { isStillBusinessValid: yes }, /^P1 recheck/],
      ['ignores an authorization withdrawn since vetting', { isStillAuthorized: yes }, /^P1 recheck/],
      // approvers
      [
        'lets the requester approve their own request',
        { isNotSelfApproval: yes },
        /^P5 authority: user: approves their own request changed/,
      ],
      [
        'counts one approver twice',
        { isFirstDecisionOfApprover: yes },
        /^P5 authority: approver A: approves again changed/,
      ],
      [
        'takes approvals without the approver scope',
        { holdsApproverScope: yes },
        /^P5 authority: approver without the scope: approves changed/,
      ],
      [
        'grants on the first of several approvals',
        { completesApprovals: yes },
        /^P5 authority: call c1 is marked confirmed/,
      ],
      ['keeps a rejected payment going', { cancelsOnReject: no }, /^P1 confirmation: a rejection/],
      [
        'cancels on an expiry the tool asks again on',
        { cancelsOnExpiry: yes },
        /^P1 confirmation: an expired confirmation/,
      ],
      [
        'takes a rejection from anyone',
        { isRejectionOfPendingConfirmation: yes },
        /^P5 authority: intruder: rejects changed/,
      ],
      // the review desk
      ['takes a review from a non-reviewer', { isFromReviewer: yes }, /^P2 review: .* not by a reviewer/],
      ['takes a review result the tool never returns', { isReviewResultValid: yes }, /^P2 review: .* never returns/],
      [
        'retries a held write the tool does not declare retry-safe',
        { isHeldWriteRetrySafe: yes },
        /^P2 unknown writes: a resend of send_payment is prepared/,
      ],
      [
        "drops a reviewer's retry its re-check refused",
        { isResendAfterReview: no },
        /^P2 review: a refused resend a reviewer asked for/,
      ],
      [
        'forgets a cancel deferred while a write was unsettled',
        { isCancelRequested: no },
        /^P2 review: .* with a cancel waiting/,
      ],
      [
        'treats an inconsistent write as done',
        { doesWriteNeedReview: no },
        /^P2 review: a write the tool found inconsistent/,
      ],
      ['holds for review a write a lookup found', { wasWriteFound: no }, /^P2 review: a write is held for review/],
      ['closes a write the reviewer found done', { isResolvedAsNotHappened: yes }, /^P2 review/],
      // waits: the model's outage, the user's answer
      ['waits out an outage past its limit', { canWaitOutModel: yes }, /^P3 outage/],
      ['gives up on the model within the outage limit', { canWaitOutModel: no }, /^P3 outage/],
      ['waits on a model that refused the request', { isModelOutage: yes }, /^P3 outage/],
      ['asks the model again before the wake-up', { isModelRetryDue: yes }, /^P3 outage/],
      ['expires a question early', { hasQuestionExpired: yes }, /^P3 question: a question expired early/],
      ['never lets a question expire', { hasQuestionExpired: no }, /^P3 question: an expired question still waits/],
      ['stops on an unanswered question where the policy replans', { replansOnAnswerExpiry: no }, /^P3 question/],
      // safe by default: success needs its criterion, a write needs verified facts
      ['writes on facts a read could not establish', { dependsOnUnverifiedFacts: no }, /^P1 verification/],
      [
        'ends done on an answer without trusted evidence',
        { isGoalMet: yes },
        /^P5 authority: done without a success criterion met/,
      ],
      [
        'ends answered a task that declares a success criterion',
        { hasSuccessCriterion: no },
        /^P5 authority: answered although/,
      ],
    ])('%s', (_name, overrides, rule) => {
      expect(firstBroken(CHART.provide({ guards: overrides }) as Chart)).toMatch(rule);
    });

    it('retries without retry budget', () => {
      // Two guards broken at once: a resend past the reconcile attempts (P2) and past the retry budget (P1/P4) show on
      // paths of the same length, so which comes first depends on the order states are met in; the budget must catch it.
      const chart = CHART.provide({ guards: { hasBudgetForRetry: yes, canRetryWrite: yes } }) as Chart;
      const found = explore(withLimits({ modelTurns: 2 }), {
        maxStates: 50_000,
        maxViolations: 8,
        chart,
      }).violations.map((v) => v.problem);
      expect(found[0]).toMatch(
        /^P1 budget|^P4|^P2 unknown writes: write .* runs again without a lookup that found nothing/,
      );
      expect(found.filter((problem) => /^P1 budget|^P4/.test(problem))).not.toEqual([]);
    });
  });

  describe('the checks catch a chart whose steps, host rules or shape are broken', () => {
    /** The chart with some of its actions replaced. */
    const withActions = (actions: Record<string, unknown>) => CHART.provide({ actions: actions as never }) as Chart;
    const step = (name: string) => (CHART.implementations.actions as Record<string, unknown>)[name];
    /** The chart over host rules that differ from the harness's reading of them. */
    const withRules = (override: Record<string, Partial<ToolRules>>) =>
      createAgentMachine({
        rules: (name) => (override[name] ? { ...RULES[name]!, ...override[name] } : RULES[name]),
        sha256: sha256Hex,
      }) as Chart;
    const held = (context: AgentContext) => context.batch!.calls.find((c) => c.callId === context.batch!.current)!;
    const holding = (context: AgentContext, patch: Partial<CallState>) => ({
      ...context.batch!,
      calls: context.batch!.calls.map((c) => (c.callId === context.batch!.current ? { ...c, ...patch } : c)),
    });
    const reviewOf = (call: CallState, reason: 'write_outcome_unknown' | 'needs_review') => ({
      callId: call.callId,
      tool: call.tool,
      idempotencyKey: call.idempotencyKey,
      reason,
      summary: 'held',
      since: INPUT.startedAt,
    });
    /** The chart with the review desk still looking the write up while it waits for a reviewer. */
    const lookingUpInReview = (): Chart => {
      const config = CHART.config as { states: Record<string, object> };
      const reviewRequired = {
        ...config.states.reviewRequired,
        invoke: { id: 'lookup', src: 'lookupWrite', input: lookupInput },
      };
      return agentSetup(TOOLKIT).createMachine({
        ...config,
        states: { ...config.states, reviewRequired },
      } as never) as unknown as Chart;
    };
    /** The chart resending a write on the resource permission and the rate limit alone, not the session's scopes. */
    const resendingWithoutSession = (): Chart => {
      const config = CHART.config as {
        states: Record<string, { states?: Record<string, { invoke?: { onDone: object[] } }> }>;
      };
      const executing = config.states.executing!;
      const resending = executing.states!.resending!;
      const [send, ...refusals] = resending.invoke!.onDone;
      const onDone = [{ ...send, guard: and(['isStillAuthorized', 'isWithinRateLimit']) }, ...refusals];
      const states = { ...executing.states, resending: { ...resending, invoke: { ...resending.invoke, onDone } } };
      return agentSetup(TOOLKIT).createMachine({
        ...config,
        states: { ...config.states, executing: { ...executing, states } },
      } as never) as unknown as Chart;
    };
    type Args = { context: AgentContext; event: MachineEvent };
    it.each<[string, () => Chart, RegExp]>([
      [
        'records an approval twice',
        () =>
          withActions({
            recordApproval: assign(({ context, event }: Args) => {
              const pending = context.pendingConfirmation!;
              const by = event as Extract<MachineEvent, { type: 'user.confirmed' }>;
              const decision = { userId: by.userId, as: 'approver' as const, scope: pending.approverScope, at: by.at };
              return { pendingConfirmation: { ...pending, approvals: [...pending.approvals, decision, decision] } };
            }),
          }),
        /^P1 approvals: .* waits with approvals/,
      ],
      [
        'host rule asks one approver where the harness knows two',
        () =>
          withRules({
            send_payment: {
              confirm: (a: { amount: number }) =>
                a.amount > 6 ? { approverScope: 'payments:approve', approvals: 1 } : true,
            },
          }),
        /^P1 approvals: .* asks 1 decision/,
      ],
      [
        'host rule forgets the money a payment moves',
        () => withRules({ send_payment: { amount: undefined } }),
        /^P4 budget: write send_payment .* moves 5 but debits 0/,
      ],
      [
        'sends a write again as a new write',
        () => withActions({ resendWrite: step('startWrite') }),
        /^P4 budget: the retry of write/,
      ],
      [
        'resends a write without asking the session again',
        resendingWithoutSession,
        /^P1 recheck: write .* is sent from executing.resending after recheck: session gone/,
      ],
      [
        'cancels at once while a write is held for review',
        () => withActions({ deferCancelInReview: step('stopCancelled') }),
        /^P2 review: a cancel while a write is held for review/,
      ],
      [
        'runs a write as the principal at start, not as the session re-checked',
        () =>
          withActions({
            startWrite: enqueueActions(({ enqueue }) => {
              enqueue(step('startWrite') as never);
              enqueue.assign(({ context }: Args) => ({ batch: holding(context, { runAs: context.principal }) }));
            }),
          }),
        /^P5 authority: write .* runs as .*, not as the session the re-check saw/,
      ],
      [
        'forgets the review of a write it holds',
        () =>
          withActions({
            holdForReview: assign(({ context }: Args) => ({ batch: holding(context, { phase: 'awaitingReview' }) })),
          }),
        /^P2 review: review null in reviewRequired/,
      ],
      [
        'holds a write the tool found inconsistent as unknown',
        () =>
          withActions({
            holdWriteForReview: assign(({ context }: Args) => ({
              batch: holding(context, { phase: 'awaitingReview' }),
              review: reviewOf(held(context), 'write_outcome_unknown'),
            })),
          }),
        /^P2 review: the review of c1/,
      ],
      [
        'leaves a held write writing',
        () =>
          withActions({
            holdWriteForReview: assign(({ context }: Args) => ({ review: reviewOf(held(context), 'needs_review') })),
          }),
        /^bookkeeping: call c1 is writing while the machine is in reviewRequired/,
      ],
      [
        'keeps looking a write up while it waits for review',
        lookingUpInReview,
        /^P3 progress: reviewRequired waits with actors running/,
      ],
      [
        "takes a reviewer's 'happened' as not happened",
        () => withActions({ acceptReviewedWrite: step('closeReviewedWrite') }),
        /^P2 review: the reviewer found the write done/,
      ],
      [
        "takes a reviewer's 'not happened' as happened",
        () => withActions({ closeReviewedWrite: step('acceptReviewedWrite') }),
        /^P2 review: a write found not done/,
      ],
      [
        'starts a new turn when the model is asked again after an outage',
        () => withActions({ resumeModel: step('startModelTurn') }),
        /^P4 budget: resuming after an outage/,
      ],
      [
        'waits out an outage without backing off',
        () =>
          withActions({
            pauseForModel: assign(({ context, event }: Args) => {
              const paused = pauseForModel(context, event, TOOLKIT).context!;
              return {
                ...paused,
                outage: { ...paused.outage!, wakeAt: (event as { output: { at: number } }).output.at + 1_000 },
              };
            }),
          }),
        /^P3 outage: waitingForModel with outage/,
      ],
      [
        'gives a question the confirmation ttl',
        () =>
          withActions({
            recordQuestion: assign(({ context, event }: Args) => {
              const asked = event as Extract<MachineEvent, { type: 'model.askedUser' }>;
              return {
                question: asked.question,
                questionExpiresAt: asked.at + context.policy.confirmationTtlMs,
                waitingSince: asked.at,
              };
            }),
          }),
        /^P3 question: awaitingUser with question/,
      ],
    ])('%s', (_name, chart, rule) => {
      expect(firstBroken(chart())).toMatch(rule);
    });
  });
});
