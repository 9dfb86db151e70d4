/**
 * What drives tasks in this process, built from the orchestrator's options: the runtime actors (model, tools,
 * lookups, with their tracing, rate limits and timeouts) and the tools, routed to the process's one agent machine
 * around every run of a task (`sharedMachine.ts`), and the table of live tasks with its leases, whose saves reach the
 * host's listeners, hooks and logger.
 */
import { safeErrorText } from '../../machines/lib/text.js';
import { AgentError, HostRequestError } from '../errors.js';
import { createRuntimeActors } from '../runtime/actors/index.js';
import type { ModelTextBus } from '../runtime/modelText.js';
import { RateLimits } from '../runtime/rateLimits.js';
import { sharedAgentMachine } from '../runtime/sharedMachine.js';
import type { ToolRegistry } from '../runtime/toolRegistry.js';
import type { Tracing } from '../runtime/tracing.js';
import type { TaskSummary } from '../store/summary.js';
import type { TaskStore } from '../store/taskStore.js';
import type { HookDispatcher, Logger } from './hooks.js';
import { LiveTasks } from './liveTasks.js';
import type { OrchestratorOptions, Settings } from './options.js';
import { TenantCap } from './tenantCap.js';

export interface DriveHereDeps {
  options: OrchestratorOptions;
  settings: Settings;
  registry: ToolRegistry;
  store: TaskStore;
  hooks: HookDispatcher;
  logger: Logger;
  tracing: Tracing;
  savedListeners: ReadonlySet<(summary: TaskSummary) => void>;
  /** Where streamed model text goes for live views (`Orchestrator.watchModelText`). */
  modelText: ModelTextBus;
  /** The table being built (the actors find their task in it). */
  live: () => LiveTasks;
}

export function driveHere(deps: DriveHereDeps): LiveTasks {
  const { options, settings, registry, hooks, logger, tracing } = deps;
  const { clock, random, modelTimeoutMs, backoff } = settings;
  const actors = createRuntimeActors({
    tracing,
    registry,
    model: options.model,
    clock,
    random,
    modelTimeoutMs,
    backoff,
    rateLimits: new RateLimits(options.rateLimits),
    refreshPrincipal: options.refreshPrincipal,
    modelText: deps.modelText,
    ...(settings.compaction.summariser ? { summariser: settings.compaction.summariser } : {}),
    task: (taskId) => {
      const task = deps.live().get(taskId);
      if (!task) throw new AgentError('task_not_live', `task ${taskId} is not running in this process`);
      return task;
    },
  });
  return new LiveTasks({
    tenantCap: tenantCapOf(deps.store, settings, logger),
    store: deps.store,
    // One machine per process: this orchestrator's toolkit and actors are routed to it around every run of a task.
    machine: sharedAgentMachine(),
    route: { toolkit: registry.toolkit, actors },
    clock,
    random,
    inspect: options.inspect,
    saveRetries: settings.saveRetries,
    lease: settings.lease,
    tracing,
    onSaved: (summary, saved) => {
      for (const listener of deps.savedListeners) hooks.call('onSaved', summary.taskId, () => listener(summary));
      hooks.saved(summary, saved);
    },
    onListenerError: (error) => logger.warn({ err: safeErrorText(error) }, 'a save listener threw; the task goes on'),
    onObserverError: (taskId, error) =>
      logger.warn(
        { taskId, err: safeErrorText(error) },
        'an inspection observer threw; the task goes on (its later throws in this task are not reported)',
      ),
    onTaskFailure: (taskId, error) =>
      logger.error(
        { taskId, code: (error as { code?: unknown }).code ?? null, err: safeErrorText(error) },
        'this process stopped driving the task',
      ),
    onTakenBack: (taskId) => logger.warn({ taskId }, 'this process took the lost lease back and drives the task again'),
    catalogDifferences: (catalog) => registry.differences(catalog),
    onCatalogMismatch: (error) =>
      logger.warn(
        { taskId: error.taskId, code: error.code, tools: error.differences.map((d) => `${d.tool}: ${d.problem}`) },
        'this process does not have the tools the task was started with; it is left to a process that has them',
      ),
  });
}

/** The cap across processes, if the options set one; a store that cannot count slots for every process is refused. */
function tenantCapOf(store: TaskStore, settings: Settings, logger: Logger): TenantCap | null {
  const { tenantCap } = settings.capacity;
  if (!Number.isFinite(tenantCap)) return null;
  if (!store.tenantSlots) {
    throw new HostRequestError(
      'invalid_request',
      `capacity.tenantCap needs a store that counts tenant slots for every process (RedisStore, or MemoryStore within one process); the ${store.kind} store does not`,
    );
  }
  return new TenantCap(store.tenantSlots, tenantCap, settings.lease, logger);
}
