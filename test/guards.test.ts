import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { MachineEvent } from '../machines/actors.js';
import type { AgentContext, CallState, PendingConfirmation } from '../machines/context.js';
import { CONFIRMATION_CHECKS, confirmationRefusal, guards } from '../machines/guards/index.js';
import { nextStep } from '../machines/lib/batch.js';
import { checkProtocol } from '../machines/lib/protocol.js';
import { initialContext } from '../machines/steps/turn.js';
import type { ToolRules, Toolkit } from '../machines/toolkit.js';
import { sha256Hex } from '../src/hashing.js';
import { DEFAULT_LIMITS, DEFAULT_POLICY } from '../src/orchestrator/orchestrator.js';

const T0 = 1_000_000;
/** No tool declares an amount: the budget guards need the toolkit only for the money a write moves. */
const TOOLKIT: Toolkit = { rules: () => undefined, sha256: sha256Hex };

function context(patch: Partial<AgentContext> = {}): AgentContext {
  return {
    ...initialContext({
      taskId: 'task-1',
      goal: 'g',
      principal: { userId: 'E17', tenantId: 'acme', scopes: ['rooms:book'] },
      mandate: null,
      catalog: {
        find_rooms: { effect: 'read', sameKeyRetrySafe: false },
        reserve_room: { effect: 'write', sameKeyRetrySafe: true },
        send_money: { effect: 'write', sameKeyRetrySafe: false },
      },
      policy: DEFAULT_POLICY,
      provenance: { model: { id: 'test-model', version: null }, prompt: null },
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
    confirmation: null,
    confirmationSummary: null,
    confirmedBy: null,
    confirmationRequests: 0,
    phase: 'ready',
    writeAttempts: 0,
    lookups: 0,
    observation: null,
    runAs: null,
    resendAfter: null,
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
  approverScope: null,
  approvalsRequired: 1,
  approvals: [],
  reasons: ['tool_rule'],
  risk: 'writable',
  policyVersion: '1',
  requestedAt: T0,
  expiresAt: T0 + 1_000,
  request: 1,
};

const confirm = (patch: Record<string, unknown> = {}): MachineEvent =>
  ({
    type: 'user.confirmed',
    at: T0 + 10,
    confirmationId: pending.id,
    argsHash: 'sha256:good',
    userId: 'E17',
    scopes: ['rooms:book'],
    policyVersion: '1',
    ...patch,
  }) as MachineEvent;

const tick: MachineEvent = { type: 'timer.confirmationExpired', at: T0 + 1, confirmationId: 'none' };

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
    expect(guards.hasBudgetForModelTurn(ctx, event as MachineEvent)).toBe(expected);
  });

  it.each([
    ['reads within budget', [call({}), call({ callId: 'c2' })], { toolCalls: DEFAULT_LIMITS.toolCalls - 2 }, true],
    [
      'two reads, one call left',
      [call({}), call({ callId: 'c2' })],
      { toolCalls: DEFAULT_LIMITS.toolCalls - 1 },
      false,
    ],
    [
      'a write with no writes left',
      [call({ effect: 'write', tool: 'reserve_room' })],
      { writes: DEFAULT_LIMITS.writes },
      false,
    ],
    ['a read with no writes left', [call({})], { writes: DEFAULT_LIMITS.writes }, true],
  ])('hasBudgetForNextStep: %s → %s', (_label, calls, u, expected) => {
    const ctx = { ...used(u), batch: { turn: 1, closed: false, current: null, calls } };
    expect(guards.hasBudgetForNextStep(ctx, tick, TOOLKIT)).toBe(expected);
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
    expect(
      guards.isRejectionOfPendingConfirmation(idle, {
        type: 'user.rejected',
        at: 1,
        confirmationId: pending.id,
        userId: 'E17',
        scopes: [],
        reason: null,
      }),
    ).toBe(false);
  });

  it('treats a timer as expiry only for the pending id and only at or after the deadline', () => {
    const waitingCtx = context({ pendingConfirmation: pending });
    const timer = (at: number, id = pending.id): MachineEvent => ({
      type: 'timer.confirmationExpired',
      at,
      confirmationId: id,
    });
    expect(guards.hasPendingConfirmationExpired(waitingCtx, timer(T0 + 999))).toBe(false);
    expect(guards.hasPendingConfirmationExpired(waitingCtx, timer(T0 + 1_000))).toBe(true);
    expect(guards.hasPendingConfirmationExpired(waitingCtx, timer(T0 + 5_000, 'other'))).toBe(false);
  });
});

