/**
 * The orchestrator's API edge: what a host may pass in, and what is refused before anything reaches a task.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type {
  AuditRecord,
  HostSetup,
  RecoveryReport,
  StartTaskRequest,
  TaskStatus,
  TaskSummary,
  UserEventResult,
} from '../src/index.js';
import { describe, expect, it } from 'vitest';
import { HostRequestError, MachineError, StoreUnavailableError, TaskExistsError } from '../src/errors.js';
import { reply } from '../src/testing/scriptedModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { E17, harness, until } from './support/harness.js';
import { paymentTool } from './support/paymentTool.js';

describe('start', () => {
  it('reports a store that cannot be read as unavailable, not as an existing task', async () => {
    class DownOnLoad extends MemoryStore {
      override async load(): Promise<never> {
        throw new StoreUnavailableError('connection refused');
      }
    }
    const h = harness({ store: new DownOnLoad() });
    const error = await h.orchestrator.start({ principal: E17, goal: 'book', taskId: 's1' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(error).not.toBeInstanceOf(TaskExistsError);
  });

  it('refuses a success criterion or task id the store could not read back', async () => {
    const h = harness({ script: [reply.ask('q?')] });
    const badSuccess = { tool: 'reserve_room', match: { status: ['confirmed'] } } as never;
    await expect(h.orchestrator.start({ principal: E17, goal: 'g', success: badSuccess })).rejects.toThrow(
      HostRequestError,
    );
    await expect(h.orchestrator.start({ principal: E17, goal: 'g', taskId: '' })).rejects.toThrow(HostRequestError);
    expect(h.orchestrator.liveTasks).toBe(0);
  });
});

describe('createOrchestrator', () => {
  it('refuses a policy that would be persisted unreadable or make every confirmation invalid', () => {
    expect(() => harness({ policy: { version: '' } })).toThrow(HostRequestError);
    expect(() => harness({ policy: { confirmationTtlMs: Number.NaN } })).toThrow(HostRequestError);
    expect(() => harness({ policy: { maxConfirmationRequests: -1 } })).toThrow(HostRequestError);
    expect(() => harness({ policy: { maxCallsPerBatch: 2 } })).not.toThrow();
  });
});

describe('what a task is started with', () => {
  it('refuses a model whose reservation the store could not read back', () => {
    const model = {
      name: 'odd',
      reservation: { tokens: 100, costMicros: 0, label: 'x' },
      decide: async () => reply.answer('x'),
    };
    expect(() => harness({ model: model as never })).toThrow(/model.reservation: \(root\): Unrecognized key/);
    expect(() => harness({ model: { ...model, reservation: { tokens: 1.5, costMicros: 0 } } })).toThrow(
      HostRequestError,
    );
  });

  it('reads back every task it accepted, long scopes, policy versions and descriptions included', async () => {
    const long = 'x'.repeat(2_000);
    const store = new MemoryStore();
    const h = harness({ store, policy: { version: long }, script: [reply.ask('which room?')] });
    const principal = { ...E17, scopes: [...E17.scopes, `custom:${long}`] };
    await h.orchestrator.run({
      principal,
      goal: 'g',
      taskId: 'long',
      success: { tool: 'reserve_room', description: long },
    });
    expect((await store.load('long'))?.snapshot.context.principal.scopes.at(-1)).toBe(`custom:${long}`);
    expect((await h.orchestrator.answer('long', principal, 'R7')).accepted).toBe(true);
  });
});

describe('a machine that throws', () => {
  it('quarantines the task with the reason, so that recovery does not run it into the same failure', async () => {
    let armed = false;
    const tool = paymentTool();
    const scopes = tool.scopes;
    Object.defineProperty(tool, 'scopes', {
      get: () => {
        if (armed) throw new Error('scopes unavailable');
        return scopes;
      },
    });
    const store = new MemoryStore();
    // The scopes break after the model was offered the tools: the chart's scope guard is the first to meet them.
    const propose = () => ((armed = true), reply.call('send_payment', { amount: 5 }));
    const h = harness({ store, extraTools: [tool], script: [propose, reply.answer('x')] });
    const started = await h.orchestrator.start({ principal: E17, goal: 'pay', taskId: 'throws' });
    await expect(h.orchestrator.settled(started.taskId)).rejects.toThrow(MachineError);
    await until(async () => (await store.quarantined('throws')) !== null);
    expect(await store.quarantined('throws')).toMatch(/the agent machine failed \(Error: scopes unavailable\)/);
    const report = await harness({ store, extraTools: [tool] }).orchestrator.recover();
    expect(report).toMatchObject({ resumed: [], quarantined: [{ taskId: 'throws' }] });
  });
});

describe('host input', () => {
  it('refuses oversized text in host events and goals', async () => {
    const h = harness({ script: [reply.ask('which room?')] });
    await expect(h.orchestrator.start({ principal: E17, goal: 'x'.repeat(20_000) })).rejects.toThrow(HostRequestError);
    const status = await h.orchestrator.run({ principal: E17, goal: 'g', taskId: 'big' });
    await expect(h.orchestrator.answer(status.taskId, E17, 'y'.repeat(20_000))).rejects.toThrow(HostRequestError);
  });
});

describe('the public entries', () => {
  // The entry files themselves (package.json maps each subpath to its build: consumer*.package.test.ts check those).
  it('export the stores a host needs: MemoryStore and FileStore from the main entry, RedisStore from /redis', async () => {
    const main = await import('../src/index.js');
    const redis = await import('../src/redis.js');
    expect([typeof main.MemoryStore, typeof main.FileStore, typeof redis.RedisStore]).toEqual([
      'function',
      'function',
      'function',
    ]);
    expect(new main.FileStore(join(tmpdir(), 'api-file-store')).kind).toBe('file');
  });

  it('keep test doubles out of the main entry, in /testing', async () => {
    const main: Record<string, unknown> = await import('../src/index.js');
    const testing = await import('../src/testing/index.js');
    for (const name of ['scriptedModel', 'reply', 'ManualClock', 'gatedModel', 'ScriptedModel']) {
      expect(main[name], name).toBeUndefined();
      expect((testing as Record<string, unknown>)[name], name).toBeDefined();
    }
  });

  it('take the caller first in every user event: (taskId, by, what they decided)', async () => {
    const h = harness({ script: [reply.ask('which room?'), reply.ask('which floor?')] });
    const waiting = await h.orchestrator.run({ principal: E17, goal: 'g', taskId: 'order' });
    const results = await Promise.all([
      h.orchestrator.confirm(waiting.taskId, E17, { id: 'none', argsHash: 'none' }),
      h.orchestrator.reject(waiting.taskId, E17, { id: 'none' }),
    ]);
    expect(results.map((r) => r.code)).toEqual(['not_waiting_for_confirmation', 'not_waiting_for_confirmation']);
    expect((await h.orchestrator.answer(waiting.taskId, E17, 'R7')).accepted).toBe(true);
    expect((await h.orchestrator.settled(waiting.taskId)).question).toBe('which floor?');
    expect(await h.orchestrator.cancel(waiting.taskId, E17, 'done')).toMatchObject({
      accepted: true,
      status: { state: 'cancelled' },
    });
  });
});

// The types a host writes against are exported from the entry it imports.
export type Exported = [
  RecoveryReport,
  TaskStatus,
  UserEventResult,
  StartTaskRequest,
  HostSetup,
  TaskSummary,
  AuditRecord,
];
