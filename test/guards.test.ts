import { describe, expect, it } from 'vitest';
import type { AgentContext, CallState, PendingConfirmation } from '../machines/agentTypes.js';
import type { AnyAgentEvent } from '../machines/agentEventsInternal.js';
import { nextStep } from '../machines/batch.js';
import { guards } from '../machines/guards.js';
import { checkProtocol } from '../machines/protocol.js';
import { initialContext } from '../machines/steps.js';
import { DEFAULT_LIMITS, DEFAULT_POLICY } from '../src/orchestrator.js';

const T0 = 1_000_000;

function context(patch: Partial<AgentContext> = {}): AgentContext {
  return {
    ...initialContext({
      taskId: 'task-1',
      goal: 'g',
      principal: { userId: 'E17', tenantId: 'acme', scopes: ['rooms:book'] },
      catalog: {
        find_rooms: { effect: 'read', sameKeyRetrySafe: false },
        reserve_room: { effect: 'write', sameKeyRetrySafe: true },
        send_money: { effect: 'write', sameKeyRetrySafe: false },
      },
      policy: DEFAULT_POLICY,
      limits: DEFAULT_LIMITS,
      modelReservation: { tokens: 1_000, costMicros: 0 },
      success: null,
      startedAt: T0,
    }),
    ...patch,
  };
}

function call(patch: Partial<CallState>): CallState {
  return {
    callId: 'c1',
    tool: 'find_rooms',
    effect: 'read',
    args: {},
    argsHash: 'sha256:a',
    redactedArgs: {},
    idempotencyKey: null,
    needsConfirmation: false,
    confirmationSummary: null,
    confirmedBy: null,
    confirmationRequests: 0,
    phase: 'ready',
    writeAttempts: 0,
    lookups: 0,
    observation: null,
    ...patch,
  };
}

const pending: PendingConfirmation = {
  id: 'task-1/t1.c1.r1',
  taskId: 'task-1',
  callId: 'c1',
  tool: 'reserve_room',
  argsHash: 'sha256:good',
  args: {},
  summary: 's',
  userId: 'E17',
  policyVersion: '1',
  requestedAt: T0,
  expiresAt: T0 + 1_000,
  request: 1,
};

const confirm = (patch: Record<string, unknown> = {}): AnyAgentEvent => ({
  type: 'user.confirmed',
  at: T0 + 10,
  confirmationId: pending.id,
  argsHash: 'sha256:good',
  userId: 'E17',
  policyVersion: '1',
  ...patch,
}) as AnyAgentEvent;

const tick: AnyAgentEvent = { type: 'timer.confirmationExpired', at: T0 + 1, confirmationId: 'none' };

describe('budget guards', () => {
  const used = (u: Partial<AgentContext['budget']['used']>) => {
    const c = context();
    return { ...c, budget: { ...c.budget, used: { ...c.budget.used, ...u } } };
  };
  it.each([
    ['a fresh task', context(), tick, true],
    ['no model turns left', used({ modelTurns: DEFAULT_LIMITS.modelTurns }), tick, false],
    ['fewer tokens left than one turn reserves', used({ tokens: DEFAULT_LIMITS.tokens - 999 }), tick, false],
    ['exactly one turn of tokens left', used({ tokens: DEFAULT_LIMITS.tokens - 1_000 }), tick, true],
    ['past the wall-clock deadline', context(), { ...tick, at: T0 + DEFAULT_LIMITS.wallClockMs }, false],
  ])('hasBudgetForModelTurn: %s → %s', (_label, ctx, event, expected) => {
    expect(guards.hasBudgetForModelTurn(ctx, event as AnyAgentEvent)).toBe(expected);
  });

  it.each([
    ['reads within budget', [call({}), call({ callId: 'c2' })], { toolCalls: DEFAULT_LIMITS.toolCalls - 2 }, true],
    ['two reads, one call left', [call({}), call({ callId: 'c2' })], { toolCalls: DEFAULT_LIMITS.toolCalls - 1 }, false],
    ['a write with no writes left', [call({ effect: 'write', tool: 'reserve_room' })], { writes: DEFAULT_LIMITS.writes }, false],
    ['a read with no writes left', [call({})], { writes: DEFAULT_LIMITS.writes }, true],
  ])('hasBudgetForNextStep: %s → %s', (_label, calls, u, expected) => {
    const ctx = { ...used(u), batch: { turn: 1, closed: false, calls } };
    expect(guards.hasBudgetForNextStep(ctx, tick)).toBe(expected);
  });
});

