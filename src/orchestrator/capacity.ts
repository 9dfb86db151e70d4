/**
 * Backpressure: how much one process takes on. A new task takes a slot from `start` until it is live (then it
 * counts as running) or its start failed; past the process's limit, or its tenant's, it is refused before anything
 * is stored, so one tenant cannot take every slot and a busy instance says so instead of slowing everyone down.
 *
 * Starts under way are bounded too (`maxStartingTasks`): a start holds that slot until its first state is saved (or
 * it failed). A burst of thousands of starts issued at once would otherwise queue thousands of store round trips and
 * machine starts behind each other, starve the event loop for seconds, and have the store's command timeouts fire
 * on calls Redis had answered long before.
 */
import { AgentError, CapacityError } from '../errors.js';
import { recentLoopDelay, watchLoopLag } from '../runtime/loopLag.js';

export interface CapacityLimits {
  maxRunningTasks: number;
  maxRunningPerTenant: number;
  /** A start is refused while the event loop lagged more than this in the last second (Infinity: never). */
  maxLoopDelayMs: number;
  /** Starts under way at once in this process (Infinity: no bound). */
  maxStartingTasks: number;
}

/** A start's hold on capacity: `live()` once its task is live (it counts as running), `release()` when it is done. */
export interface StartSlot {
  live(): void;
  release(): void;
}

export class Capacity {
  /** Starts under way whose task is not live yet, by tenant. */
  private readonly starting = new Map<string, number>();
  /** Starts under way in all, until their first save (or failure). */
  private underway = 0;
  private draining = false;
  /** Starts refused so far, by reason (for `stats()` and metrics). */
  readonly refused = { process: 0, tenant: 0, loopDelay: 0, starting: 0 };

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

  /** Starts under way now (taken and not yet saved or failed). */
  get startsUnderway(): number {
    return this.underway;
  }

  /** Takes a slot for a new task of `tenantId`, or throws CapacityError; both of its releases are idempotent. */
  hold(tenantId: string): StartSlot {
    if (this.draining)
      throw new AgentError('orchestrator_draining', 'this orchestrator is draining: it takes no new tasks');
    const { maxRunningTasks, maxRunningPerTenant, maxLoopDelayMs, maxStartingTasks } = this.limits;
    // Checked first, and in O(1): in a burst, most calls end here.
    if (this.underway >= maxStartingTasks) {
      this.refused.starting += 1;
      throw new CapacityError('process', maxStartingTasks, tenantId, undefined, 'maxStartingTasks');
    }
    // A loop that lags already: a new task would starve the ones it drives (their store calls time out).
    const lag = Number.isFinite(maxLoopDelayMs) ? this.loopDelay() : 0;
    if (lag > maxLoopDelayMs) {
      this.refused.loopDelay += 1;
      throw new CapacityError('process', maxLoopDelayMs, tenantId, lag);
    }
    const starting = this.starting.get(tenantId) ?? 0;
    if (Number.isFinite(maxRunningTasks)) {
      let total = 0;
      for (const n of this.starting.values()) total += n;
      if (this.running() + total >= maxRunningTasks) {
        this.refused.process += 1;
        throw new CapacityError('process', maxRunningTasks, tenantId);
      }
    }
    if (Number.isFinite(maxRunningPerTenant) && this.running(tenantId) + starting >= maxRunningPerTenant) {
      this.refused.tenant += 1;
      throw new CapacityError('tenant', maxRunningPerTenant, tenantId);
    }
    this.starting.set(tenantId, starting + 1);
    this.underway += 1;
    let counted = true;
    let held = true;
    const live = () => {
      if (!counted) return;
      counted = false;
      const left = (this.starting.get(tenantId) ?? 1) - 1;
      if (left > 0) this.starting.set(tenantId, left);
      else this.starting.delete(tenantId);
    };
    return {
      live,
      release: () => {
        live();
        if (!held) return;
        held = false;
        this.underway -= 1;
      },
    };
  }
}
