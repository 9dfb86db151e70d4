/**
 * How long this process's event loop was blocked lately: a timer ticks every 50 ms and records how late it ran. A
 * store command that timed out while the loop was blocked did not wait for the store: its timer fired late, or the
 * reply sat unread. That is overload, not an outage, and is reported so (see `redisCall`).
 */
const TICK_MS = 50;
/** Lags kept (one per late tick): about the last 10 s of a busy loop. */
const KEPT = 200;

let timer: ReturnType<typeof setInterval> | null = null;
let lastTick = 0;
/** Late ticks: when the tick ran, and how late. */
const lags: { at: number; lagMs: number }[] = [];

/** Starts the sampler (once per process; its timer never keeps the process alive). */
export function watchLoopLag(): void {
  if (timer) return;
  lastTick = performance.now();
  timer = setInterval(() => {
    const now = performance.now();
    const lagMs = now - lastTick - TICK_MS;
    lastTick = now;
    if (lagMs >= TICK_MS) {
      lags.push({ at: now, lagMs });
      if (lags.length > KEPT) lags.shift();
    }
  }, TICK_MS);
  timer.unref();
}

/** The longest the loop was blocked in the last `windowMs` (default 1 s), a block still going on included. */
export function recentLoopDelay(windowMs = 1_000): number {
  return longestBlockSince(performance.now() - windowMs);
}

/**
 * The longest the loop was blocked since `since` (a `performance.now()` time), counting a block still going on
 * (the sampler has not run since). 0 when the sampler is not running.
 */
export function longestBlockSince(since: number): number {
  if (!timer) return 0;
  const now = performance.now();
  let longest = Math.max(0, now - lastTick - TICK_MS);
  for (let i = lags.length - 1; i >= 0 && lags[i]!.at >= since; i--) longest = Math.max(longest, lags[i]!.lagMs);
  return longest;
}
