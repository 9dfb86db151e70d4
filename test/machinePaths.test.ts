import fc from 'fast-check';
import { initialTransition, transition } from 'xstate';
import { type SerializedEvent, type SerializedSnapshot, getShortestPaths } from 'xstate/graph';
import { describe, expect, it } from 'vitest';
import type { MachineEvent } from '../machines/actors.js';
import type { ProposedCall } from '../machines/events.js';
import type { GuardName } from '../machines/guards/index.js';
import { checkProtocol } from '../machines/lib/protocol.js';
import { movesFor } from './support/agentMoves.js';
import {
  CATALOG,
  CHART,
  INPUT,
  RULES,
  type Move,
  type World,
  serializeWorld,
  startedCalls,
  valueOf,
  withLimits,
  worldLogic,
} from './support/agentWorld.js';
import { type Violation, explore } from './support/explore.js';
import { type Trie, replayTrie } from './support/pathReplay.js';
import { expectedVerdict, proposalArb } from './support/proposalArbitraries.js';

function report(violations: Violation[]): string {
  const shown = violations.slice(0, 8).map((v) => `- ${v.problem}\n    after: ${v.path.join(' → ')}`);
  return `${violations.length} broken rule(s):\n${shown.join('\n')}`;
}

/** Situations the exploration must have gone through, or the rules would hold vacuously. */
function witness(prev: World, move: Move, next: World, count: (what: string) => void) {
  const from = valueOf(prev.machine);
  const to = valueOf(next.machine);
  for (const call of startedCalls(prev.machine, next.machine)) {
    const shadow = next.shadow.calls.find((c) => c.callId === call.callId);
    if (to === 'executing.reading') count('reads started');
    else if (!move.protocol && prev.shadow.calls.find((c) => c.callId === call.callId)?.starts) count('same-key retry after a lookup found nothing');
    else count('writes started');
    if (shadow?.needsConfirmation && shadow.grant) count(`${call.effect} started on a genuine confirmation`);
  }
  for (const call of next.machine.context.batch?.calls ?? []) {
    const before = prev.machine.context.batch?.calls.find((c) => c.callId === call.callId);
    const observation = call.observation;
    if (!observation || before?.observation || observation.ok || !observation.gate) continue;
    const scope = observation.gate === 'permission' && from === 'vetting.authorizing' ? ' (resource)' : observation.gate === 'permission' ? ' (scope)' : '';
    count(`refused at ${observation.gate}${scope}`);
  }
  if (move.restart) count(from === 'executing.writing' ? 'restart during a write' : 'restart elsewhere');
  if (move.benign) count('tool output claiming an approval');
  if (move.inert) count('refused or premature human input');
  if (move.protocol) count(`proposal ${move.protocol}`);
  const outcome = next.machine.context.outcome;
  if (outcome && !prev.machine.context.outcome) {
    const dimension = (outcome.reason.detail as { dimension?: string } | undefined)?.dimension;
    count(dimension ? `budget stop: ${dimension}` : `stop: ${outcome.reason.code}`);
  }
  const [was, is] = [prev.machine.context.pendingConfirmation, next.machine.context.pendingConfirmation];
  if (was && is && was.id !== is.id) count('confirmation asked again');
  if (!prev.machine.context.cancelRequested && next.machine.context.cancelRequested) count('cancel deferred during a write');
}

const MUST_WITNESS = [
  'reads started',
  'writes started',
  'write started on a genuine confirmation',
  'read started on a genuine confirmation',
  'same-key retry after a lookup found nothing',
  'restart during a write',
  'restart elsewhere',
  'tool output claiming an approval',
  'refused or premature human input',
  'proposal accepted',
  'proposal rejected',
  'proposal unpairable',
  'budget stop: modelTurns',
  'budget stop: toolCalls',
  'budget stop: writes',
  'budget stop: wallClock',
  'stop: goal_met',
  'stop: write_outcome_unknown',
  'stop: too_many_rejections',
  'stop: protocol_error',
  'stop: loop_detected',
  'stop: cancelled',
  'confirmation asked again',
  'cancel deferred during a write',
  'refused at protocol',
  'refused at schema',
  'refused at business',
  'refused at permission (scope)',
  'refused at permission (resource)',
  'refused at confirmation',
  'refused at loop',
];

describe('agent machine paths', () => {
  it('keeps every safety rule on every transition of the bounded adversarial world', { timeout: 120_000 }, () => {
    const result = explore(INPUT, { maxStates: 150_000, witness });
    console.log(
      `[machinePaths] exhaustive BFS: ${result.states} distinct states (${result.finalStates} final), ` +
        `${result.transitions} transitions checked (${result.revisits} into states already seen, ${result.selfLoops} self-loops), ` +
        `${Object.keys(result.byMove).length} move kinds, longest path ${result.longestPath}, ${result.elapsedMs} ms`,
    );
    expect(result.violations, report(result.violations)).toEqual([]);
    // The exploration of the agent/2 chart reached 78,140 states; this one must cover at least as much.
    expect(result.states).toBeGreaterThan(78_140);
    const missing = MUST_WITNESS.filter((what) => !result.witnessed[what]);
    expect(missing, `never reached: ${missing.join(', ')}`).toEqual([]);
  });

  it('keeps the order rules along every shortest path found by xstate/graph', { timeout: 120_000 }, () => {
    // Two model turns, the second only repeating a read or answering: getShortestPaths builds its adjacency map with
    // a queue it shifts, quadratic past ~20k states. Across turns the exhaustive exploration above covers the rules.
    const input = withLimits({ modelTurns: 2 });
    const moves = (world: World) => movesFor(world, { lateFromTurn: 2 });
    const started = performance.now();
    const paths = getShortestPaths(worldLogic(input), {
      events: moves,
      serializeState: (world: World) => serializeWorld(world) as SerializedSnapshot,
      serializeEvent: (move: Move) => move.type as SerializedEvent,
      stopWhen: (world: World) => world.machine.status !== 'active',
    });
    // The paths share prefixes (they form a shortest-path tree): replay each prefix once, depth first.
    const root: Trie = new Map();
    let steps = 0;
    for (const path of paths) {
      let node = root;
      // The first step is xstate.init; the others carry our moves.
      for (const step of path.steps) {
        if (!('event' in step.event)) continue;
        steps += 1;
        node = node.get(step.event.type) ?? node.set(step.event.type, new Map()).get(step.event.type)!;
      }
    }
    const { replayed, problems } = replayTrie(root, input, moves);
    console.log(
      `[machinePaths] xstate/graph getShortestPaths: ${paths.length} paths (${steps} steps, ${replayed} distinct prefixes) ` +
        `replayed and checked in ${Math.round(performance.now() - started)} ms`,
    );
    expect(paths.length).toBeGreaterThan(2_125);
    expect(problems.slice(0, 5), `${problems.length} problems`).toEqual([]);
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
