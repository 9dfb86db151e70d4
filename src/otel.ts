/** `statechart-agent/otel`: tracing and fleet metrics on OpenTelemetry through `@opentelemetry/api` (an optional peer). */
export { otelTracing } from './telemetry/otelTracing.js';
export type { TraceAttributes, Tracing } from './runtime/tracing.js';
export { FLEET_METRICS, otelMetrics } from './telemetry/otelMetrics.js';
export type { OrchestratorStats } from './orchestrator/orchestrator.js';
