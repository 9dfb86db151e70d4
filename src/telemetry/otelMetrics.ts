/**
 * Fleet metrics on OpenTelemetry, through `@opentelemetry/api` only (the host brings its MeterProvider and
 * exporter): every instrument is observed when the host's reader collects, from `orchestrator.stats()` (this
 * process) or `orchestrator.queueStats()` (the dispatch queue's backlog, read at most about once a second), so nothing
 * is counted twice and nothing runs between collections. The names are `FLEET_METRICS`' keys (docs/inspect.md lists
 * them); each is attributed with the host's `attributes` (e.g. `{ 'service.instance.id': hostname }`).
 *
 * @example
 * import { metrics } from '@opentelemetry/api';
 * import { otelMetrics } from 'statechart-agent/otel';
 * const stop = otelMetrics(metrics.getMeter('bookings'), orchestrator);
 */
import type { Attributes, Meter, ObservableCounter, ObservableGauge } from '@opentelemetry/api';
import type { QueueBacklog } from '../orchestrator/dispatch.js';
import type { Orchestrator, OrchestratorStats } from '../orchestrator/orchestrator.js';

type Kind = 'gauge' | 'counter';

/** Every instrument, with its kind, unit, description and how it reads the stats. */
export const FLEET_METRICS = {
  'statechart_agent.tasks.live': {
    source: 'stats',
    kind: 'gauge',
    unit: '{task}',
    description: 'Tasks this process drives now (in memory, running)',
    read: (s: OrchestratorStats) => s.live,
  },
  'statechart_agent.leases.held': {
    source: 'stats',
    kind: 'gauge',
    unit: '{lease}',
    description: 'Task leases this process holds now',
    read: (s: OrchestratorStats) => s.leases,
  },
  'statechart_agent.event_loop.delay': {
    source: 'stats',
    kind: 'gauge',
    unit: 'ms',
    description: "The event loop's longest lag in the last second (what capacity.maxLoopDelayMs admits against)",
    read: (s: OrchestratorStats) => s.loopDelayMs,
  },
  'statechart_agent.recoveries': {
    source: 'stats',
    kind: 'counter',
    unit: '{task}',
    description: 'Tasks taken over by this process (recover() or the orphan sweep) since it started',
    read: (s: OrchestratorStats) => s.recovered,
  },
  'statechart_agent.quarantines': {
    source: 'stats',
    kind: 'counter',
    unit: '{task}',
    description: 'Tasks found unrestorable while recovering, and quarantined',
    read: (s: OrchestratorStats) => s.quarantined,
  },
  'statechart_agent.starts.refused': {
    source: 'stats',
    kind: 'counter',
    unit: '{start}',
    description: 'Starts refused for capacity, by reason (process, tenant, loop_delay, starting, tenant_cap)',
    read: (s: OrchestratorStats) => s.refused,
  },
  'statechart_agent.starts.underway': {
    source: 'stats',
    kind: 'gauge',
    unit: '{start}',
    description: 'Starts under way now, not yet saved (what capacity.maxStartingTasks bounds)',
    read: (s: OrchestratorStats) => s.starting,
  },
  'statechart_agent.queue.depth': {
    source: 'queue',
    kind: 'gauge',
    unit: '{job}',
    description: 'Jobs of the dispatch queue no worker has taken yet, by state (waiting, delayed, prioritized)',
    read: (q: QueueBacklog) => ({ waiting: q.waiting, delayed: q.delayed, prioritized: q.prioritized }),
  },
  'statechart_agent.queue.oldest_waiting_ms': {
    source: 'queue',
    kind: 'gauge',
    unit: 'ms',
    description: 'How long the oldest waiting job of the dispatch queue has waited (0 when none waits)',
    read: (q: QueueBacklog) => q.oldestWaitingMs ?? 0,
  },
} as const satisfies Record<string, MetricSpec>;

/** What an entry of `FLEET_METRICS` says: read from `stats()` (this process) or `queueStats()` (the fleet's queue). */
type MetricSpec = { kind: Kind; unit: string; description: string } & (
  { source: 'stats'; read: ReadStats } | { source: 'queue'; read: ReadQueue }
);

const REASONS: Record<keyof OrchestratorStats['refused'], string> = {
  process: 'process',
  tenant: 'tenant',
  loopDelay: 'loop_delay',
  starting: 'starting',
  tenantCap: 'tenant_cap',
};

type ReadStats = (s: OrchestratorStats) => number | Record<string, number>;
type ReadQueue = (q: QueueBacklog) => number | Record<string, number>;

type Observer = {
  observe(instrument: ObservableGauge | ObservableCounter, value: number, attributes?: Attributes): void;
};

/**
 * Registers the fleet metrics of `orchestrator` on `meter`; returns the function that unregisters them. The queue's
 * (`statechart_agent.queue.*`) are observed only with a dispatch that reports its backlog, from a read shared for
 * about a second; a read that fails observes nothing for them that time (the rest are observed all the same).
 */
export function otelMetrics(meter: Meter, orchestrator: Orchestrator, attributes: Attributes = {}): () => void {
  const instruments = Object.entries(FLEET_METRICS).map(([name, spec]: [string, MetricSpec]) => {
    const options = { unit: spec.unit, description: spec.description };
    const instrument: ObservableGauge | ObservableCounter =
      spec.kind === 'gauge' ? meter.createObservableGauge(name, options) : meter.createObservableCounter(name, options);
    return { instrument, spec };
  });
  const observe = (
    result: Observer,
    instrument: ObservableGauge | ObservableCounter,
    value: ReturnType<MetricSpec['read']>,
    key: 'reason' | 'state',
  ) => {
    if (typeof value === 'number') return result.observe(instrument, value, attributes);
    for (const [name, count] of Object.entries(value))
      result.observe(instrument, count, {
        ...attributes,
        [key]: key === 'reason' ? REASONS[name as keyof typeof REASONS] : name,
      });
  };
  const byStats = instruments.filter((i) => i.spec.source === 'stats');
  const byQueue = instruments.filter((i) => i.spec.source === 'queue');
  const fromStats = (result: Observer) => {
    const stats = orchestrator.stats();
    for (const { instrument, spec } of byStats) observe(result, instrument, (spec.read as ReadStats)(stats), 'reason');
  };
  // A callback of its own, so that a queue read that fails or hangs (the SDK drops a callback's points when it
  // times out) costs only the queue's points.
  const fromQueue = async (result: Observer) => {
    const backlog = await withinMs(orchestrator.queueStats(), QUEUE_READ_TIMEOUT_MS).catch(() => null);
    if (!backlog) return;
    for (const { instrument, spec } of byQueue) observe(result, instrument, (spec.read as ReadQueue)(backlog), 'state');
  };
  const statsObservables = byStats.map((i) => i.instrument);
  const queueObservables = byQueue.map((i) => i.instrument);
  meter.addBatchObservableCallback(fromStats, statsObservables);
  meter.addBatchObservableCallback(fromQueue, queueObservables);
  return () => {
    meter.removeBatchObservableCallback(fromStats, statsObservables);
    meter.removeBatchObservableCallback(fromQueue, queueObservables);
  };
}

/** How long a collection waits for the queue's backlog before it reports nothing for it (ms). */
const QUEUE_READ_TIMEOUT_MS = 2_000;

/** `promise`, or a rejection after `ms`. */
function withinMs<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
