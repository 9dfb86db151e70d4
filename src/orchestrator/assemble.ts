/**
 * The orchestrator's parts, wired once from its options: settings, the tool registry and privacy, the table of live
 * tasks and their leases, host events, the local or dispatched mode, the expiry sweeper and the records (erasure,
 * retention). The facade (orchestrator.ts) only routes calls to them.
 */
import { randomUUID } from 'node:crypto';
import {
  type ModelReservation,
  type Policy,
  type Provenance,
  modelReservationSchema,
  provenanceSchema,
} from '../../machines/context.js';
import { systemClock } from '../clock.js';
import { HostRequestError } from '../errors.js';
import { modelProvenance } from '../model/agentModel.js';
import { Privacy } from '../privacy/privacy.js';
import { ToolRegistry } from '../runtime/toolRegistry.js';
import { NO_TRACING } from '../runtime/tracing.js';
import { MemoryStore } from '../store/memoryStore.js';
import type { TaskSummary } from '../store/summary.js';
import type { TaskStore } from '../store/taskStore.js';
import { Capacity } from './capacity.js';
import { chooseTaskMode } from './chooseTaskMode.js';
import { driveHere } from './driveHere.js';
import type { ModelTextBus } from '../runtime/modelText.js';
import { ExpirySweeper } from './expirySweeper.js';
import { HookDispatcher, SILENT_LOGGER, type Logger } from './hooks.js';
import { HostEvents } from './hostEvents.js';
import type { LiveTasks } from './liveTasks.js';
import { type OrchestratorOptions, type Settings, parseOrThrow, resolveSettings } from './options.js';
import { OrphanSweeper } from './orphanSweeper.js';
import { Records } from './records.js';
import { takeOverOrphans } from './recovery.js';
import { Subtasks } from './subtasks.js';
import { safeErrorText } from '../../machines/lib/text.js';
import type { TaskMode } from './taskMode.js';

export interface OrchestratorParts {
  settings: Settings;
  /** What the model reserves per turn, checked once: it is persisted with every task. */
  reservation: ModelReservation;
  /** The model and prompt tasks start with (each model turn updates it with the version the provider reports). */
  provenance: Provenance;
  /** The host policy every new task is started with, with every loosening recorded. */
  policy: Policy;
  registry: ToolRegistry;
  store: TaskStore;
  /** The orchestrator made its store (none given), so it closes it. */
  ownsStore: boolean;
  logger: Logger;
  live: LiveTasks;
  capacity: Capacity;
  events: HostEvents;
  /** Local or dispatched, chosen once here: what the calls that differ between the two do (`taskMode.ts`). */
  mode: TaskMode;
  sweeper: ExpirySweeper;
  /** On a store with leases, in local mode, unless turned off: takes over the tasks of dead processes. */
  orphans: OrphanSweeper | null;
  records: Records;
  /** Sub-tasks: starting children, taking their outcomes back to their parents, cancelling them with their parent. */
  subtasks: Subtasks;
  /** Tasks taken over here so far (by `recover()` or the orphan sweep), and quarantined on the way. */
  recoveries: { resumed: number; quarantined: number };
}

export function assembleOrchestrator(
  options: OrchestratorOptions,
  savedListeners: Set<(summary: TaskSummary) => void>,
  isClosed: () => boolean,
  modelText: ModelTextBus,
): OrchestratorParts {
  const settings = resolveSettings(options, systemClock, () => `task_${randomUUID()}`);
  const reservation = parseOrThrow(
    modelReservationSchema,
    options.model.reservation ?? { tokens: 4_000, costMicros: 0 },
    'model.reservation',
  );
  const provenance = parseOrThrow(provenanceSchema, modelProvenance(options.model), 'model');
  const privacy = new Privacy(options.privacy);
  // Every loosening a task starts under is recorded with it: the orchestrator's and the privacy options' alike.
  const policy = { ...settings.policy, loosened: [...settings.policy.loosened, ...privacy.loosened] };
  if (options.offer !== undefined && typeof options.offer !== 'function')
    throw new HostRequestError(
      'invalid_request',
      'options.offer must be a function (facts) => the tool names offered this turn',
    );
  const registry = new ToolRegistry(options.tools, privacy, options.offer, options.workflows ?? []);
  // A session the host refreshes before a write is waited for: every re-check then runs in its invoked state.
  registry.refreshesSession = options.refreshPrincipal !== undefined;
  // A child's outcome is taken to its parent by the process that drives both: not across a dispatch queue (yet).
  if (options.dispatch && registry.hasSubtasks())
    throw new HostRequestError(
      'invalid_request',
      'sub-task tools (defineSubtask) need tasks driven in this process; they are not supported with a dispatch yet',
    );
  const store = options.store ?? new MemoryStore();
  const { clock } = settings;
  const logger = options.logger ?? SILENT_LOGGER;
  const hooks = new HookDispatcher(options.hooks ?? {}, logger);
  const tracing = options.tracing ?? NO_TRACING;
  const live: LiveTasks = driveHere({
    options,
    settings,
    registry,
    store,
    hooks,
    logger,
    tracing,
    savedListeners,
    modelText,
    live: () => live,
  });
  const capacity = new Capacity(settings.capacity, (tenantId) => live.running(tenantId));
  const events = new HostEvents(live, registry, settings.adminScope, policy.version);
  const mode = chooseTaskMode({ options, registry, store, live, events, capacity, clock, logger });
  const subtasks = new Subtasks({
    store,
    live,
    registry,
    settings,
    logger,
    create: (input) => mode.start(input),
    cancel: (taskId, by, reason) =>
      events.deliver(taskId, by, { type: 'task.cancelled', at: clock.now(), reason, by: by.userId }),
  });
  registry.subtaskStarter = subtasks;
  if (registry.hasSubtasks()) savedListeners.add((summary) => subtasks.saved(summary));
  const sweeper = new ExpirySweeper(store, live, clock, settings.expirySweepMs, logger, mode.sweepHandoff);
  const recoveries = { resumed: 0, quarantined: 0 };
  const orphanSweepMs = settings.orphanSweepMs ?? settings.lease.ttlMs;
  const orphans =
    store.leases && !mode.queue && orphanSweepMs > 0
      ? new OrphanSweeper(
          () => takeOverOrphans(store, live, undefined, { onlyOrphans: true }),
          orphanSweepMs,
          settings.random,
          logger,
          (report) => {
            recoveries.resumed += report.resumed.length;
            recoveries.quarantined += report.quarantined.length;
            try {
              options.hooks?.recovered?.({ report });
            } catch (error) {
              logger.warn({ err: safeErrorText(error) }, 'the recovered hook threw');
            }
          },
        )
      : null;
  const records = new Records({
    store,
    live,
    clock,
    privacy: registry.privacy,
    dispatched: mode.queue,
    isClosed,
  });
  return {
    settings,
    reservation,
    provenance,
    policy,
    registry,
    store,
    ownsStore: options.store === undefined,
    logger,
    live,
    capacity,
    events,
    mode,
    sweeper,
    orphans,
    records,
    subtasks,
    recoveries,
  };
}
