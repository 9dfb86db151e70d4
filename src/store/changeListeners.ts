/**
 * The listeners of `TaskChanges.watch`, per task: who to tell when a task's journals grew. Used as it is by the
 * MemoryStore (its saves are the only ones there are), and under the Redis subscription (`redisTaskChanges.ts`).
 * Listeners are called on a later microtask, never inside `watch` or a store call, and what one throws is dropped:
 * a view's failure must not fail a save.
 */
import type { TaskChange, TaskWatch } from './taskStore.js';

type Listener = (change: TaskChange) => void;

export class ChangeListeners {
  private readonly byTask = new Map<string, Set<Listener>>();

  constructor(
    /** Told when a task gets its first listener and loses its last one (a subscription to open or close). */
    private readonly hooks: {
      first?(taskId: string): void;
      last?(taskId: string): void;
      live?(taskId: string): boolean;
    } = {},
  ) {}

  watch(taskId: string, listener: Listener): TaskWatch {
    let set = this.byTask.get(taskId);
    const first = !set;
    if (!set) this.byTask.set(taskId, (set = new Set()));
    // A wrapper per call, so that the same function watched twice is two registrations.
    const entry: Listener = (change) => listener(change);
    set.add(entry);
    if (first) this.hooks.first?.(taskId);
    let stopped = false;
    const hooks = this.hooks;
    const byTask = this.byTask;
    return {
      get live() {
        return !stopped && (hooks.live ? hooks.live(taskId) : true);
      },
      stop() {
        if (stopped) return;
        stopped = true;
        const current = byTask.get(taskId);
        if (!current?.delete(entry) || current.size > 0) return;
        byTask.delete(taskId);
        hooks.last?.(taskId);
      },
    };
  }

  /** Tells the task's listeners (on a later microtask). */
  notify(change: TaskChange): void {
    const set = this.byTask.get(change.taskId);
    if (!set || set.size === 0) return;
    const listeners = [...set];
    queueMicrotask(() => {
      for (const listener of listeners) {
        try {
          listener(change);
        } catch {
          // A listener must not throw (documented); one that does loses only its own notification.
        }
      }
    });
  }

  /** Every task with a listener. */
  tasks(): string[] {
    return [...this.byTask.keys()];
  }

  has(taskId: string): boolean {
    return this.byTask.has(taskId);
  }
}
