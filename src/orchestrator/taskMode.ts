/**
 * The one seam between the orchestrator's two ways of running tasks, chosen once when it is constructed: locally
 * (`localMode.ts`: the API call drives the task's actor in this process) or dispatched (`dispatchedMode.ts`: the API
 * call records a job or an inbox event, and a worker, here or in another process, drives the task). The facade
 * (`orchestrator.ts`) calls the chosen mode and never asks which one it has.
 *
 * What both modes share stays in the facade: a task live in this process (a worker of this process may drive one
 * in the dispatched mode too) answers `status` and `settled` itself; the modes answer for the others.
 */
import type { AgentInput } from '../../machines/context.js';
import type { Clock } from '../clock.js';
import type { ToolRegistry } from '../runtime/toolRegistry.js';
import type { TaskStore } from '../store/taskStore.js';
import type { Capacity } from './capacity.js';
import type { DispatchWorker, DispatchWorkerOptions } from './dispatch.js';
import type { Dispatched } from './dispatched.js';
import type { ExpirySweeper } from './expirySweeper.js';
import type { Logger } from './hooks.js';
import type { HostEvents } from './hostEvents.js';
import type { LiveTasks } from './liveTasks.js';
import type { OrchestratorOptions } from './options.js';
import type { RecoveryReport } from './recovery.js';
import type { TaskStatus } from './status.js';

export interface TaskMode {
  /** Creates the task from its input and lets it run, or records its start job. Resolves with its first status. */
  start(input: AgentInput): Promise<TaskStatus>;
  /** The status of a task that is not live in this process. */
  statusNotHere(taskId: string): Promise<TaskStatus>;
  /** Resolves when a task that is not live in this process waits for a human or has finished (or throws why not). */
  settledNotHere(taskId: string, timeoutMs: number): Promise<TaskStatus>;
  /** Lets a persisted task continue: restored here, or handed to a worker. */
  resume(taskId: string): Promise<TaskStatus>;
  /** Takes over tasks left running by a dead process, then expires due deadlines (through `sweeper`). */
  recover(sweeper: ExpirySweeper, options: { limit?: number; concurrency?: number }): Promise<RecoveryReport>;
  /** A consumer of the dispatch in this process (the local mode refuses: it has no queue). */
  createWorker(options: DispatchWorkerOptions): DispatchWorker;
  /** Draining: this process stops taking new work from a queue (the work in hand goes on). */
  pause(): Promise<void>;
  /** Closing: this process's workers stop taking jobs; resolves once the jobs in hand ended. */
  stopTaking(): Promise<void>;
  /** Where the expiry sweep hands due tasks instead of driving them here (undefined: it drives them here). */
  readonly sweepHandoff: SweepHandoff | undefined;
  /** The queued start jobs an erasure must find too (`records.ts`); null without a dispatch. */
  readonly queue: Dispatched | null;
}

/** Due tasks handed to the queue (a wake job each), and what else each sweep does (re-announce stranded events). */
export interface SweepHandoff {
  wake: (taskId: string, at: number) => Promise<void>;
  also: () => Promise<unknown>;
}

/** What a mode is built from: the orchestrator's options and the pieces its constructor made before. */
export interface TaskModeDeps {
  options: OrchestratorOptions;
  registry: ToolRegistry;
  store: TaskStore;
  live: LiveTasks;
  events: HostEvents;
  capacity: Capacity;
  /** The task clock (deadlines). */
  clock: Clock;
  logger: Logger;
}