describe('confirmation guards', () => {
  const waiting = context({ pendingConfirmation: pending });
  it.each([
    ['isConfirmationForPendingCall', confirm(), true],
    ['isConfirmationForPendingCall', confirm({ confirmationId: 'task-1/t1.c1.r0' }), false],
    ['isFromConfirmingUser', confirm(), true],
    ['isFromConfirmingUser', confirm({ userId: 'E18' }), false],
    ['isConfirmationUnexpired', confirm({ at: T0 + 999 }), true],
    ['isConfirmationUnexpired', confirm({ at: T0 + 1_000 }), false],
    ['isUnderSamePolicy', confirm({ policyVersion: '2' }), false],
    ['doesConfirmationMatchArguments', confirm(), true],
    ['doesConfirmationMatchArguments', confirm({ argsHash: 'sha256:other' }), false],
  ] as const)('%s(%j) → %s', (name, event, expected) => {
    expect(guards[name](waiting, event)).toBe(expected);
  });

  it('refuses everything when nothing is pending', () => {
    const idle = context();
    expect(guards.isConfirmationForPendingCall(idle, confirm())).toBe(false);
    expect(guards.isConfirmationUnexpired(idle, confirm())).toBe(false);
    expect(guards.isRejectionOfPendingConfirmation(idle, { type: 'user.rejected', at: 1, confirmationId: pending.id, userId: 'E17', reason: null })).toBe(false);
  });

  it('treats a timer as expiry only for the pending id and only at or after the deadline', () => {
    const waitingCtx = context({ pendingConfirmation: pending });
    const timer = (at: number, id = pending.id): AnyAgentEvent => ({ type: 'timer.confirmationExpired', at, confirmationId: id });
    expect(guards.hasPendingConfirmationExpired(waitingCtx, timer(T0 + 999))).toBe(false);
    expect(guards.hasPendingConfirmationExpired(waitingCtx, timer(T0 + 1_000))).toBe(true);
    expect(guards.hasPendingConfirmationExpired(waitingCtx, timer(T0 + 5_000, 'other'))).toBe(false);
  });
});

describe('protocol gate', () => {
  const catalog = context().catalog;
  const calls = (...list: [string | undefined, string, string][]) => list.map(([callId, name, args]) => ({ ...(callId === undefined ? {} : { callId }), name, arguments: args }));
  it.each([
    ['one good call', calls(['a', 'find_rooms', '{}']), 'accepted'],
    ['duplicate ids', calls(['a', 'find_rooms', '{}'], ['a', 'find_rooms', '{}']), 'unpairable'],
    ['a missing id', calls([undefined, 'find_rooms', '{}']), 'unpairable'],
    ['an unknown tool', calls(['a', 'find_rooms', '{}'], ['b', 'rm_rf', '{}']), 'rejected'],
    ['a duplicate key', calls(['a', 'find_rooms', '{"x":1,"x":2}']), 'rejected'],
    ['arguments that are a string', calls(['a', 'find_rooms', '"{}"']), 'rejected'],
    ['oversized arguments', calls(['a', 'find_rooms', JSON.stringify({ pad: 'x'.repeat(DEFAULT_POLICY.maxArgumentBytes) })]), 'rejected'],
    ['a tool name that is an inherited property', calls(['a', 'constructor', '{}']), 'rejected'],
  ])('%s → %s', (_label, proposed, kind) => {
    expect(checkProtocol(proposed, catalog, DEFAULT_POLICY).kind).toBe(kind);
  });
});

describe('execution order', () => {
  it('groups consecutive reads, runs writes and confirmation-gated calls alone, in proposal order', () => {
    const batch = {
      turn: 1,
      closed: false,
      calls: [
        call({ callId: 'r1' }),
        call({ callId: 'r2' }),
        call({ callId: 'w1', effect: 'write', tool: 'reserve_room' }),
        call({ callId: 'r3' }),
        call({ callId: 'r4', needsConfirmation: true }),
      ],
    };
    const order: string[][] = [];
    let current = batch;
    for (let step = nextStep(current); step; step = nextStep(current)) {
      order.push(step.callIds);
      current = { ...current, calls: current.calls.map((c) => (step!.callIds.includes(c.callId) ? { ...c, phase: 'finished' as const } : c)) };
    }
    expect(order).toEqual([['r1', 'r2'], ['w1'], ['r3'], ['r4']]);
  });

  it.each([
    ['write retry only when the tool declares same-key retries safe', 'reserve_room', true],
    ['no retry for a tool that does not', 'send_money', false],
  ])('isSameKeyRetrySafe: %s', (_label, tool, expected) => {
    const ctx = context({ batch: { turn: 1, closed: false, calls: [call({ tool, effect: 'write', phase: 'running' })] } });
    expect(guards.isSameKeyRetrySafe(ctx)).toBe(expected);
  });
});
