/**
 * Starting a task, in two steps: the host's request checked and turned into the task's input (the mandate against
 * its kind, the goal sealed, the whole against the schema it is stored with), then the task created under its lease
 * once the id is known to be free, holding a capacity slot until it is live.
 */
import {
  type AgentInput,
  type ModelReservation,
  type Policy,
  type Provenance,
  agentInputSchema,
} from '../../machines/context.js';
import {
  CapacityError,
  CorruptTaskError,
  FencedOutError,
  HostRequestError,
  TaskExistsError,
  UnsupportedVersionError,
} from '../errors.js';
import { checkMandate, moneyUnder } from '../mandate.js';
import type { ToolRegistry } from '../runtime/toolRegistry.js';
import { subtaskRulesOf } from '../subtask.js';
import { type TaskStore, claimsMandates } from '../store/taskStore.js';
import type { Capacity, StartSlot } from './capacity.js';
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
  const {
    principal,
    goal,
    limits,
    success,
    mandate,
    taskId: requestedId,
    workflow,
  } = parseOrThrow(startRequestSchema, request, 'start');
  const flow = workflow === undefined ? undefined : registry.toolkit.workflow?.(workflow);
  if (workflow !== undefined && !flow)
    throw new HostRequestError('invalid_request', `start: no workflow named ${JSON.stringify(workflow)} is installed`);
  if (success && !registry.get(success.tool)) {
    throw new HostRequestError('invalid_request', `start: success criterion names unknown tool ${success.tool}`);
  }
  // A sub-task's result says `answered` when only the child's model said it was done: success is a child that met its
  // own criterion (`done`), shown by its trusted evidence, never the child's text.
  if (success && subtaskRulesOf(registry.get(success.tool)) && success.match?.status !== 'done') {
    throw new HostRequestError(
      'invalid_request',
      `start: a success criterion on the sub-task tool ${success.tool} must match { status: 'done' } (a child that met its own criterion); an 'answered' child only says it is done`,
    );
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
      limits: {
        ...settings.limits,
        ...limits,
        money: moneyUnder(settings.mandates, checkedMandate, limits?.money, settings.limits.money),
      },
      modelReservation: deps.reservation,
      provenance: deps.provenance,
      success: success ?? null,
      startedAt,
      compaction: settings.compaction.settings,
      ...(flow ? { workflow: { name: flow.name, start: flow.start } } : {}),
    },
    'start',
  );
}

/**
 * Claims the task's mandate in the store (a mandate authorises one task): `'claimed'` when this call took it (to be
 * given back if the start does not happen), `'held'` when the task holds it already (a retried start, or the worker
 * creating a task whose start the API process claimed), null without a mandate. MandateUsedError when another task
 * holds it.
 */
export async function claimMandate(store: TaskStore, input: AgentInput): Promise<'claimed' | 'held' | null> {
  const { mandate, taskId } = input;
  if (!mandate) return null;
  if (mandate.id === undefined) {
    // A start recorded by an earlier version, before mandates had ids.
    throw new HostRequestError(
      'invalid_request',
      `start: the mandate of task ${JSON.stringify(taskId)} has no id: make it with defineMandate(...).of(terms)`,
    );
  }
  if (!claimsMandates(store)) {
    throw new HostRequestError(
      'invalid_request',
      `start: a task with a mandate needs a store that claims mandates (claimMandate, releaseMandate), so that a mandate authorises one task; the ${store.kind} store does not`,
    );
  }
  return store.claimMandate(mandate.id, taskId);
}

/** Gives back a mandate claimed by a start that did not happen (best effort: the claim only blocks that mandate). */
export async function releaseClaim(
  store: TaskStore,
  input: AgentInput,
  claim: 'claimed' | 'held' | null,
): Promise<void> {
  if (claim !== 'claimed' || !input.mandate?.id) return;
  await store.releaseMandate?.(input.mandate.id, input.taskId).catch(() => {});
}

/** Creates the task of `input` and lets it run; resolves once its first state is saved. */
export function createTask(
  input: AgentInput,
  deps: { live: LiveTasks; store: TaskStore; capacity: Capacity },
): Promise<TaskStatus> {
  const { live, capacity } = deps;
  const { taskId } = input;
  // A slot is held from here until the task is live (counted as running) and its first state saved, or the start
  // failed: refused here, before anything is stored.
  const slot = capacity.hold(input.principal.tenantId);
  return live
    .exclusive(taskId, async () => {
      if (live.has(taskId)) throw new TaskExistsError(taskId);
      // The tenant's slot across processes (capacity.tenantCap) first: refused before anything is stored.
      const giveBack =
        (await live.tenantCap?.admit(input.principal.tenantId, taskId).catch(async (error: unknown) => {
          // A retried start of a task that exists is told so, whatever the tenant holds now.
          if (error instanceof CapacityError && (await deps.store.load(taskId).catch(() => null)))
            throw new TaskExistsError(taskId);
          throw error;
        })) ?? (() => {});
      try {
        return await createHere(input, deps, slot);
      } catch (error) {
        giveBack();
        throw error;
      }
    })
    .finally(slot.release);
}

/**
 * Inside the task's exclusive section, its capacity taken: the lease, the id checked free, the task made live. A
 * first save refused because another process took the id's lease meanwhile (this lease had lapsed) stored nothing:
 * the start is made once more under a new lease, and is told TaskExistsError if that process created the task.
 */
async function createHere(
  input: AgentInput,
  deps: { live: LiveTasks; store: TaskStore },
  slot: StartSlot,
): Promise<TaskStatus> {
  const claimed = { first: null as 'claimed' | 'held' | null };
  try {
    return await createOnce(input, deps, slot, claimed);
  } catch (error) {
    if (!(error instanceof FencedOutError)) throw error;
    return createOnce(input, deps, slot, claimed);
  }
}

async function createOnce(
  input: AgentInput,
  deps: { live: LiveTasks; store: TaskStore },
  slot: StartSlot,
  claimed: { first: 'claimed' | 'held' | null },
): Promise<TaskStatus> {
  const { live, store } = deps;
  const { taskId } = input;
  await live.leases.take(taskId);
  let claim: 'claimed' | 'held' | null;
  try {
    // Unreadable data under this id still means the id is taken; a store that cannot answer is not a clash.
    const existing = await store.load(taskId).catch((error: unknown) => {
      if (error instanceof CorruptTaskError || error instanceof UnsupportedVersionError) return true;
      throw error;
    });
    // Before the mandate is claimed: a retried start of an existing task is told it exists, not that its mandate is used.
    if (existing) throw new TaskExistsError(taskId);
    // A second try holds what the first one claimed: it is still this start's to give back.
    claim = await claimMandate(store, input);
    claimed.first ??= claim;
    if (claimed.first === 'claimed') claim = 'claimed';
  } catch (error) {
    await live.releaseLease(taskId);
    throw error;
  }
  let task;
  try {
    task = live.create(input);
  } catch (error) {
    // Closed, the lease found lost, or not this process's tools: nothing was stored; the claim and the lease go.
    await releaseClaim(store, input, claim);
    await live.releaseLease(taskId);
    throw error;
  }
  slot.live();
  await task.barrier();
  return statusOfLive(task);
}
