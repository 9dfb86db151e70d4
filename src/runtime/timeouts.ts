/** Running a unit of work under a timeout and a parent stop, on an injectable clock. */
import type { Clock } from '../clock.js';
import type { CodedError } from '../errorCodes.js';

export type Timed<T> = { kind: 'done'; value: T } | { kind: 'timeout' } | { kind: 'aborted' };

export class TimeoutError extends Error implements CodedError<'timed_out'> {
  readonly code = 'timed_out' as const;
  constructor(ms: number) {
    super(`timed out after ${ms} ms`);
    this.name = new.target.name;
  }
}

/**
 * What stops a unit of work (its deadline passed, or what runs it stopped), with its `AbortSignal` made only when
 * someone asks for it. An `AbortController` costs more than the rest of a no-op tool call together (about 3 µs),
 * and most hooks and tools that answer at once never look at their signal: a round made four, one per actor and
 * one per call; now only those that are read are made.
 */
export class Cancel {
  private stopped = false;
  private why: unknown = undefined;
  private controller: AbortController | null = null;
  private listeners: (() => void)[] | null = null;

  get aborted(): boolean {
    return this.stopped;
  }

  get reason(): unknown {
    return this.why;
  }

  /** The signal to hand to code that takes one: made on first use, already aborted if the stop came first. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.stopped) this.controller.abort(this.why);
    }
    return this.controller.signal;
  }

  abort(reason?: unknown): void {
    if (this.stopped) return;
    this.stopped = true;
    this.why = reason ?? new DOMException('This operation was aborted', 'AbortError');
    this.controller?.abort(this.why);
    const listeners = this.listeners;
    this.listeners = null;
    for (const listener of listeners ?? []) listener();
  }

  /** Calls `fn` once when this stops (at once if it has); returns a function that forgets `fn`. */
  onAbort(fn: () => void): () => void {
    if (this.stopped) {
      fn();
      return () => {};
    }
    (this.listeners ??= []).push(fn);
    return () => {
      const at = this.listeners?.indexOf(fn) ?? -1;
      if (at >= 0) this.listeners!.splice(at, 1);
    };
  }
}

/**
 * Runs `work` with a stop that fires after `ms` or when `parent` stops. Returns as soon as either happens, even if
 * `work` ignores its stop. Errors thrown by `work` propagate.
 *
 * A `work` that answers synchronously (a hook that returns a value, not a promise) is done there: no timer is set
 * and no listener added, since nothing could have interrupted it. The round's hooks are often such. One that returns
 * a promise already settled (an async function that never awaited) is done a microtask later, with no timer (its
 * listener on the parent, set at once so that a stop reaches the work's next step, is removed then). Any other
 * costs one timer and one listener, and an `AbortSignal` only if the work asks its stop for one.
 */
export function runWithTimeout<T>(
  clock: Clock,
  ms: number,
  parent: Cancel | AbortSignal,
  work: (stop: Cancel) => T | Promise<T>,
): Promise<Timed<T>> {
  if (parent.aborted) return Promise.resolve({ kind: 'aborted' });
  const stop = new Cancel();
  let answer: T | Promise<T>;
  try {
    answer = work(stop);
  } catch (error) {
    return Promise.reject(error as Error);
  }
  if (!isThenable(answer)) return Promise.resolve({ kind: 'done', value: answer });
  // The work's synchronous part may have stopped the parent (a tool that cancels its own task): a listener added now
  // would never hear of it (an AbortSignal's) or would be called before the timer exists (a Cancel's).
  if (parent.aborted) {
    stop.abort(parent.reason);
    answer.then(undefined, () => {});
    return Promise.resolve({ kind: 'aborted' });
  }
  const pending = answer;
  return new Promise<Timed<T>>((resolve, reject) => {
    let settled = false;
    let cancelTimer = NOTHING;
    let forget = NOTHING;
    const settle = (finish: () => void) => {
      if (settled) return;
      settled = true;
      cancelTimer();
      forget();
      finish();
    };
    // A late rejection after the timeout won the race is dropped: it must not become an unhandled rejection.
    pending.then(
      (value) => settle(() => resolve({ kind: 'done', value })),
      (error: unknown) => settle(() => reject(error as Error)),
    );
    // The parent's listener is set at once: the work's own next step (queued by its first await, before anything
    // deferred here) must already see a stop that came meanwhile, as an AbortSignal handed to it must.
    forget = onAbort(parent, () => {
      stop.abort(parent.reason);
      settle(() => resolve({ kind: 'aborted' }));
    });
    // The timer is set a microtask later: the reaction above to a promise that is already settled (an async function
    // that never awaited: most reads, most models' replies in tests) runs first, and needs none. One that is still
    // pending is timed from then, the same tick.
    queueMicrotask(() => {
      if (settled) return;
      try {
        cancelTimer = clock.setTimeout(() => {
          stop.abort(new TimeoutError(ms));
          settle(() => resolve({ kind: 'timeout' }));
        }, ms);
      } catch (error) {
        // A clock that cannot set a timer rejects the run (as when the timer was set synchronously), rather than
        // throwing in a microtask (an uncaught exception) and leaving the run without a deadline.
        settle(() => reject(error as Error));
      }
    });
  });
}

const NOTHING = () => {};

/** Calls `fn` once when `parent` stops; returns a function that forgets it. */
function onAbort(parent: Cancel | AbortSignal, fn: () => void): () => void {
  if (parent instanceof Cancel) return parent.onAbort(fn);
  parent.addEventListener('abort', fn, { once: true });
  return () => parent.removeEventListener('abort', fn);
}

function isThenable<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}
