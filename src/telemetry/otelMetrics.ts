/**
 * Fleet metrics on OpenTelemetry, through `@opentelemetry/api` only (the host brings its MeterProvider and
 * exporter): every instrument is observed from `orchestrator.stats()` when the host's reader collects, so nothing is
 * counted twice and nothing runs between collections. The names are `FLEET_METRICS`' keys (docs/workers.md lists
 * them); each is attributed with the host's `attributes` (e.g. `{ 'service.instance.id': hostname }`).
 *
 * @example
 * import { metrics } from '@opentelemetry/api';
 * import { otelMetrics } from 'statechart-agent/otel';
 * const stop = otelMetrics(metrics.getMeter('bookings'), orchestrator);
 */
import type { Attributes, Meter, ObservableCounter, ObservableGauge } from '@opentelemetry/api';
import type { Orchestrator, OrchestratorStats } from '../orchestrator/orchestrator.js';

type Kind = 'gauge' | 'counter';

/** Every instrument, with its kind, unit, description and how it reads the stats. */
export const FLEET_METRICS = {
  'statechart_agent.tasks.live': {
    kind: 'gauge',
    unit: '{task}',
    description: 'Tasks this process drives now (in memory, running)',
    read: (s: OrchestratorStats) => s.live,
  },
  'statechart_agent.leases.held': {
    kind: 'gauge',
    unit: '{lease}',
    description: 'Task leases this process holds now',
    read: (s: OrchestratorStats) => s.leases,
  },
  'statechart_agent.event_loop.delay': {
    kind: 'gauge',
    unit: 'ms',
    description: "The event loop's longest lag in the last second (what capacity.maxLoopDelayMs admits against)",
    read: (s: OrchestratorStats) => s.loopDelayMs,
  },
  'statechart_agent.recoveries': {
    kind: 'counter',
    unit: '{task}',
    description: 'Tasks taken over by this process (recover() or the orphan sweep) since it started',
    read: (s: OrchestratorStats) => s.recovered,
  },
  'statechart_agent.quarantines': {
    kind: 'counter',
    unit: '{task}',
    description: 'Tasks found unrestorable while recovering, and quarantined',
    read: (s: OrchestratorStats) => s.quarantined,
  },
  'statechart_agent.starts.refused': {
    kind: 'counter',
    unit: '{start}',
    description: 'Starts refused for capacity, by reason (process, tenant, loop_delay, starting, tenant_cap)',
    read: (s: OrchestratorStats) => s.refused,
  },
  'statechart_agent.starts.underway': {
    kind: 'gauge',
    unit: '{start}',
    description: 'Starts under way now, not yet saved (what capacity.maxStartingTasks bounds)',
    read: (s: OrchestratorStats) => s.starting,
  },
} as const satisfies Record<
  string,
  { kind: Kind; unit: string; description: string; read: (s: OrchestratorStats) => number | Record<string, number> }
>;

const REASONS: Record<keyof OrchestratorStats['refused'], string> = {
  process: 'process',
  tenant: 'tenant',
  loopDelay: 'loop_delay',
  starting: 'starting',
  tenantCap: 'tenant_cap',
};

/** Registers the fleet metrics of `orchestrator` on `meter`; returns the function that unregisters them. */
export function otelMetrics(meter: Meter, orchestrator: Orchestrator, attributes: Attributes = {}): () => void {
  const instruments = Object.entries(FLEET_METRICS).map(([name, spec]) => {
    const options = { unit: spec.unit, description: spec.description };
    const instrument: ObservableGauge | ObservableCounter =
      spec.kind === 'gauge' ? meter.createObservableGauge(name, options) : meter.createObservableCounter(name, options);
    return { instrument, read: spec.read as (s: OrchestratorStats) => number | Record<string, number> };
  });
  const callback = (result: {
    observe(instrument: ObservableGauge | ObservableCounter, value: number, attributes?: Attributes): void;
  }) => {
    const stats = orchestrator.stats();
    for (const { instrument, read } of instruments) {
      const value = read(stats);
      if (typeof value === 'number') result.observe(instrument, value, attributes);
      else
        for (const [reason, count] of Object.entries(value))
          result.observe(instrument, count, { ...attributes, reason: REASONS[reason as keyof typeof REASONS] });
    }
  };
  const observables = instruments.map((i) => i.instrument);
  meter.addBatchObservableCallback(callback, observables);
  return () => meter.removeBatchObservableCallback(callback, observables);
}
