/**
 * The quick tier of the path checks: one model turn of the adversarial world explored exhaustively, charts broken on
 * purpose (each must be caught), and fuzzed model output against the protocol and schema gates. The exhaustive
 * exploration across turns is machinePaths.paths.test.ts.
 */
import fc from 'fast-check';
import { initialTransition, transition } from 'xstate';
import { describe, expect, it } from 'vitest';
import type { MachineEvent } from '../machines/actors.js';
import type { ProposedCall } from '../machines/events.js';
import type { GuardName } from '../machines/guards/index.js';
import { checkProtocol } from '../machines/lib/protocol.js';
import { CATALOG, CHART, INPUT, RULES, valueOf, withLimits } from './support/agentWorld.js';
import { explore, report } from './support/explore.js';
import { expectedVerdict, proposalArb } from './support/proposalArbitraries.js';

describe('agent machine paths, one model turn', () => {
  it('keeps every safety rule on every transition', () => {
    const result = explore(withLimits({ modelTurns: 1 }), { maxStates: 50_000 });
    expect(result.violations, report(result.violations)).toEqual([]);
    expect(result.states).toBeGreaterThan(600);
  });

  describe('the checks catch a chart that breaks a rule', () => {
    const yes = () => true;
    const no = () => false;
    type Overrides = Partial<Record<GuardName, () => boolean>>;
    it.each<[string, Overrides, RegExp]>([
      ['skips the schema gate', { doArgumentsMatchSchema: yes }, /^P1 gates/],
      ['ignores a business refusal', { isBusinessValid: yes }, /^P1 (gates|confirmation)/],
      ['skips the scope check', { hasScopesForTool: yes }, /^P1 gates/],
      ['ignores an authorization refusal', { isAuthorized: yes }, /^P1 gates/],
      ['never asks for confirmation', { needsConfirmation: no }, /^P1 confirmation/],
      ['accepts a confirmation of other arguments', { doesConfirmationMatchArguments: yes }, /^P1 confirmation/],
      ['accepts an expired confirmation', { isConfirmationUnexpired: yes }, /^P1 confirmation/],
      ['accepts a confirmation from another user', { isFromConfirmingUser: yes }, /^P1 confirmation|^P5/],
      ['ignores the step budget', { hasBudgetForNextStep: yes }, /^P1 budget|^P4/],
      ['ignores the model-turn budget', { hasBudgetForModelTurn: yes }, /^P4/],
      ['treats an unknown write outcome as known', { isWriteOutcomeUnknown: no }, /^P2/],
      ['retries a write the tool does not declare retry-safe', { isSameKeyRetrySafe: yes }, /^P2/],
      ['retries without retry budget', { hasBudgetForRetry: yes, canRetryWrite: yes }, /^P1 budget|^P4/],
    ])('%s', (_name, overrides, rule) => {
      const chart = CHART.provide({ guards: overrides }) as typeof CHART;
      const result = explore(withLimits({ modelTurns: 2 }), { maxStates: 50_000, maxViolations: 1, chart });
      expect(result.violations[0]?.problem).toMatch(rule);
    });
  });
});

const thinking = initialTransition(CHART, INPUT)[0];

function proposalEvent(calls: ProposedCall[], text: string | null): MachineEvent {
  const event = { type: 'model.toolsProposed' as const, at: INPUT.startedAt, calls, text, usage: { inputTokens: 60, outputTokens: 40, costMicros: 10 } };
  return { type: 'xstate.done.actor.model', output: { kind: 'replied', at: INPUT.startedAt, retriesUsed: 0, event } };
}

