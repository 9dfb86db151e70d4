import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskBusyError, TaskNotFoundError } from '../src/errors.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { defineTool } from '../src/tool.js';
import { E17, until } from './support/harness.js';
import { clockedStore } from './support/takeover.js';

/** A read that waits until released, counting how often it started, per process label. */
function gatedRead() {
  const started: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const tool = (process: string) =>
    defineTool({
      name: 'slow_read',
      description: 'a read that takes a while',
      effect: 'read',
      scopes: [],
      timeoutMs: 60_000,
      input: z.strictObject({}),
      output: z.strictObject({ by: z.string() }),
      async execute() {
        started.push(process);
        await gate;
        return { ok: true, value: { by: process } };
      },
    });
  return { tool, started, release: () => release() };
}

function processWith(
  store: MemoryStore,
  tool: ReturnType<ReturnType<typeof gatedRead>['tool']>,
  lease: { ttlMs: number; renewEveryMs?: number; acquireTimeoutMs?: number },
) {
  return createOrchestrator({
    tools: [tool],
    model: scriptedModel([
      reply.call('slow_read', {}),
      (v) => reply.answer(`read by ${(v.data('slow_read') as { by: string }).by}`),
    ]),
    store,
    lease,
  });
}

describe('leases: one driver per task', () => {
  it('refuses to drive a task another process holds', async () => {
    const store = new MemoryStore();
    const read = gatedRead();
    const a = processWith(store, read.tool('A'), { ttlMs: 10_000 });
    const b = processWith(store, read.tool('B'), { ttlMs: 10_000, acquireTimeoutMs: 50 });
    await a.start({ principal: E17, goal: 'read', taskId: 't' });
    await until(() => read.started.length === 1);
    await expect(b.resume('t')).rejects.toBeInstanceOf(TaskBusyError);
    expect((await b.recover()).busy).toEqual(['t']);
    read.release();
    expect((await a.settled('t')).outcome?.answer).toBe('read by A');
    expect(read.started).toEqual(['A']);
    await a.close();
    await b.close();
  });

  it('fences out a process that lost its lease: its later writes are refused and it stops', async () => {
    const { store, advance } = clockedStore();
    const read = gatedRead();
    // A never renews: its lease lapses while its read hangs (a long GC pause, a frozen VM): the store's clock moves
    // past its TTL, so it lapses exactly here, never earlier by itself.
    const a = processWith(store, read.tool('A'), { ttlMs: 10_000, renewEveryMs: 3_600_000 });
    await a.start({ principal: E17, goal: 'read', taskId: 't' });
    await until(() => read.started.length === 1);
    advance(10_001);

    const b = processWith(store, read.tool('B'), { ttlMs: 10_000 });
    const report = await b.recover();
    expect(report.resumed).toEqual(['t']);
    await until(() => read.started.length === 2);
    const revisionAfterTakeover = (await store.load('t'))!.revision;

    read.release(); // both reads finish; only B may record its result
    const status = await b.settled('t');
    expect(status.outcome?.answer).toBe('read by B');
    await expect(a.settled('t')).resolves.toMatchObject({ outcome: { answer: 'read by B' } });
    // A's save was refused by the fence: nothing it computed after losing the lease reached the store.
    const audit = await b.audit('t');
    expect(audit.filter((e) => e.kind === 'tool_finished')).toHaveLength(1);
    expect((await store.load('t'))!.revision).toBeGreaterThan(revisionAfterTakeover);
    await a.close();
    await b.close();
  });

  it('recovers a task left running by a process that died (lease expired), and skips finished ones', async () => {
    const { store, advance } = clockedStore();
    const dead = gatedRead(); // never released: the process that runs it is gone
    const alive = gatedRead();
    alive.release();
    const a = processWith(store, dead.tool('A'), { ttlMs: 10_000, renewEveryMs: 3_600_000 });
    await a.start({ principal: E17, goal: 'read', taskId: 'orphan' });
    await until(() => dead.started.length === 1);
    advance(10_001); // its lease expires (the store's clock moves past its TTL)
    const b = processWith(store, alive.tool('B'), { ttlMs: 10_000 });
    const report = await b.recover();
    expect(report).toMatchObject({ resumed: ['orphan'], busy: [], quarantined: [] });
    expect((await b.settled('orphan')).outcome?.answer).toBe('read by B');
    expect((await b.recover()).resumed).toEqual([]);
    await a.close();
    await b.close();
  });
});

describe('a task that was never created', () => {
  /** A store where another process holds the lease of "ghost" (it died while loading the id), and nothing is stored. */
  async function heldGhost() {
    const store = new MemoryStore();
    const read = gatedRead();
    const a = processWith(store, read.tool('A'), { ttlMs: 10_000, acquireTimeoutMs: 50 });
    expect(await store.leases.acquire('ghost', 60_000)).not.toBeNull();
    return { store, a };
  }

  it('is not found, not "driven by another process", for every call that would drive it, even while a lease of the id is held', async () => {
    const { a } = await heldGhost();
    const calls: [string, () => Promise<unknown>][] = [
      ['resume', () => a.resume('ghost')],
      ['confirm', () => a.confirm('ghost', E17, { id: 'c-1', argsHash: 'sha256:00' })],
      ['reject', () => a.reject('ghost', E17, { id: 'c-1' })],
      ['answer', () => a.answer('ghost', E17, 'yes')],
      ['cancel', () => a.cancel('ghost', E17)],
      [
        'resolveReview',
        () => a.resolveReview('ghost', { ...E17, scopes: ['reviews:resolve'] }, { resolution: 'not_happened' }),
      ],
      ['erase', () => a.erase('ghost', { reason: 'gdpr_erasure' })],
      ['status', () => a.status('ghost')],
    ];
    for (const [name, call] of calls) {
      const error = await call().catch((e: unknown) => e);
      expect(error, name).toBeInstanceOf(TaskNotFoundError);
      expect(error, name).not.toBeInstanceOf(TaskBusyError);
    }
    await a.close();
  });

  it('is not found when nobody holds its lease either', async () => {
    const store = new MemoryStore();
    const a = processWith(store, gatedRead().tool('A'), { ttlMs: 10_000, acquireTimeoutMs: 50 });
    await expect(a.resume('ghost')).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(a.answer('ghost', E17, 'yes')).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(a.erase('ghost', { reason: 'gdpr_erasure' })).rejects.toBeInstanceOf(TaskNotFoundError);
    expect(a.inFlight()).toEqual({ live: 0, leases: 0 });
    await a.close();
  });

  it('is still "driven by another process" once it exists and another process holds its lease', async () => {
    const { store, a } = await heldGhost();
    const read = gatedRead();
    const b = processWith(store, read.tool('B'), { ttlMs: 10_000, acquireTimeoutMs: 50 });
    await b.start({ principal: E17, goal: 'read', taskId: 'real' });
    await until(() => read.started.length === 1);
    await expect(a.resume('real')).rejects.toBeInstanceOf(TaskBusyError);
    await expect(a.answer('real', E17, 'yes')).rejects.toBeInstanceOf(TaskBusyError);
    await expect(a.erase('real', { reason: 'gdpr_erasure' })).rejects.toBeInstanceOf(TaskBusyError);
    read.release();
    await b.settled('real');
    await a.close();
    await b.close();
  });
});
