/**
 * Tracing on OpenTelemetry, through `@opentelemetry/api` only (the host brings its SDK and exporter): a span per
 * run of a task (from when it starts running here until it waits or ends), a child span per model turn (with the
 * GenAI semantic conventions' `gen_ai.*` attributes and token usage), per tool call and per write lookup. The work
 * of a child span runs with it as the active span, so a tool's own instrumentation (an HTTP client, a database
 * driver) joins the trace. Gate decisions, confirmations, reviews and lookups are events on the run's span.
 *
 * @example
 * import { trace } from '@opentelemetry/api';
 * import { otelTracing } from 'statechart-agent/otel';
 * const orchestrator = createOrchestrator({ tools, model, tracing: otelTracing(trace.getTracer('bookings')) });
 */
import type { Attributes, Span, Tracer } from '@opentelemetry/api';
import type { AuditEntry } from '../../machines/journal.js';
import { otelApi } from '../peers/otelApi.js';
import type { TraceAttributes, Tracing } from '../runtime/tracing.js';

const { SpanKind, SpanStatusCode, context, trace } = otelApi;

export function otelTracing(tracer: Tracer): Tracing {
  const runs = new Map<string, Span>();
  const parent = (taskId: string) => {
    const run = runs.get(taskId);
    return run ? trace.setSpan(context.active(), run) : context.active();
  };
  return {
    span(taskId, name, attributes, work, describe) {
      const kind = name.startsWith('chat ') ? SpanKind.CLIENT : SpanKind.INTERNAL;
      return tracer.startActiveSpan(
        name,
        { kind, attributes: { 'statechart_agent.task_id': taskId, ...attributes } },
        parent(taskId),
        async (span) => {
          try {
            const result = await work();
            const described = describe?.(result);
            if (described?.attributes) span.setAttributes(described.attributes);
            if (described?.error) span.setStatus({ code: SpanStatusCode.ERROR, message: described.error });
            return result;
          } catch (error) {
            span.recordException(error instanceof Error ? error : String(error));
            span.setStatus({
              code: SpanStatusCode.ERROR,
              message: error instanceof Error ? error.message : String(error),
            });
            throw error;
          } finally {
            span.end();
          }
        },
      );
    },
    runStarted(taskId, attributes) {
      if (!runs.has(taskId)) runs.set(taskId, tracer.startSpan('task run', { attributes }, context.active()));
    },
    recorded(taskId, entries) {
      const run = runs.get(taskId);
      if (!run) return;
      for (const entry of entries) {
        const event = eventOf(entry);
        if (event) run.addEvent(event.name, event.attributes, entry.at);
      }
    },
    runEnded(taskId, attributes, error) {
      const run = runs.get(taskId);
      if (!run) return;
      runs.delete(taskId);
      run.setAttributes(attributes);
      if (error) run.setStatus({ code: SpanStatusCode.ERROR, message: error });
      run.end();
    },
  };
}

/** The audit entries a run's span shows as events: what the host decided, not every step. */
function eventOf(entry: AuditEntry): { name: string; attributes: Attributes } | null {
  const call = (e: { callId: string | null; tool: string | null }): TraceAttributes => ({
    ...(e.callId ? { 'statechart_agent.call.id': e.callId } : {}),
    ...(e.tool ? { 'statechart_agent.tool.name': e.tool } : {}),
  });
  switch (entry.kind) {
    case 'gate':
      return {
        name: `gate ${entry.gate} ${entry.decision}`,
        attributes: {
          ...call(entry),
          'statechart_agent.gate': entry.gate,
          'statechart_agent.decision': entry.decision,
          ...(entry.code ? { 'statechart_agent.code': entry.code } : {}),
        },
      };
    case 'confirmation':
      return {
        name: `confirmation ${entry.action}`,
        attributes: {
          ...call(entry),
          'statechart_agent.confirmation.id': entry.confirmationId,
          ...(entry.userId ? { 'statechart_agent.user_id': entry.userId } : {}),
          ...(entry.code ? { 'statechart_agent.code': entry.code } : {}),
        },
      };
    case 'review':
      return { name: `review ${entry.action}`, attributes: { ...call(entry), 'statechart_agent.code': entry.code } };
    case 'write_lookup':
      return {
        name: `write lookup ${entry.result}`,
        attributes: { ...call(entry), 'statechart_agent.idempotency_key': entry.idempotencyKey },
      };
    case 'task_stopped':
      return { name: `task ${entry.status}`, attributes: { 'statechart_agent.code': entry.reason.code } };
    case 'compensation_started':
      return {
        name: 'compensation started',
        attributes: {
          'statechart_agent.code': entry.reason.code,
          'statechart_agent.writes': entry.compensations.length,
        },
      };
    case 'compensation_finished':
      return {
        name: 'compensation finished',
        attributes: {
          'statechart_agent.writes': entry.compensations.length,
          'statechart_agent.compensated': entry.compensations.filter((c) => c.result === 'compensated').length,
        },
      };
    default:
      return null;
  }
}
