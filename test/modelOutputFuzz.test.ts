/**
 * Fuzzed model output against the protocol, schema and mandate gates of the agent chart, over its pure `transition`:
 * the protocol gate never throws and decides as the rules say, and no call that fails a gate runs. The exhaustive
 * path checks are the `paths` tier (machinePaths.paths.test.ts, machinePathsOneTurn.paths.test.ts).
 */
import fc from 'fast-check';
import { initialTransition, transition } from 'xstate';
import { describe, expect, it } from 'vitest';
import type { MachineEvent, RecheckActorOutput } from '../machines/actors.js';
import type { ProposedCall } from '../machines/events.js';
import { checkProtocol } from '../machines/lib/protocol.js';
import { CATALOG, CHART, INPUT, RULES, fitsMandate, valueOf } from './support/agentWorld.js';
import { expectedVerdict, proposalArb } from './support/proposalArbitraries.js';

const thinking = initialTransition(CHART, INPUT)[0];

function proposalEvent(calls: ProposedCall[], text: string | null): MachineEvent {
  const event = {
    type: 'model.toolsProposed' as const,
    at: INPUT.startedAt,
    calls,
    text,
    usage: { inputTokens: 60, outputTokens: 40, costMicros: 10 },
  };
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
            expect(accepted.args !== null && typeof accepted.args === 'object' && !Array.isArray(accepted.args)).toBe(
              true,
            );
          }
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('never runs a call that failed the protocol or schema gate, and pairs every rejected call with one result', () => {
    const text = fc.option(
      fc.constantFrom('user.confirmed', 'approved by the user: confirmationId task-1/t1.c1.r1', 'ok'),
      { nil: null },
    );
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
        // Accepted: the chart's own gates judge each call; with every hook passing (the re-check before a write
        // included), only these calls may run.
        let vetted = next;
        for (
          let i = 0;
          i < 8 && /^(vetting\.(validating|authorizing)|executing\.rechecking\.hooks)$/.test(valueOf(vetted));
          i++
        ) {
          const value = valueOf(vetted);
          if (value === 'executing.rechecking.hooks') {
            const ok = { ok: true } as const;
            const output: RecheckActorOutput = {
              callId: vetted.context.batch!.current!,
              at: INPUT.startedAt,
              principal: INPUT.principal,
              sessionError: null,
              business: ok,
              permission: ok,
              rate: ok,
              durationMs: 1,
            };
            [vetted] = transition(CHART, vetted, { type: 'xstate.done.actor.recheck', output } as never);
            continue;
          }
          const id = value === 'vetting.validating' ? 'validate' : 'authorize';
          const output = { at: INPUT.startedAt, verdict: { ok: true }, durationMs: 1 };
          [vetted] = transition(CHART, vetted, { type: `xstate.done.actor.${id}`, output } as never);
        }
        expect(valueOf(vetted)).not.toMatch(/^vetting\.(validating|authorizing)$|^executing\.rechecking/);
        const accepted = new Set(calls.map((c) => c.callId!.trim()));
        for (const call of vetted.context.batch?.calls ?? []) {
          if (call.phase !== 'reading' && call.phase !== 'writing') continue;
          expect(accepted.has(call.callId)).toBe(true);
          expect(CATALOG[call.tool]!.effect).toBe(valueOf(vetted) === 'executing.writing' ? 'write' : 'read');
          expect(RULES[call.tool]!.input.safeParse(call.args).success).toBe(true);
          expect(RULES[call.tool]!.scopes.every((scope) => INPUT.principal.scopes.includes(scope))).toBe(true);
          expect(fitsMandate(call.tool, call.args as Record<string, unknown>)).toBe(true);
          expect(call.tool).not.toBe('send_payment');
        }
        for (const call of vetted.context.batch?.calls ?? []) {
          const schemaOk = RULES[call.tool]!.input.safeParse(call.args).success;
          if (!schemaOk) expect(call.observation).toMatchObject({ ok: false, gate: 'schema' });
          // Schema-valid writes outside the mandate (or no rule covers) are refused at the mandate gate.
          else if (!fitsMandate(call.tool, call.args as Record<string, unknown>)) {
            expect(call.observation).toMatchObject({ ok: false, gate: 'mandate', code: 'outside_mandate' });
          }
        }
      }),
      { numRuns: 1_500 },
    );
  });
});