describe('protocol gate', () => {
  const catalog = context().catalog;
  const calls = (...list: [string | undefined, string, string][]) =>
    list.map(([callId, name, args]) => ({ ...(callId === undefined ? {} : { callId }), name, arguments: args }));
  it.each([
    ['one good call', calls(['a', 'find_rooms', '{}']), 'accepted'],
    ['duplicate ids', calls(['a', 'find_rooms', '{}'], ['a', 'find_rooms', '{}']), 'unpairable'],
    ['a missing id', calls([undefined, 'find_rooms', '{}']), 'unpairable'],
    ['an unknown tool', calls(['a', 'find_rooms', '{}'], ['b', 'rm_rf', '{}']), 'rejected'],
    ['a duplicate key', calls(['a', 'find_rooms', '{"x":1,"x":2}']), 'rejected'],
    ['arguments that are a string', calls(['a', 'find_rooms', '"{}"']), 'rejected'],
    [
      'oversized arguments',
      calls(['a', 'find_rooms', JSON.stringify({ pad: 'x'.repeat(DEFAULT_POLICY.maxArgumentBytes) })]),
      'rejected',
    ],
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
      current: null,
      calls: [
        call({ callId: 'r1' }),
        call({ callId: 'r2' }),
        call({ callId: 'w1', effect: 'write', tool: 'reserve_room' }),
        call({ callId: 'r3' }),
        call({
          callId: 'r4',
          confirmation: {
            approverScope: null,
            approvals: 1,
            onReject: 'replan',
            onExpiry: 'ask_again',
            reasons: ['tool_rule'],
            risk: 'read_only',
          },
        }),
      ],
    };
    const order: string[][] = [];
    let current = batch;
    for (let step = nextStep(current); step; step = nextStep(current)) {
      order.push(step.callIds);
      current = {
        ...current,
        calls: current.calls.map((c) => (step!.callIds.includes(c.callId) ? { ...c, phase: 'finished' as const } : c)),
      };
    }
    expect(order).toEqual([['r1', 'r2'], ['w1'], ['r3'], ['r4']]);
  });

  it.each([
    ['write retry only when the tool declares same-key retries safe', 'reserve_room', true],
    ['no retry for a tool that does not', 'send_money', false],
  ])('isSameKeyRetrySafe: %s', (_label, tool, expected) => {
    const ctx = context({
      batch: { turn: 1, closed: false, current: 'c1', calls: [call({ tool, effect: 'write', phase: 'writing' })] },
    });
    expect(guards.isSameKeyRetrySafe(ctx)).toBe(expected);
  });
});