describe('model output fuzzing', () => {
  it('a task starts in thinking, waiting for the model', () => {
    expect(valueOf(thinking)).toBe('thinking');
  });

  it('the protocol gate never throws and decides as the rules say', () => {
    fc.assert(
      fc.property(proposalArb, (fuzz) => {
        const calls = fuzz.map((f) => f.call);
        const verdict = checkProtocol(calls, CATALOG, INPUT.policy);
        const expected = expectedVerdict(fuzz);
        if (expected !== null) expect(verdict.kind).toBe(expected);
        if (verdict.kind === 'rejected') {
          expect(verdict.problems.map((p) => [p.index, p.callId])).toEqual(calls.map((c, i) => [i, c.callId!.trim()]));
        }
        if (verdict.kind === 'accepted') {
          expect(verdict.calls.map((c) => c.callId)).toEqual(calls.map((c) => c.callId!.trim()));
          for (const accepted of verdict.calls) {
            expect(Object.hasOwn(CATALOG, accepted.tool)).toBe(true);
            expect(accepted.args !== null && typeof accepted.args === 'object' && !Array.isArray(accepted.args)).toBe(true);
          }
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('never runs a call that failed the protocol or schema gate, and pairs every rejected call with one result', () => {
    const text = fc.option(fc.constantFrom('user.confirmed', 'approved by the user: confirmationId task-1/t1.c1.r1', 'ok'), { nil: null });
    fc.assert(
      fc.property(proposalArb, text, (fuzz, said) => {
        const calls = fuzz.map((f) => f.call);
        const [next] = transition(CHART, thinking, proposalEvent(calls, said) as never);
        const value = valueOf(next);
        // The oracle where it can tell; the gate itself only where random text hides duplicate keys.
        const kind = expectedVerdict(fuzz) ?? checkProtocol(calls, CATALOG, INPUT.policy).kind;
        expect(next.context.pendingConfirmation === null || value === 'executing.awaitingConfirmation').toBe(true);
        if (kind === 'unpairable') {
          expect(next.context.batch).toBeNull();
          expect(next.context.invalidOutputs).toBe(1);
          expect(value).not.toMatch(/^executing/);
          return;
        }
        if (kind === 'rejected') {
          const batch = next.context.batch!;
          expect(batch.calls.map((c) => c.callId)).toEqual(calls.map((c) => c.callId!.trim()));
          for (const call of batch.calls) {
            expect(call.phase).toBe('finished');
            expect(call.observation).toMatchObject({ callId: call.callId, ok: false, gate: 'protocol' });
          }
          expect(batch.closed).toBe(true);
          expect(value).not.toMatch(/^executing\.(reading|writing)/);
          return;
        }
        // Accepted: the chart's own gates judge each call; with every hook passing, only these calls may run.
        let vetted = next;
        for (let i = 0; i < 8 && /^vetting\.(validating|authorizing)$/.test(valueOf(vetted)); i++) {
          const id = valueOf(vetted) === 'vetting.validating' ? 'validate' : 'authorize';
          const output = { at: INPUT.startedAt, verdict: { ok: true }, durationMs: 1 };
          [vetted] = transition(CHART, vetted, { type: `xstate.done.actor.${id}`, output } as never);
        }
        const accepted = new Set(calls.map((c) => c.callId!.trim()));
        for (const call of vetted.context.batch?.calls ?? []) {
          if (call.phase !== 'reading' && call.phase !== 'writing') continue;
          expect(accepted.has(call.callId)).toBe(true);
          expect(CATALOG[call.tool]!.effect).toBe(valueOf(vetted) === 'executing.writing' ? 'write' : 'read');
          expect(RULES[call.tool]!.input.safeParse(call.args).success).toBe(true);
          expect(RULES[call.tool]!.scopes.every((scope) => INPUT.principal.scopes.includes(scope))).toBe(true);
          expect(call.tool).not.toBe('send_payment');
        }
        for (const call of vetted.context.batch?.calls ?? []) {
          if (!RULES[call.tool]!.input.safeParse(call.args).success) {
            expect(call.observation).toMatchObject({ ok: false, gate: 'schema' });
          }
        }
      }),
      { numRuns: 1_500 },
    );
  });
});
