/**
 * Who waits on a live task's saves: `barrier()` callers wait until the snapshot version current at their call is
 * durable; `settled()` callers until the saved state is a waiting or final one. A task that stops being driven
 * here rejects them all with its error.
 */
interface Waiter {
  version: number;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class DurableWaiters {
  private durable: Waiter[] = [];
  private settled: Waiter[] = [];

  /** True when someone waits for a version to be durable. */
  get waiting(): boolean {
    return this.durable.length > 0;
  }

  /** Resolves once `durableUpTo(v)` is called with v >= version. */
  untilDurable(version: number): Promise<void> {
    return new Promise<void>((resolve, reject) => this.durable.push({ version, resolve, reject }));
  }

  /** Resolves at the next `durableUpTo(_, true)`. */
  untilSettled(): Promise<void> {
    return new Promise<void>((resolve, reject) => this.settled.push({ version: 0, resolve, reject }));
  }

  /** Versions up to `version` are durable; `settled`: the saved state is a waiting or final one. */
  durableUpTo(version: number, settled: boolean): void {
    const ready = this.durable.filter((w) => w.version <= version);
    this.durable = this.durable.filter((w) => w.version > version);
    for (const waiter of ready) waiter.resolve();
    if (settled) {
      const waiting = this.settled;
      this.settled = [];
      for (const waiter of waiting) waiter.resolve();
    }
  }

  /** Rejects every waiter. */
  rejectAll(error: Error): void {
    const all = [...this.durable, ...this.settled];
    this.durable = [];
    this.settled = [];
    for (const waiter of all) waiter.reject(error);
  }
}
