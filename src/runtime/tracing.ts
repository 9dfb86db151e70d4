/**
 * Where the runtime reports its work for tracing: a span around each model turn, tool call and write lookup (the
 * work runs inside it, so a tool sees it as the active span), a span per run of a task (from when it starts
 * running until it waits or ends), and the task's gate decisions and confirmations as events on that run. The
 * default does nothing; `statechart-agent/otel` implements it on `@opentelemetry/api`, so this entry loads no
 * tracing library.
 */
import type { AuditEntry } from '../../machines/journal.js';

export type TraceAttributes = Record<string, string | number | boolean>;

export interface Tracing {
  /**
   * Runs `work` inside a span named `name`, a child of the task's current run. `describe` reads the result into
   * attributes and, for a failure the work reports as data, an error status.
   */
  span<T>(
    taskId: string,
    name: string,
    attributes: TraceAttributes,
    work: () => Promise<T>,
    describe?: (result: T) => { attributes?: TraceAttributes; error?: string },
  ): Promise<T>;
  /** The task started running here (idempotent while a run is open). */
  runStarted(taskId: string, attributes: TraceAttributes): void;
  /** Audit entries a save made durable, for the run's events. */
  recorded(taskId: string, entries: readonly AuditEntry[]): void;
  /** The run ended: the task waits for someone, ended, or stopped being driven here (`error`). */
  runEnded(taskId: string, attributes: TraceAttributes, error?: string): void;
}

export const NO_TRACING: Tracing = {
  span: (_taskId, _name, _attributes, work) => work(),
  runStarted() {},
  recorded() {},
  runEnded() {},
};
