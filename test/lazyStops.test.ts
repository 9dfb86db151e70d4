/**
 * The runtime's actors' logic (`fromTask`): XState's `fromPromise`, with the actor's stop as a `Cancel` whose
 * AbortSignal is made only when asked for; and `copyOf`, the copy a host function is handed, as `structuredClone`'s.
 */
import { createActor, fromPromise } from 'xstate';
import { describe, expect, it } from 'vitest';
import { copyOf } from '../machines/lib/arguments.js';
import { fromTask } from '../src/runtime/actors/taskLogic.js';

describe('fromTask', () => {
  it("settles as fromPromise does, with fromPromise's snapshots", async () => {
    const task = createActor(
      fromTask(async ({ input }: { input: number }) => input * 2),
      { input: 21 },
    );
    const promise = createActor(
      fromPromise(async ({ input }: { input: number }) => input * 2),
      { input: 21 },
    );
    expect(task.getPersistedSnapshot()).toEqual(promise.getPersistedSnapshot());
    task.start();
    promise.start();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(task.getSnapshot()).toMatchObject({ status: 'done', output: 42 });
    expect(task.getPersistedSnapshot()).toEqual(promise.getPersistedSnapshot());
    const failing = createActor(fromTask(() => Promise.reject(new Error('no'))));
    const seen: unknown[] = [];
    failing.subscribe({ error: (error) => seen.push(error) });
    failing.start();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(failing.getSnapshot().status).toBe('error');
    expect(seen).toEqual([new Error('no')]);
  });

  it('aborts the stop when the actor is stopped, and a signal asked for afterwards is aborted too', async () => {
    let stop: { aborted: boolean; signal: AbortSignal } | null = null;
    const actor = createActor(
      fromTask(({ stop: s }) => {
        stop = s;
        return new Promise<never>(() => {});
      }),
    );
    actor.start();
    expect(stop!.aborted).toBe(false);
    actor.stop();
    expect(stop!.aborted).toBe(true);
    expect(stop!.signal.aborted).toBe(true);
  });
});

describe('copyOf', () => {
  it('copies as structuredClone does, sharing nothing with the original', () => {
    const date = new Date(0);
    const values: unknown[] = [
      null,
      7,
      'text',
      [1, [2, { a: [3] }]],
      { a: { b: { c: [null, true, 'x'] } }, d: date },
      JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}'),
      Object.assign(Object.create(null) as object, { bare: 1 }),
    ];
    for (const value of values) {
      const copy = copyOf(value);
      expect(copy).toEqual(structuredClone(value));
      if (value !== null && typeof value === 'object') expect(copy).not.toBe(value);
    }
    const nested = { list: [{ n: 1 }], at: date };
    const copy = copyOf(nested);
    copy.list[0]!.n = 2;
    copy.list.push({ n: 3 });
    expect(nested).toEqual({ list: [{ n: 1 }], at: date });
    expect(copy.at).not.toBe(date);
    expect(copy.at.getTime()).toBe(0);
    const polluted = copyOf(JSON.parse('{"__proto__": {"polluted": true}}') as Record<string, unknown>);
    expect(Object.getPrototypeOf(polluted)).toBe(Object.prototype);
    expect(Object.keys(polluted)).toEqual(['__proto__']);
  });

  it('copies a value met twice once, as structuredClone does: shared stays shared, and a DAG is not walked per path', () => {
    let reads = 0;
    const shared = {
      get n() {
        reads += 1;
        return 1;
      },
    };
    // 2^12 paths lead to `shared`: a walk per path reads it 4096 times (at depth 40, ~10^12: never done).
    let dag: unknown = shared;
    for (let i = 0; i < 12; i++) dag = { a: dag, b: dag };
    const copy = copyOf(dag) as { a: unknown; b: unknown };
    expect(reads).toBe(1);
    expect(copy.a).toBe(copy.b);
    expect(copy).toEqual(structuredClone(dag));
    const date = new Date(0);
    const pair = copyOf({ from: date, to: date, list: [date] });
    expect(pair.from).toBe(pair.to);
    expect(pair.list[0]).toBe(pair.from);
    const ring: { name: string; self?: unknown; items: unknown[] } = { name: 'ring', items: [] };
    ring.self = ring;
    ring.items.push(ring);
    const copied = copyOf(ring);
    expect(copied).not.toBe(ring);
    expect(copied.self).toBe(copied);
    expect(copied.items[0]).toBe(copied);
  });

  it('copies values deeper than its own walk, and refuses functions as structuredClone does', () => {
    let deep: unknown = { end: true };
    for (let i = 0; i < 200; i++) deep = { next: deep };
    expect(copyOf(deep)).toEqual(deep);
    expect(() => copyOf({ f: () => 1 })).toThrow();
  });
});
