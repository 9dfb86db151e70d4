/**
 * The dispatched mode (the `dispatch` option): no API call drives a task in the process that received it. A start
 * records a start job, a resume and recovery record wake jobs, the expiry sweep hands due tasks to the queue, and
 * status and settled read (and wait on) what the workers saved. The work itself is `Dispatched` (`dispatched.ts`);
 * this is how the orchestrator builds it and what of it the facade calls.
 */
import type { AgentInput } from '../../machines/context.js';
import type { Dispatch, DispatchWorker, DispatchWorkerOptions } from './dispatch.js';
import { Dispatched } from './dispatched.js';
import type { ExpirySweeper } from './expirySweeper.js';
import type { RecoveryReport } from './recovery.js';
import { createTask } from './startTask.js';
import type { TaskStatus } from './status.js';
import type { SweepHandoff, TaskMode, TaskModeDeps } from './taskMode.js';

export class DispatchedMode implements TaskMode {
  readonly queue: Dispatched;
  readonly sweepHandoff: SweepHandoff;

  /** Throws HostRequestError when the store or the sealer cannot serve several processes (see `Dispatched`). */
  constructor(dispatch: Dispatch, deps: TaskModeDeps) {
    const { options, registry, store, live, capacity } = deps;
    const queue = new Dispatched({
      dispatch,
      store,
      live,
      events: deps.events,
      clock: deps.clock,
      logger: deps.logger,
      // A worker of this process creates the task of a start job as a local start does, within this capacity.
      create: (input) => createTask(input, { live, store, capacity }),
      sealing: {
        // The default redactors' values are opened by no tool unless one declares them (counted here): they alone
        // need no durable sealer.
        needed:
          registry.privacy.hasHostRedactors ||
          registry.sensitiveArgumentNames().length > 0 ||
          options.tools.some((tool) => (tool.sensitive?.output?.length ?? 0) > 0),
        durable: registry.privacy.sealer.kind === 'keyed',
      },
    });
    this.queue = queue;
    this.sweepHandoff = { wake: queue.wake, also: () => queue.announceStranded() };
  }

  start(input: AgentInput): Promise<TaskStatus> {
    return this.queue.start(input);
  }

  /** What the workers saved, or the first status of a task whose start job is still queued. */
  async statusNotHere(taskId: string): Promise<TaskStatus> {
    return (await this.queue.current(taskId)).status;
  }

  /** Waits for what the workers save until the task waits or ends (or `timeoutMs` passes). */
  settledNotHere(taskId: string, timeoutMs: number): Promise<TaskStatus> {
    return this.queue.settled(taskId, timeoutMs);
  }

  resume(taskId: string): Promise<TaskStatus> {
    return this.queue.resume(taskId);
  }

  recover(sweeper: ExpirySweeper, options: { limit?: number }): Promise<RecoveryReport> {
    return this.queue.recover(sweeper, options.limit);
  }

  createWorker(options: DispatchWorkerOptions): DispatchWorker {
    return this.queue.createWorker(options);
  }

  pause(): Promise<void> {
    return this.queue.pause();
  }

  stopTaking(): Promise<void> {
    return this.queue.stopTaking();
  }
}
