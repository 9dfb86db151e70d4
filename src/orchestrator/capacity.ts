/**
 * Backpressure: how much one process takes on. A new task takes a slot from `start` until it is live (then it
 * counts as running) or its start failed; past the process's limit, or its tenant's, it is refused before anything
 * is stored, so one tenant cannot take every slot and a busy instance says so instead of slowing everyone down.
 */
import { AgentError, CapacityError } from '../errors.js';
import { recentLoopDelay, watchLoopLag } from '../runtime/loopLag.js';

export interface CapacityLimits {
  maxRunningTasks: number;
  maxRunningPerTenant: number;
  /** A start is refused while the event loop lagged more than this in the last second (Infinity: never). */
  maxLoopDelayMs: number;
}

export class Capacity {
  /** Starts under way, by tenant. */
  private readonly starting = new Map<string, number>();
  private draining = false;
  /** Starts refused so far, by reason (for `stats()` and metrics). */
  readonly refused = { process: 0, tenant: 0, loopDelay: 0 };

  constructor(
    private readonly limits: CapacityLimits,
    /** Tasks running in this process, in all or of one tenant. */
    private readonly running: (tenantId?: string) => number,
    /** The event loop's longest lag in the last second. */
    private readonly loopDelay: () => number = recentLoopDelay,
  ) {
    if (Number.isFinite(limits.maxLoopDelayMs)) watchLoopLag();
  }

  /** From now on, no new task: `hold` refuses with `orchestrator_draining`. */
  drain(): void {
    this.draining = true;
  }

  /** Takes a slot for a new task of `tenantId`, or throws CapacityError; returns the (idempotent) release. */
  hold(tenantId: string): () => void {
    if (this.draining)
      throw new AgentError('orchestrator_draining', 'this orchestrator is draining: it takes no new tasks');
    const { maxRunningTasks, maxRunningPerTenant, maxLoopDelayMs } = this.limits;
    // A loop that lags already: a new task would starve the ones it drives (their store calls time out).
    const lag = Number.isFinite(maxLoopDelayMs) ? this.loopDelay() : 0;
    if (lag > maxLoopDelayMs) {
      this.refused.loopDelay += 1;
      throw new CapacityError('process', maxLoopDelayMs, tenantId, lag);
    }
    const starting = this.starting.get(tenantId) ?? 0;
    let total = 0;
    for (const n of this.starting.values()) total += n;
    if (Number.isFinite(maxRunningTasks) && this.running() + total >= maxRunningTasks) {
      this.refused.process += 1;
      throw new CapacityError('process', maxRunningTasks, tenantId);
    }
    if (Number.isFinite(maxRunningPerTenant) && this.running(tenantId) + starting >= maxRunningPerTenant) {
      this.refused.tenant += 1;
      throw new CapacityError('tenant', maxRunningPerTenant, tenantId);
    }
    this.starting.set(tenantId, starting + 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const left = (this.starting.get(tenantId) ?? 1) - 1;
      if (left > 0) this.starting.set(tenantId, left);
      else this.starting.delete(tenantId);
    };
  }
}
