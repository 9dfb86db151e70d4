/** `statechart-agent/otel`: tracing on OpenTelemetry through `@opentelemetry/api` (an optional peer). */
export { otelTracing } from './telemetry/otelTracing.js';
export type { TraceAttributes, Tracing } from './runtime/tracing.js';
