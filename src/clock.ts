/**
 * Time and randomness are injected so retries, timeouts and expiries are testable without real waiting.
 */

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `fn` after `ms`; returns a function that cancels it. */
  setTimeout(fn: () => void, ms: number): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const handle = setTimeout(fn, ms);
    return () => clearTimeout(handle);
  },
};

/** Real time, shifted so that it starts at `start` (the demo runs on the fictional date of its story). */
export function shiftedClock(start: number): Clock {
  const offset = start - Date.now();
  return { now: () => Date.now() + offset, setTimeout: systemClock.setTimeout };
}

/** Resolves after `ms` on `clock`, or rejects with the signal's reason when it aborts first. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      cancel();
      reject(signal!.reason);
    };
    const cancel = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Bounded exponential backoff with full jitter: random in [0, min(max, base * 2^retry)]. */
export function backoffDelay(
  retry: number,
  policy: { baseDelayMs: number; maxDelayMs: number },
  random: () => number,
): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry);
  return Math.round(ceiling * random());
}
