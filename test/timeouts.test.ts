/** runWithTimeout: a synchronous answer is taken as is (no timer, no listener); an asynchronous one races its deadline. */
import { describe, expect, it } from 'vitest';
import type { Clock } from '../src/clock.js';
import { runWithTimeout } from '../src/runtime/timeouts.js';
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
    const running = runWithTimeout(clock, 500, new AbortController().signal, (signal) => {
      seen = signal;
      return new Promise<string>(() => {});
    });
    expect(clock.timers).toBe(1);
    await manual.advance(500);
    expect(await running).toEqual({ kind: 'timeout' });
    expect(seen!.aborted).toBe(true);
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
});
