/**
 * The local mode (no dispatch): every API call drives the task's actor in this process. A start creates and runs
 * the task here, a resume restores it here under its lease, recovery takes over running tasks here, and the expiry
 * sweep delivers due deadlines here. There is no queue, so there are no workers to make, pause or stop.
 */
import type { AgentInput } from '../../machines/context.js';
import { HostRequestError, TaskNotFoundError } from '../errors.js';
import type { TaskStore } from '../store/taskStore.js';
import type { Capacity } from './capacity.js';
import type { DispatchWorker } from './dispatch.js';
import type { ExpirySweeper } from './expirySweeper.js';
import type { LiveTasks } from './liveTasks.js';
import { type RecoveryReport, recover } from './recovery.js';
import { createTask } from './startTask.js';
import { type TaskStatus, statusFrom, statusOfLive } from './status.js';
import type { TaskMode } from './taskMode.js';

export class LocalMode implements TaskMode {
  readonly sweepHandoff = undefined;
  readonly queue = null;
  private readonly store: TaskStore;
  private readonly live: LiveTasks;
  private readonly capacity: Capacity;

  constructor(deps: { store: TaskStore; live: LiveTasks; capacity: Capacity }) {
    this.store = deps.store;
    this.live = deps.live;
    this.capacity = deps.capacity;
  }

  start(input: AgentInput): Promise<TaskStatus> {
    return createTask(input, { live: this.live, store: this.store, capacity: this.capacity });
  }

  /** What is stored: the task waits, has finished, or stopped in a process that died. */
  async statusNotHere(taskId: string): Promise<TaskStatus> {
    const envelope = await this.store.load(taskId);
    if (!envelope) throw new TaskNotFoundError(taskId);
    return statusFrom(envelope.snapshot.context, envelope.summary);
  }

  /** Not driven here, so nothing to wait for: its stored status (use `resume` to drive an interrupted one). */
  async settledNotHere(taskId: string): Promise<TaskStatus> {
    // Stopped here by a failure (a machine that threw, a lost lease, a store that failed): say so.
    const failure = this.live.failureOf(taskId);
    if (failure) throw failure;
    return this.statusNotHere(taskId);
  }

  resume(taskId: string): Promise<TaskStatus> {
    return this.live.exclusive(taskId, async () => {
      const task = await this.live.hydrate(taskId);
      this.live.releaseIfSettled(task);
      return statusOfLive(task);
    });
  }

  /** Every running task whose lease is free is taken over here (the limit applies to the dispatched sweep only). */
  recover(sweeper: ExpirySweeper, options: { concurrency?: number }): Promise<RecoveryReport> {
    return recover(this.store, this.live, sweeper, options.concurrency);
  }

  createWorker(): DispatchWorker {
    throw new HostRequestError(
      'invalid_request',
      'createWorker needs the dispatch option (bullmqDispatch from statechart-agent/bullmq)',
    );
  }

  /** Nothing to pause: the tasks running here are waited for by the drain itself. */
  pause(): Promise<void> {
    return Promise.resolve();
  }

  /** No workers to stop: the tasks running here are stopped by the close itself. */
  stopTaking(): Promise<void> {
    return Promise.resolve();
  }
}
