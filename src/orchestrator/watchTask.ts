/**
 * `Orchestrator.watchTask`: word that a task may have new journal entries, for live views. On a store with change
 * notifications (`TaskStore.changes`: Redis, across processes; MemoryStore, within one) every save by any process
 * is announced; on another store only the saves this process acknowledges are, and the watch is never `live`, so a
 * view polls the store for the rest.
 */
import type { TaskSummary } from '../store/summary.js';
import type { TaskChange, TaskStore, TaskWatch } from '../store/taskStore.js';

export function watchTask(
  store: TaskStore,
  onSaved: (listener: (summary: TaskSummary) => void) => () => void,
  taskId: string,
  listener: (change: TaskChange) => void,
): TaskWatch {
  if (store.changes) return store.changes.watch(taskId, listener);
  const unsubscribe = onSaved((summary) => {
    if (summary.taskId === taskId) listener({ kind: 'resync', taskId });
  });
  return { live: false, stop: unsubscribe };
}
