/**
 * Typed lifecycle hooks and the logger. Hooks fire after the save that made an event durable, in journal order, so
 * a hook never sees what a crash could still undo. A hook that throws is logged and changes nothing: the task goes
 * on. The library writes nothing to the console; what it has to say goes to the host's logger (pino-compatible:
 * `logger.warn({ taskId, err }, 'message')`), silent by default.
 */
import type { RecoveryReport } from './recoveryReport.js';
import type { AuditEntry } from '../../machines/journal.js';
import type { SavedBatch } from '../runtime/liveTask.js';
import type { TaskState, TaskSummary } from '../store/summary.js';
import { safeErrorText } from '../../machines/lib/text.js';

type Entry<K extends AuditEntry['kind']> = Extract<AuditEntry, { kind: K }>;

/** A pino-compatible logger: each method takes an object of fields, then a message. Debug and info are optional. */
export interface Logger {
  debug?(fields: object, message?: string): void;
  info?(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  error(fields: object, message?: string): void;
}

export const SILENT_LOGGER: Logger = { warn() {}, error() {} };

export interface TransitionEvent {
  taskId: string;
  /** The saved state before (null for the task's first save). */
  from: { state: TaskState; stateValue: string } | null;
  to: { state: TaskState; stateValue: string };
  revision: number;
}

export interface TaskHooks {
  /**
   * After each save that changed the machine state. A task is saved when something needs it durable (a write, a
   * model turn, a host event) and when it comes to rest, so the states a round passes through in memory are not all
   * reported (the inspection stream has every microstep).
   */
  transition?(event: TransitionEvent): void;
  /** A tool call started (each attempt of a read, each send of a write), with its redacted arguments. */
  toolStarted?(event: { taskId: string; entry: Entry<'tool_started'> }): void;
  /** A tool call ended, with its code (`ok` or why not) and duration. */
  toolFinished?(event: { taskId: string; entry: Entry<'tool_finished'> }): void;
  /** A call waits for a confirmation (or an approver). */
  confirmationRequested?(event: { taskId: string; entry: Entry<'confirmation'> }): void;
  /** A confirmation was approved, granted, refused, rejected or expired. */
  confirmationDecided?(event: { taskId: string; entry: Entry<'confirmation'> }): void;
  /** The task stopped running: it waits for someone (a human, a reviewer, the model's return) or it ended. */
  settled?(event: { taskId: string; summary: TaskSummary }): void;
  /** The orphan sweep took over tasks whose process died (or quarantined ones it could not restore). */
  recovered?(event: { report: RecoveryReport }): void;
}

export class HookDispatcher {
  constructor(
    private readonly hooks: TaskHooks,
    private readonly logger: Logger,
  ) {}

  saved(summary: TaskSummary, saved: SavedBatch): void {
    const { taskId } = summary;
    for (const entry of saved.audit) {
      if (entry.kind === 'tool_started')
        this.call('toolStarted', taskId, () => this.hooks.toolStarted?.({ taskId, entry }));
      else if (entry.kind === 'tool_finished')
        this.call('toolFinished', taskId, () => this.hooks.toolFinished?.({ taskId, entry }));
      else if (entry.kind === 'confirmation') {
        if (entry.action === 'requested')
          this.call('confirmationRequested', taskId, () => this.hooks.confirmationRequested?.({ taskId, entry }));
        else this.call('confirmationDecided', taskId, () => this.hooks.confirmationDecided?.({ taskId, entry }));
      }
    }
    const previous = saved.previous;
    if (previous === null || previous.stateValue !== summary.stateValue) {
      const from = previous && { state: previous.state, stateValue: previous.stateValue };
      this.call('transition', taskId, () =>
        this.hooks.transition?.({
          taskId,
          from,
          to: { state: summary.state, stateValue: summary.stateValue },
          revision: summary.revision,
        }),
      );
    }
    if (
      summary.state !== 'running' &&
      (previous === null || previous.state !== summary.state || previous.stateValue !== summary.stateValue)
    ) {
      this.call('settled', taskId, () => this.hooks.settled?.({ taskId, summary }));
    }
  }

  /** Runs a host callback; what it throws is logged, never passed on to the task. */
  call(name: string, taskId: string, run: () => void): void {
    try {
      run();
    } catch (error) {
      this.logger.warn({ taskId, hook: name, err: safeErrorText(error) }, `the ${name} hook threw; the task goes on`);
    }
  }
}
