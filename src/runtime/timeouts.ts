/** Running a unit of work under a timeout and a parent abort signal, on an injectable clock. */
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
 * Runs `work` with a signal that aborts after `ms` or when `parent` aborts. Returns as soon as either happens,
 * even if `work` ignores its signal. Errors thrown by `work` propagate.
 *
 * A `work` that answers synchronously (a hook that returns a value, not a promise) is done there: no timer is set
 * and no listener added, since nothing could have interrupted it. The round's hooks are often such.
 */
export async function runWithTimeout<T>(
  clock: Clock,
  ms: number,
  parent: AbortSignal,
  work: (signal: AbortSignal) => T | Promise<T>,
): Promise<Timed<T>> {
  if (parent.aborted) return { kind: 'aborted' };
  const controller = new AbortController();
  const answer = work(controller.signal);
  if (!isThenable(answer)) return { kind: 'done', value: answer };
  let settle!: (result: Timed<T>) => void;
  const stopped = new Promise<Timed<T>>((resolve) => (settle = resolve));
  const onParentAbort = () => {
    controller.abort(parent.reason);
    settle({ kind: 'aborted' });
  };
  parent.addEventListener('abort', onParentAbort, { once: true });
  const cancelTimer = clock.setTimeout(() => {
    controller.abort(new TimeoutError(ms));
    settle({ kind: 'timeout' });
  }, ms);
  try {
    const running = Promise.resolve(answer).then((value): Timed<T> => ({ kind: 'done', value }));
    // A late rejection after the timeout won the race must not become an unhandled rejection.
    running.catch(() => {});
    return await Promise.race([running, stopped]);
  } finally {
    cancelTimer();
    parent.removeEventListener('abort', onParentAbort);
  }
}

function isThenable<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}
