/**
 * `finishReads` against its copy from before it stopped copying the context for a single read
 * (test/support/finishReadsBefore.ts): the same context patch and the same entries, for one read and for several
 * (results out of order, repeated, for an unknown call, missing, failed, ended unknown), with and without a success
 * criterion the results meet.
 */
import { describe, expect, it } from 'vitest';
import type { MachineEvent, ReadResult } from '../machines/actors.js';
import type { AgentContext, CallState } from '../machines/context.js';
import { finishReads } from '../machines/steps/execution.js';
import { initialContext } from '../machines/steps/turn.js';
import type { Toolkit } from '../machines/toolkit.js';
import { sha256Hex } from '../src/hashing.js';
import { DEFAULT_LIMITS, DEFAULT_POLICY } from '../src/orchestrator/orchestrator.js';
import { finishReadsBefore } from './support/finishReadsBefore.js';

const T0 = 1_000_000;
const TOOLKIT: Toolkit = { rules: () => undefined, sha256: sha256Hex };

function call(callId: string, phase: CallState['phase'], tool = 'find_rooms'): CallState {
  return {
    callId,
    tool,
    effect: 'read',
    args: { q: callId },
    argsHash: `sha256:${callId.padEnd(20, '0')}`,
    redactedArgs: { q: callId },
    idempotencyKey: null,
    confirmation: null,
    confirmationSummary: null,
    confirmedBy: null,
    confirmationRequests: 0,
    phase,
    writeAttempts: 0,
    lookups: 0,
    observation: null,
    runAs: null,
    resendAfter: null,
  };
}

function context(calls: CallState[], success: AgentContext['success']): AgentContext {
  const base = initialContext({
    taskId: 'task-1',
    goal: 'find room R-12 for E17',
    principal: { userId: 'E17', tenantId: 'acme', scopes: ['rooms:read'] },
    mandate: null,
    catalog: {
      find_rooms: { effect: 'read', sameKeyRetrySafe: false },
      list_people: { effect: 'read', sameKeyRetrySafe: false },
    },
    policy: DEFAULT_POLICY,
    provenance: { model: { id: 'test-model', version: null }, prompt: null },
    limits: DEFAULT_LIMITS,
    modelReservation: { tokens: 1_000, costMicros: 0 },
    success,
    startedAt: T0,
  });
  return { ...base, turn: 3, batch: { turn: 3, closed: false, current: null, calls } };
}

const ok = (callId: string, value: unknown, durationMs = 5): ReadResult => ({
  callId,
  outcome: { kind: 'ok', value: value as never },
  attempts: 1,
  durationMs,
});
const failed = (callId: string, code: string, retryable: boolean): ReadResult => ({
  callId,
  outcome: { kind: 'error', code, summary: `${code} happened`, retryable },
  attempts: 2,
  durationMs: 9,
});

function done(results: ReadResult[], retriesUsed = 0): MachineEvent {
  return { type: 'xstate.done.actor.reads', output: { at: T0 + 500, results, retriesUsed } } as unknown as MachineEvent;
}

const CRITERION = { tool: 'find_rooms', require: ['room'] };

const CASES: { name: string; calls: CallState[]; results: ReadResult[]; success: AgentContext['success'] }[] = [
  { name: 'one read', calls: [call('c1', 'reading')], results: [ok('c1', { room: 'R-12', floor: 3 })], success: null },
  {
    name: 'one read meeting the criterion',
    calls: [call('c1', 'reading')],
    results: [ok('c1', { room: 'R-12', person: 'E42' })],
    success: CRITERION,
  },
  { name: 'one failed read', calls: [call('c1', 'reading')], results: [failed('c1', 'timeout', true)], success: null },
  {
    name: 'several reads, out of order, repeated, one for an unknown call, one missing',
    calls: [
      call('c0', 'finished'),
      call('c1', 'reading'),
      call('c2', 'reading', 'list_people'),
      call('c3', 'reading'),
      call('c4', 'reading'),
      call('c5', 'ready'),
    ],
    results: [
      ok('c3', { room: 'R-7', person: 'E99' }),
      failed('c2', 'unavailable', false),
      ok('c1', { room: 'R-12', person: 'E42' }),
      ok('c1', { room: 'R-13' }),
      ok('zz', { room: 'R-1' }),
      ok('c5', { room: 'R-2' }),
    ],
    success: CRITERION,
  },
  {
    name: 'several reads that each teach something',
    calls: [call('c1', 'reading'), call('c2', 'reading', 'list_people'), call('c3', 'reading')],
    results: [ok('c1', { room: 'R-12' }), ok('c2', { person: 'E42' }), ok('c3', { room: 'R-14', person: 'E43' })],
    success: CRITERION,
  },
];

describe('finishReads', () => {
  for (const c of CASES) {
    it(`gives what it gave before: ${c.name}`, () => {
      const before = context(c.calls, c.success);
      const now = context(c.calls, c.success);
      const event = done(c.results, 1);
      const expected = finishReadsBefore(before, event, TOOLKIT);
      const actual = finishReads(now, event, TOOLKIT);
      expect(actual).toEqual(expected);
      // Key order too (the snapshot and the journal keep it).
      expect(JSON.stringify(actual)).toBe(JSON.stringify(expected));
      // The context it was given is left as it was.
      expect(now).toEqual(context(c.calls, c.success));
    });
  }
});