describe('vetting guards', () => {
  const rules = (patch: Partial<ToolRules>): ToolRules => ({
    name: 'reserve_room',
    effect: 'write',
    input: z.strictObject({ room_id: z.string(), attendees: z.number().int().positive() }),
    scopes: ['rooms:book'],
    validates: true,
    authorizes: false,
    ...patch,
  });
  const toolkit = (tool: ToolRules | undefined): Toolkit => ({
    rules: (name) => (name === tool?.name ? tool : undefined),
    sha256: sha256Hex,
  });
  const vetting = (args: CallState['args']) =>
    context({
      batch: {
        turn: 1,
        closed: false,
        current: 'c1',
        calls: [call({ tool: 'reserve_room', effect: 'write', args, phase: 'vetting' })],
      },
    });

  it.each([
    ['arguments the schema accepts', { room_id: 'R7', attendees: 3 }, rules({}), true],
    ['an unknown field', { room_id: 'R7', attendees: 3, requester_id: 'E1' }, rules({}), false],
    ['a wrong type', { room_id: 'R7', attendees: 'three' }, rules({}), false],
    ['a tool that is not installed', { room_id: 'R7', attendees: 3 }, undefined, false],
    [
      'a schema that transforms its value',
      { room_id: 'R7', attendees: 3 },
      rules({ input: z.strictObject({ room_id: z.string().transform((r) => `${r}!`), attendees: z.number() }) }),
      false,
    ],
  ])('doArgumentsMatchSchema: %s → %s', (_label, args, tool, expected) => {
    expect(guards.doArgumentsMatchSchema(vetting(args), tick, toolkit(tool))).toBe(expected);
  });

  it.each([
    ['the principal holds the scope', ['rooms:book'], true],
    ['one of two scopes is missing', ['rooms:book', 'rooms:book:executive'], false],
    ['no scope required', [], true],
  ])('hasScopesForTool: %s → %s', (_label, scopes, expected) => {
    expect(guards.hasScopesForTool(vetting({ room_id: 'R7', attendees: 3 }), tick, toolkit(rules({ scopes })))).toBe(
      expected,
    );
  });

  it('runs business rules and resource permission in their states only when the tool declares them asynchronous', () => {
    const ctx = vetting({ room_id: 'R7', attendees: 3 });
    const yes = () => ({ ok: true }) as const;
    expect(guards.hasAsyncBusinessRules(ctx, tick, toolkit(rules({ validates: true })))).toBe(true);
    expect(guards.hasAsyncBusinessRules(ctx, tick, toolkit(rules({ validates: false })))).toBe(false);
    expect(guards.hasAsyncBusinessRules(ctx, tick, toolkit(rules({ validates: true, validateNow: yes })))).toBe(false);
    expect(guards.hasAsyncResourcePolicy(ctx, tick, toolkit(rules({ authorizes: true })))).toBe(true);
    expect(guards.hasAsyncResourcePolicy(ctx, tick, toolkit(rules({ authorizes: true, authorizeNow: yes })))).toBe(
      false,
    );
    expect(guards.hasAsyncResourcePolicy(ctx, tick, toolkit(undefined))).toBe(false);
  });

  it.each([
    ['validateNow', 'isBusinessValid'],
    ['authorizeNow', 'isAuthorized'],
  ] as const)('asks a synchronous hook (%s) itself: %s', (hook, name) => {
    const ctx = vetting({ room_id: 'R7', attendees: 3 });
    let asked = 0;
    const no = () => {
      asked++;
      return { ok: false, code: 'capacity_exceeded', summary: 'seats 4' } as const;
    };
    expect(guards[name](ctx, tick, toolkit(rules({ [hook]: () => ({ ok: true }) })))).toBe(true);
    expect(guards[name](ctx, tick, toolkit(rules({ [hook]: no })))).toBe(false);
    // Without a hook the gate passes.
    expect(guards[name](ctx, tick, toolkit(rules({})))).toBe(true);
    expect(asked).toBe(1);
  });

  it.each([
    ['validate', 'isBusinessValid', { ok: true }, true],
    ['validate', 'isBusinessValid', { ok: false, code: 'capacity_exceeded', summary: 'seats 4' }, false],
    ['authorize', 'isAuthorized', { ok: true }, true],
    ['authorize', 'isAuthorized', { ok: false, code: 'permission_denied', summary: 'executive' }, false],
  ] as const)('%s verdict → %s is %s', (id, name, verdict, expected) => {
    const done = { type: `xstate.done.actor.${id}`, output: { at: T0, verdict, durationMs: 1 } } as MachineEvent;
    expect(guards[name](vetting({}), done, toolkit(undefined))).toBe(expected);
  });
});

describe('the confirmation checks', () => {
  it('derive every refusal code from the guards the chart names, in the chart order', () => {
    const waiting = context({ pendingConfirmation: pending });
    expect(CONFIRMATION_CHECKS.map(([guard]) => guard)).toEqual([
      'isConfirmationForPendingCall',
      'isFromConfirmingUser',
      'isNotSelfApproval',
      'holdsApproverScope',
      'isFirstDecisionOfApprover',
      'isConfirmationUnexpired',
      'isUnderSamePolicy',
      'doesConfirmationMatchArguments',
    ]);
    expect(confirmationRefusal(waiting, confirm())).toBeNull();
    expect(confirmationRefusal(waiting, confirm({ confirmationId: 'other', userId: 'E18' }))).toBe(
      'unknown_confirmation',
    );
    expect(confirmationRefusal(waiting, confirm({ userId: 'E18', at: T0 + 5_000 }))).toBe('wrong_user');
    expect(confirmationRefusal(waiting, confirm({ at: T0 + 5_000, argsHash: 'sha256:other' }))).toBe(
      'confirmation_expired',
    );
    expect(confirmationRefusal(waiting, confirm({ policyVersion: '2', argsHash: 'sha256:other' }))).toBe(
      'policy_changed',
    );
    expect(confirmationRefusal(waiting, confirm({ argsHash: 'sha256:other' }))).toBe('arguments_changed');
  });
});
