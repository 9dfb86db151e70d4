/**
 * A tenant's cap across processes (`capacity.tenantCap`): every process on the store counts the tenant's running
 * tasks in the store's tenant slots (`TenantSlots`: Redis across processes, MemoryStore within one). A start takes
 * its task's slot before anything is stored, or is refused (`tenant_at_capacity`); the slot is held while the task
 * runs here, renewed with the leases (every `renewEveryMs`, for `ttlMs`), and given back when the task waits, ends,
 * stops here or this process closes. The slots of a process that was killed free themselves after the lease TTL.
 *
 * Only a start is refused: a task that runs again (an event, a take-over) takes its slot whatever the others hold,
 * as events for tasks that exist are never refused for capacity.
 */
import { CapacityError } from '../errors.js';
import type { TenantSlots } from '../store/taskStore.js';
import type { Logger } from './hooks.js';

export class TenantCap {
  /** Slots held by tasks of this process: task id -> tenant id. */
  private readonly held = new Map<string, string>();
  /** Give-backs under way, so that `close` resolves after them. */
  private readonly releasing = new Set<Promise<void>>();
  private readonly renewer: ReturnType<typeof setInterval>;
  private renewing = false;
  /** Starts refused for the cap so far. */
  refused = 0;

  constructor(
    private readonly slots: TenantSlots,
    readonly cap: number,
    private readonly lease: { ttlMs: number; renewEveryMs: number },
    private readonly logger: Logger,
  ) {
    this.renewer = setInterval(() => void this.renewAll(), lease.renewEveryMs);
    this.renewer.unref();
  }

  /**
   * Takes the task's slot for a start, or throws CapacityError (`tenant_at_capacity`, `limitName: 'tenantCap'`).
   * Returns the give-back for a start that does not happen: when the task held its slot already (a retried start of
   * a running task, a start job whose slot the API process took), the slot is kept, only no longer renewed here.
   */
  async admit(tenantId: string, taskId: string): Promise<() => void> {
    const taken = await this.slots.take(tenantId, taskId, this.lease.ttlMs, this.cap);
    if (taken === null) {
      this.refused += 1;
      throw new CapacityError('tenant', this.cap, tenantId, undefined, 'tenantCap');
    }
    this.held.set(taskId, tenantId);
    // A slot held already (a start job's, taken by the API process; or a retried start of a task running elsewhere)
    // is not given back by a start that fails here: this process only stops renewing it.
    return taken === 'taken' ? () => this.release(taskId) : () => void this.held.delete(taskId);
  }

  /**
   * Takes the slot of a task another process will create (a start job recorded for the workers), or throws
   * CapacityError as `admit` does. The slot is not held here: it lasts one lease TTL, time enough for a worker to take
   * the start job, whose `admit` then finds it held and keeps it. Returns the give-back for a job not recorded.
   */
  async reserve(tenantId: string, taskId: string): Promise<() => Promise<void>> {
    const taken = await this.slots.take(tenantId, taskId, this.lease.ttlMs, this.cap);
    if (taken === null) {
      this.refused += 1;
      throw new CapacityError('tenant', this.cap, tenantId, undefined, 'tenantCap');
    }
    return taken === 'taken'
      ? () => this.slots.release(tenantId, taskId).catch((error: unknown) => this.warn(error, taskId))
      : async () => {};
  }

  /** A task runs here (again): it holds its slot, whatever the others hold. */
  hold(tenantId: string, taskId: string): void {
    if (this.held.has(taskId)) return;
    this.held.set(taskId, tenantId);
    this.slots.take(tenantId, taskId, this.lease.ttlMs).catch((error: unknown) => this.warn(error, taskId));
  }

  /** The task no longer runs here: its slot goes back (best effort: it expires anyway). */
  release(taskId: string): void {
    const tenantId = this.held.get(taskId);
    if (tenantId === undefined) return;
    this.held.delete(taskId);
    const released = this.slots
      .release(tenantId, taskId)
      .catch((error: unknown) => this.warn(error, taskId))
      .finally(() => this.releasing.delete(released));
    this.releasing.add(released);
  }

  /** Renews every slot held here, all at once (one round trip on a pipelining client); one pass at a time. */
  private async renewAll(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      await Promise.all(
        [...this.held].map(([taskId, tenantId]) =>
          this.slots.take(tenantId, taskId, this.lease.ttlMs).catch((error: unknown) => this.warn(error, taskId)),
        ),
      );
    } finally {
      this.renewing = false;
    }
  }

  /** Gives every slot back; resolves once the give-backs are done, so a host may close the store next. */
  async close(): Promise<void> {
    clearInterval(this.renewer);
    for (const taskId of [...this.held.keys()]) this.release(taskId);
    await Promise.allSettled([...this.releasing]);
  }

  private warn(error: unknown, taskId: string): void {
    this.logger.warn({ err: String(error), taskId }, 'a tenant slot could not be renewed or given back');
  }
}
