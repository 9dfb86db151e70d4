/**
 * What a process checks before it drives a task, after it took the task's lease: that the task is not quarantined,
 * reads, and can be restored into this build's machine (otherwise it is quarantined with the reason); that its
 * catalog names only tools installed here as they were (otherwise it is left to a process that has them, with
 * nothing recorded); and, when the lease could not be taken, whether the task exists at all, so that "driven by
 * another process" is said only of one that does.
 */
import type { AgentMachine } from '../../machines/agentMachine.js';
import type { Catalog } from '../../machines/context.js';
import {
  type CatalogDifference,
  CatalogMismatchError,
  CorruptTaskError,
  type TaskBusyError,
  TaskNotFoundError,
  TaskQuarantinedError,
  UnsupportedVersionError,
} from '../errors.js';
import { unrestorableReason } from '../runtime/restore.js';
import type { TaskEnvelope } from '../store/envelope.js';
import type { ReadWithLease, TaskStore } from '../store/taskStore.js';

/**
 * The stored envelope, if it can be restored; otherwise it is quarantined with the reason, and refused. `taken`:
 * what the lease acquisition read already (the same reads, in the same step as the acquisition).
 */
export async function loadRestorable(
  store: TaskStore,
  machine: AgentMachine,
  taskId: string,
  taken?: ReadWithLease,
): Promise<TaskEnvelope> {
  // Both reads at once (one round trip on a pipelining client); a quarantined task is refused whatever the load says.
  // Each runs inside a promise, so a store that throws instead of rejecting is handled the same way.
  const [quarantined, loaded] = await Promise.all([
    taken ? taken.quarantined : Promise.resolve().then(() => store.quarantined(taskId)),
    Promise.resolve()
      .then(() => (taken ? taken.load() : store.load(taskId)))
      .then(
        (envelope) => ({ envelope }),
        (error: unknown) => ({ error }),
      ),
  ]);
  if (quarantined) throw new TaskQuarantinedError(taskId, quarantined);
  if ('error' in loaded) {
    const { error } = loaded;
    if (error instanceof CorruptTaskError || error instanceof UnsupportedVersionError) {
      await store.quarantine(taskId, error.message);
      throw new TaskQuarantinedError(taskId, error.message);
    }
    throw error;
  }
  const { envelope } = loaded;
  if (!envelope) throw new TaskNotFoundError(taskId);
  const reason = unrestorableReason(machine, envelope);
  if (reason) {
    await store.quarantine(taskId, reason);
    throw new TaskQuarantinedError(taskId, reason);
  }
  return envelope;
}

/**
 * Refuses a task whose catalog names tools this process does not have as they were (CatalogMismatchError), after
 * telling `onMismatch`. Without `differences`, every task passes.
 */
export function assertCatalog(
  taskId: string,
  catalog: Catalog,
  differences: ((catalog: Catalog) => CatalogDifference[]) | undefined,
  onMismatch: ((error: CatalogMismatchError) => void) | undefined,
): void {
  const found = differences?.(catalog) ?? [];
  if (found.length === 0) return;
  const error = new CatalogMismatchError(taskId, found);
  onMismatch?.(error);
  throw error;
}

/**
 * A lease another holder keeps says "driven by another process" only of a task that exists (or, with `queued`, is
 * queued to be created): of one never created, or erased, the answer is TaskNotFoundError. The lease alone proves
 * nothing: a process that died while it loaded an unknown id leaves one behind until it expires.
 */
export async function refuseBusy(
  store: TaskStore,
  taskId: string,
  busy: TaskBusyError,
  queued?: () => Promise<boolean>,
): Promise<never> {
  const stored = await store.load(taskId).then(
    (envelope) => envelope !== null,
    (error: unknown) => {
      if (error instanceof TaskNotFoundError) throw error;
      // Unreadable, or the store cannot answer now: something may be there, and the lease is held.
      return true;
    },
  );
  if (stored || (await queued?.())) throw busy;
  throw new TaskNotFoundError(taskId);
}
