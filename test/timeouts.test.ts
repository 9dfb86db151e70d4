/**
 * runWithTimeout: a synchronous answer, or a promise already settled, is taken as is (no timer, no listener); an
 * asynchronous one races its deadline.
 */
import { describe, expect, it } from 'vitest';
import type { Clock } from '../src/clock.js';
import { Cancel, runWithTimeout } from '../src/runtime/timeouts.js';
import { ManualClock } from '../src/testing/manualClock.js';

/** A clock that counts the timers set on it. */
function countingClock(inner: ManualClock): Clock & { timers: number } {
  const clock = {
    timers: 0,
    now: () => inner.now(),
    setTimeout: (fn: () => void, ms: number) => {
      clock.timers += 1;
      return inner.setTimeout(fn, ms);
    },
  };
  return clock;
}

describe('runWithTimeout', () => {
  it('takes a synchronous answer as is, with no timer set and no listener left on the parent', async () => {
    const clock = countingClock(new ManualClock());
    const parent = new AbortController();
    const listeners: unknown[] = [];
    const add = parent.signal.addEventListener.bind(parent.signal);
    parent.signal.addEventListener = ((...args: Parameters<AbortSignal['addEventListener']>) => (
      listeners.push(args[0]),
      add(...args)
    )) as never;
    expect(await runWithTimeout(clock, 1_000, parent.signal, () => ({ ok: true }))).toEqual({
      kind: 'done',
      value: { ok: true },
    });
    expect(clock.timers).toBe(0);
    expect(listeners).toEqual([]);
  });

  it('takes an answer already settled (an async function that never awaited) with no timer, no listener left', async () => {
    const clock = countingClock(new ManualClock());
    const parent = new Cancel();
    // Listeners left on the parent (one is set while the answer is awaited, and removed once it is taken).
    let listeners = 0;
    const onAbort = parent.onAbort.bind(parent);
    parent.onAbort = (fn) => {
      listeners += 1;
      const forget = onAbort(fn);
      return () => ((listeners -= 1), forget());
    };
    const answer = async () => ({ ok: true });
    expect(await runWithTimeout(clock, 1_000, parent, answer)).toEqual({ kind: 'done', value: { ok: true } });
    await expect(runWithTimeout(clock, 1_000, parent, () => Promise.reject(new Error('refused')))).rejects.toThrow(
      'refused',
    );
    expect(clock.timers).toBe(0);
    expect(listeners).toBe(0);
    // A parent stopped before the still pending answer is timed: aborted, and the work's stop is told.
    let seen: Cancel | null = null;
    const running = runWithTimeout(clock, 1_000, parent, (stop) => {
      seen = stop;
      return new Promise<string>(() => {});
    });
    parent.abort();
    expect(await running).toEqual({ kind: 'aborted' });
    expect(seen!.aborted).toBe(true);
    expect(clock.timers).toBe(0);
  });

  it('propagates what a synchronous work throws', async () => {
    const clock = countingClock(new ManualClock());
    await expect(
      runWithTimeout(clock, 1_000, new AbortController().signal, () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
  });

  it('races an asynchronous answer against its deadline, and aborts the work signal when the deadline wins', async () => {
    const manual = new ManualClock();
    const clock = countingClock(manual);
    let seen: AbortSignal | null = null;
    const running = runWithTimeout(clock, 500, new AbortController().signal, (stop) => {
      seen = stop.signal;
      return new Promise<string>(() => {});
    });
    // Set a microtask later (after an already settled answer would have been taken).
    await Promise.resolve();
    expect(clock.timers).toBe(1);
    expect(seen!.aborted).toBe(false);
    await manual.advance(500);
    expect(await running).toEqual({ kind: 'timeout' });
    expect(seen!.aborted).toBe(true);
    expect(seen!.reason).toMatchObject({ name: 'TimeoutError' });
  });

  it('says aborted when the parent aborts first, before or during the work', async () => {
    const clock = countingClock(new ManualClock());
    const before = new AbortController();
    before.abort();
    expect(await runWithTimeout(clock, 500, before.signal, () => 'never')).toEqual({ kind: 'aborted' });
    const during = new AbortController();
    const running = runWithTimeout(clock, 500, during.signal, () => new Promise<string>(() => {}));
    during.abort();
    expect(await running).toEqual({ kind: 'aborted' });
  });

  it('says aborted, and stops the work, when the parent stops while the work is being started', async () => {
    // A tool whose synchronous part stops what runs it (it cancels its own task, say) before handing back a promise.
    const manual = new ManualClock();
    const pending = (p: Promise<unknown>) =>
      Promise.race([p, new Promise((resolve) => setTimeout(() => resolve('still pending'), 20))]);
    for (const kind of ['cancel', 'signal'] as const) {
      const cancel = new Cancel();
      const controller = new AbortController();
      let stop: Cancel | null = null;
      const running = runWithTimeout(manual, 500, kind === 'cancel' ? cancel : controller.signal, (s) => {
        stop = s;
        if (kind === 'cancel') cancel.abort(new Error('stopped'));
        else controller.abort(new Error('stopped'));
        return new Promise<string>(() => {});
      });
      expect(await pending(running)).toEqual({ kind: 'aborted' });
      expect(stop!.aborted).toBe(true);
      expect(stop!.signal.reason).toMatchObject({ message: 'stopped' });
      expect(manual.pending).toBe(0);
    }
  });

  it('makes no AbortSignal for work that never asks for one, and an aborted one for work that asks late', async () => {
    const made = { count: 0 };
    const Native = globalThis.AbortController;
    globalThis.AbortController = class extends Native {
      constructor() {
        super();
        made.count += 1;
      }
    };
    try {
      const manual = new ManualClock();
      const parent = new Cancel();
      let stop: Cancel | null = null;
      expect(await runWithTimeout(manual, 500, parent, async () => 'at once')).toEqual({
        kind: 'done',
        value: 'at once',
      });
      const running = runWithTimeout(manual, 500, parent, (s) => {
        stop = s;
        return new Promise<string>(() => {});
      });
      parent.abort(new Error('stopped'));
      expect(await running).toEqual({ kind: 'aborted' });
      expect(made.count).toBe(0);
      expect(stop!.signal.aborted).toBe(true);
      expect(stop!.signal.reason).toMatchObject({ message: 'stopped' });
      expect(made.count).toBe(1);
      expect(manual.pending).toBe(0);
    } finally {
      globalThis.AbortController = Native;
    }
  });

  it('propagates what an asynchronous work rejects with, and clears its timer', async () => {
    const manual = new ManualClock();
    await expect(
      runWithTimeout(manual, 500, new Cancel(), () => Promise.reject(new Error('late boom'))),
    ).rejects.toThrow('late boom');
    expect(manual.pending).toBe(0);
  });
  it('stops the work at once when the parent stops right after it started (before its next step runs)', async () => {
    // The work's own continuation is queued before anything runWithTimeout defers: it must already see the stop,
    // as it did when the parent's listener was set at once (a write that checks its stop after an await, say).
    for (const kind of ['cancel', 'signal'] as const) {
      const cancel = new Cancel();
      const controller = new AbortController();
      const seen: { aborted: boolean | null; signal: boolean | null } = { aborted: null, signal: null };
      const running = runWithTimeout(
        new ManualClock(),
        500,
        kind === 'cancel' ? cancel : controller.signal,
        async (s) => {
          const signal = s.signal;
          await null;
          seen.aborted = s.aborted;
          seen.signal = signal.aborted;
          return 'went on';
        },
      );
      if (kind === 'cancel') cancel.abort(new Error('stopped'));
      else controller.abort(new Error('stopped'));
      expect(await running).toEqual({ kind: 'aborted' });
      expect(seen).toEqual({ aborted: true, signal: true });
    }
  });
  it('rejects, as it did, when the clock cannot set the timer (not an uncaught error in a microtask)', async () => {
    const broken: Clock = {
      now: () => 0,
      setTimeout: () => {
        throw new Error('no timers here');
      },
    };
    const pending = new Promise<string>(() => {});
    await expect(runWithTimeout(broken, 500, new Cancel(), () => pending)).rejects.toThrow('no timers here');
  });
});
