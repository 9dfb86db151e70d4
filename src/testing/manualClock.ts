/** A clock for tests: time moves only when the test says so. */
import type { Clock } from '../clock.js';

/**
 * A clock that only moves when told to. `advance(ms)` fires due timers in time order, letting promise
 * continuations run between them, so code that awaits sleeps and timeouts behaves as it would in real time.
 */
export class ManualClock implements Clock {
  private current: number;
  private timers: { due: number; seq: number; fn: () => void }[] = [];
  private seq = 0;

  constructor(start = Date.UTC(2026, 8, 26, 5, 0, 0)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): () => void {
    const timer = { due: this.current + Math.max(0, ms), seq: this.seq++, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Number of timers waiting to fire. */
  get pending(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      await flushMicrotasks();
      const next = this.timers.filter((t) => t.due <= target).sort((a, b) => a.due - b.due || a.seq - b.seq)[0];
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.current = Math.max(this.current, next.due);
      next.fn();
    }
    this.current = target;
    await flushMicrotasks();
  }

  /** Sets the time (only forward); timers that fall due fire. */
  async set(time: number): Promise<void> {
    await this.advance(Math.max(0, time - this.current));
  }
}

async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
