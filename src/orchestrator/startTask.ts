/**
 * Starting a task, in two steps: the host's request checked and turned into the task's input (the mandate against
 * its kind, the goal sealed, the whole against the schema it is stored with), then the task created under its lease
 * once the id is known to be free, holding a capacity slot until it is live.
 */
import { type AgentInput, type ModelReservation, type Policy, type Provenance, agentInputSchema } from '../../machines/context.js';
import { CorruptTaskError, HostRequestError, TaskExistsError, UnsupportedVersionError } from '../errors.js';
import { checkMandate, moneyUnder } from '../mandate.js';
import type { ToolRegistry } from '../runtime/toolRegistry.js';
import type { TaskStore } from '../store/taskStore.js';
import type { Capacity } from './capacity.js';
import type { LiveTasks } from './liveTasks.js';
import { type Settings, type StartTaskRequest, parseOrThrow, startRequestSchema } from './options.js';
import { type TaskStatus, statusOfLive } from './status.js';

export interface InputDeps {
  settings: Settings;
  registry: ToolRegistry;
  policy: Policy;
  reservation: ModelReservation;
  provenance: Provenance;
}

/** The task's input for `request`; throws HostRequestError for a request it cannot take. */
export function taskInput(request: StartTaskRequest, deps: InputDeps): AgentInput {
  const { settings, registry } = deps;
  const { principal, goal, limits, success, mandate, taskId: requestedId } = parseOrThrow(startRequestSchema, request, 'start');
  if (success && !registry.get(success.tool)) {
    throw new HostRequestError('invalid_request', `start: success criterion names unknown tool ${success.tool}`);
  }
  // Checked against the schema of its kind, and stored as plain JSON: the task can never see it change.
  const checkedMandate = mandate ? checkMandate(settings.mandates, mandate) : null;
  const taskId = parseOrThrow(startRequestSchema.shape.taskId, requestedId ?? settings.newTaskId(), 'taskId')!;
  const startedAt = settings.clock.now();
  // Checked whole against the schema it is stored with, so that a task this accepts is one the store reads back.
  return parseOrThrow(
    agentInputSchema,
    {
      taskId,
      // Sensitive text is sealed before the task (and anything that records it) sees it.
      goal: registry.privacy.text({ taskId, tenantId: principal.tenantId, startedAt }, goal),
      principal,
      mandate: checkedMandate,
      catalog: registry.catalog(),
      policy: deps.policy,
      limits: { ...settings.limits, ...limits, money: moneyUnder(settings.mandates, checkedMandate, limits?.money, settings.limits.money) },
      modelReservation: deps.reservation,
      provenance: deps.provenance,
      success: success ?? null,
      startedAt,
    },
    'start',
  );
}

/** Creates the task of `input` and lets it run; resolves once its first state is saved. */
export function createTask(input: AgentInput, deps: { live: LiveTasks; store: TaskStore; capacity: Capacity }): Promise<TaskStatus> {
  const { live, store, capacity } = deps;
  const { taskId } = input;
  // A slot is held from here until the task is live (counted as running) or the start failed.
  const release = capacity.hold(input.principal.tenantId);
  return live
    .exclusive(taskId, async () => {
      if (live.has(taskId)) throw new TaskExistsError(taskId);
      await live.leases.take(taskId);
      try {
        // Unreadable data under this id still means the id is taken; a store that cannot answer is not a clash.
        const existing = await store.load(taskId).catch((error: unknown) => {
          if (error instanceof CorruptTaskError || error instanceof UnsupportedVersionError) return true;
          throw error;
        });
        if (existing) throw new TaskExistsError(taskId);
      } catch (error) {
        await live.releaseLease(taskId);
        throw error;
      }
      let task;
      try {
        task = live.create(input);
      } catch (error) {
        // Closed, or the lease found lost, while the start waited: nothing was stored, and the lease goes.
        await live.releaseLease(taskId);
        throw error;
      }
      release();
      await task.barrier();
      return statusOfLive(task);
    })
    .finally(release);
}
