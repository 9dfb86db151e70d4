/** This process's load and what it did about it, as `orchestrator.stats()` reports it (and `otelMetrics` exports). */
import { recentLoopDelay } from '../runtime/loopLag.js';
import type { Capacity } from './capacity.js';
import type { LiveTasks } from './liveTasks.js';

export interface OrchestratorStats {
  live: number;
  leases: number;
  loopDelayMs: number;
  recovered: number;
  quarantined: number;
  /** Starts refused for capacity, by reason (the capacity option that refused them). */
  refused: { process: number; tenant: number; loopDelay: number; starting: number; tenantCap: number };
  /** Starts under way now (`capacity.maxStartingTasks` bounds them). */
  starting: number;
}

export function fleetStats(
  live: LiveTasks,
  capacity: Capacity,
  recoveries: { resumed: number; quarantined: number },
): OrchestratorStats {
  const { live: tasks, leases } = live.inFlight();
  return {
    live: tasks,
    leases,
    loopDelayMs: Math.round(recentLoopDelay()),
    recovered: recoveries.resumed,
    quarantined: recoveries.quarantined,
    refused: { ...capacity.refused, tenantCap: live.tenantCap?.refused ?? 0 },
    starting: capacity.startsUnderway,
  };
}
