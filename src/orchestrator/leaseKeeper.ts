/**
 * The leases this process holds, when the store has leases (Redis): one driver per task. Every save carries the
 * lease's fencing token; a lease that cannot be renewed stops its task here, so no side effect starts from a task
 * another process may now drive.
 */
import { StoreDataLostError, TaskBusyError } from '../errors.js';
import type { Lease, LeaseManager, ReadWithLease, TakenTask } from '../store/taskStore.js';

export class LeaseKeeper {
  private readonly held = new Map<string, Lease>();
  /**
   * Held leases a renewal found lost. Their fence is still what the task's saves present (and the store refuses it
   * once another acquisition happened), they are not renewed again, and the next `take` replaces them.
   */
  private readonly lost = new WeakSet<Lease>();
  private renewer: ReturnType<typeof setInterval> | null = null;
  private renewing = false;

  constructor(
    private readonly leases: LeaseManager | undefined,
    private readonly settings: { ttlMs: number; renewEveryMs: number; acquireTimeoutMs: number },
    /** Called when a held lease is lost (or may be, past its expiry): the task must stop being driven here. */
    private readonly onLost: (taskId: string) => void,
    /** The store's `acquireAndRead`, if it has one (bound to it). */
    private readonly acquireAndRead?: (taskId: string, ttlMs: number) => Promise<TakenTask | null>,
  ) {
    if (leases) {
      this.renewer = setInterval(() => void this.renewAll(), settings.renewEveryMs);
      this.renewer.unref();
    }
  }

  /** How many leases this process holds (a lost one counts until it is released or replaced). */
  get size(): number {
    return this.held.size;
  }

  /** The lease object held for the task, if any: `release(taskId, lease)` gives up exactly this one. */
  holding(taskId: string): Lease | undefined {
    return this.held.get(taskId);
  }

  /** True when this process may drive the task: the store has no leases, or its lease is held and not found lost. */
  drives(taskId: string): boolean {
    if (!this.leases) return true;
    const lease = this.held.get(taskId);
    return lease !== undefined && !this.lost.has(lease);
  }

  /** The fencing token to present with the task's next save, if a lease is held. */
  fence(taskId: string): string | undefined {
    return this.held.get(taskId)?.fence;
  }

  /**
   * Takes the task's lease; waits up to acquireTimeoutMs (real time) unless told not to, then TaskBusyError. A lease
   * held here that was found lost is given up first (by its token: the store frees it only if it is still ours), so
   * the new one comes with a new fence. With `read`, on a store that can (`acquireAndRead`), resolves with what the
   * store read of the task once the lease was taken; otherwise (or when the lease was held already, or the store
   * could not read) with undefined.
   */
  async take(taskId: string, wait = true, read = false): Promise<ReadWithLease | undefined> {
    const leases = this.leases;
    if (!leases) return undefined;
    const current = this.held.get(taskId);
    if (current && !this.lost.has(current)) return undefined;
    if (current) await this.release(taskId, current);
    const deadline = Date.now() + (wait ? this.settings.acquireTimeoutMs : 0);
    const reading = read ? this.acquireAndRead : undefined;
    for (let attempt = 0; ; attempt++) {
      const taken = reading
        ? await reading(taskId, this.settings.ttlMs)
        : await leases.acquire(taskId, this.settings.ttlMs);
      if (taken) {
        const lease = 'lease' in taken ? taken.lease : taken;
        this.held.set(taskId, lease);
        return 'lease' in taken ? (taken.read ?? undefined) : undefined;
      }
      if (Date.now() >= deadline) throw new TaskBusyError(taskId);
      await new Promise((resolve) => setTimeout(resolve, Math.min(25 * 2 ** attempt, 250)));
    }
  }

  /**
   * Gives the task's lease up (best effort: an expired lease frees itself). With `only`, just that lease object:
   * a release decided for a lease since replaced leaves the new one alone.
   */
  async release(taskId: string, only?: Lease): Promise<void> {
    const lease = this.held.get(taskId);
    if (!lease || (only && lease !== only)) return;
    this.held.delete(taskId);
    await this.leases?.release(lease).catch(() => {});
  }

  /**
   * Renews every lease held, all at once: on Redis the renewals go out as one pipeline (the client pipelines the
   * commands of one tick), so a pass costs one round trip however many tasks this process drives. One pass at a
   * time, so a slow store cannot pile passes up.
   */
  private async renewAll(): Promise<void> {
    if (this.renewing || !this.leases) return;
    const leases = this.leases;
    this.renewing = true;
    try {
      await Promise.all(
        [...this.held]
          .filter(([, lease]) => !this.lost.has(lease))
          .map(async ([taskId, lease]) => {
            let kept: boolean;
            try {
              kept = await leases.renew(lease, this.settings.ttlMs);
            } catch (error) {
              // A store that lost its data holds no lease of ours; anything else may be a blip until the lease expires.
              kept = !(error instanceof StoreDataLostError) && Date.now() < lease.expiresAt;
            }
            // Renewed an old lease object after the task released and re-took its lease: not a loss.
            if (!kept && this.held.get(taskId) === lease) {
              this.lost.add(lease);
              this.onLost(taskId);
            }
          }),
      );
    } finally {
      this.renewing = false;
    }
  }

  async close(): Promise<void> {
    if (this.renewer) clearInterval(this.renewer);
    await Promise.all([...this.held.keys()].map((taskId) => this.release(taskId)));
  }
}
