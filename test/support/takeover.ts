/**
 * For the takeover tests: a read that waits (on a gate, or for a while) and counts its starts per process, a
 * note-writing write that counts what it executed by idempotency key, a script that reads, writes, then answers (or
 * asks), a store whose lease renewals can be stalled, and what an orchestrator holds in memory.
 */
import { z } from 'zod';
import type { InFlight } from '../../src/orchestrator/liveTasks.js';
import type { Orchestrator } from '../../src/orchestrator/orchestrator.js';
import type { ModelReply } from '../../src/model/agentModel.js';
import { reply, scriptedModel } from '../../src/testing/scriptedModel.js';
import { MemoryStore } from '../../src/store/memoryStore.js';
import type { LeaseManager, TaskStore } from '../../src/store/taskStore.js';
import { defineTool } from '../../src/tool.js';

/** A read that resolves when `release()` is called (or after `ms`), aborted with its task; `started` lists who ran it. */
export function slowRead(wait: { ms: number } | 'gate' = 'gate') {
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
      execute: (_args, { signal }) =>
        new Promise((resolve, reject) => {
          started.push(process);
          const done = () => resolve({ ok: true as const, value: { by: process } });
          const timer = wait === 'gate' ? void gate.then(done) : setTimeout(done, wait.ms);
          signal.addEventListener('abort', () => (clearTimeout(timer ?? undefined), reject(signal.reason)), {
            once: true,
          });
        }),
    });
  return { tool, started, release: () => release() };
}

/** A write that records a note once per idempotency key; `executed` counts every execution. */
export function noteWriter() {
  const notes = new Map<string, string>();
  const executed: string[] = [];
  const tool = defineTool({
    name: 'record_note',
    description: 'records a note',
    effect: 'write',
    scopes: [],
    timeoutMs: 5_000,
    sameKeyRetrySafe: true,
    confirm: { never: "a note in the task's own log, which nobody else reads" },
    input: z.strictObject({ text: z.string() }),
    output: z.strictObject({ id: z.string(), text: z.string() }),
    async execute({ text }, { idempotencyKey }) {
      executed.push(idempotencyKey);
      notes.set(idempotencyKey, text);
      return { ok: true, value: { id: idempotencyKey, text } };
    },
    async lookup(idempotencyKey) {
      const text = notes.get(idempotencyKey);
      return text === undefined ? { found: false } : { found: true, value: { id: idempotencyKey, text } };
    },
  });
  return { tool, notes, executed };
}

/** Reads, records a note "read by <process>", then ends with `last` (by default that note as the answer). */
export function readThenWrite(last: (note: string) => ModelReply = (note) => reply.answer(note)) {
  return scriptedModel([
    reply.call('slow_read', {}),
    (v) => reply.call('record_note', { text: `read by ${(v.data('slow_read') as { by: string }).by}` }),
    (v) => last((v.data('record_note') as { text: string }).text),
  ]);
}

/**
 * `store` with lease renewals that can be held back: `stall()` holds every renewal issued until the returned
 * function is called, as a paused Redis or a frozen process would; acquisitions, releases and saves go through.
 */
export function stallableRenewals<S extends TaskStore>(
  store: S,
): { store: S; stall(): () => void; renewals: number; refused: number } {
  const inner = store.leases!;
  let gate: Promise<void> | null = null;
  const state = { renewals: 0, refused: 0 };
  const leases: LeaseManager = {
    acquire: (taskId, ttlMs) => inner.acquire(taskId, ttlMs),
    release: (lease) => inner.release(lease),
    async renew(lease, ttlMs) {
      state.renewals += 1;
      if (gate) await gate;
      const kept = await inner.renew(lease, ttlMs);
      if (!kept) state.refused += 1;
      return kept;
    },
  };
  return {
    store: withMembers(store, { leases }),
    stall() {
      let open!: () => void;
      gate = new Promise((resolve) => (open = resolve));
      return () => {
        gate = null;
        open();
      };
    },
    /** Renewals issued. */
    get renewals() {
      return state.renewals;
    },
    /** Renewals the store refused (the lease had lapsed or was taken): the process has found its lease lost. */
    get refused() {
      return state.refused;
    },
  };
}

/** `store` with some members replaced (the rest bound to the store itself). */
export function withMembers<S extends TaskStore>(store: S, members: Partial<TaskStore>): S {
  return new Proxy(store, {
    get(target, key) {
      if (key in members) return members[key as keyof TaskStore];
      const value = Reflect.get(target, key) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** Tasks and leases the orchestrator holds (read from its table of live tasks). */
export function inFlight(orchestrator: Orchestrator): InFlight {
  return orchestrator.inFlight();
}

/** True when nobody holds the task's lease (checked by taking and giving it back). */
export async function leaseIsFree(store: TaskStore, taskId: string): Promise<boolean> {
  const lease = await store.leases!.acquire(taskId, 1_000);
  if (lease) await store.leases!.release(lease);
  return lease !== null;
}

/**
 * A MemoryStore whose lease clock the test moves: `advance(ms)` makes every lease `ms` older at once, so a lease
 * lapses exactly when the test says (never by itself on a loaded machine, and without waiting for it).
 */
export function clockedStore(): { store: MemoryStore; advance(ms: number): void } {
  let skew = 0;
  const store = new MemoryStore(() => Date.now() + skew);
  return { store, advance: (ms) => void (skew += ms) };
}
