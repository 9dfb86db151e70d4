/**
 * State tags: what a state means to the outside, so the store summary, the status views and the audit replay read
 * a task's condition from the chart instead of matching state names.
 */
import type { FinalStatus } from './context.js';

export const TAGS = {
  /** The task rests until a human acts (or, for an outage, its wake-up time comes). */
  waiting: 'waiting',
  /** Waiting for a confirmation of exact arguments. */
  confirmation: 'confirmation',
  /** Waiting for the user's answer to the model's question. */
  question: 'question',
  /** A final state: the outcome is in the context. */
  terminal: 'terminal',
  /** The model is being asked. */
  model: 'model',
  /** A gate is judging a call. */
  gate: 'gate',
  /** A tool runs: its effect (for a write) may be happening now. */
  effect: 'effect',
  /** A write's outcome is unknown and is being looked up. */
  reconciling: 'reconciling',
  /** Waiting for a reviewer to say what a write did. */
  review: 'review',
  /** Waiting out a model outage. */
  outage: 'outage',
  /** Paused while the task's user is away. */
  away: 'away',
  /** Waiting for a child task (a sub-task) to end. */
  subtask: 'subtask',
} as const;

export type Tag = (typeof TAGS)[keyof typeof TAGS];

/**
 * The states a stored task is listed by. `review_required` is a wait (a reviewer resolves it): listing by it is the
 * review queue.
 */
export type TaskState =
  | 'running'
  | 'waiting_for_confirmation'
  | 'waiting_for_user'
  | 'waiting_for_model'
  | 'review_required'
  | 'paused'
  | 'waiting_for_subtask'
  | FinalStatus;

export const TASK_STATES: readonly TaskState[] = [
  'running',
  'waiting_for_confirmation',
  'waiting_for_user',
  'waiting_for_model',
  'review_required',
  'paused',
  'waiting_for_subtask',
  'done',
  'answered',
  'failed',
  'budget_exhausted',
  'cancelled',
];

/** The listed states in which a task rests until someone (or its wake-up time) moves it. */
export const WAITING_TASK_STATES: readonly TaskState[] = [
  'waiting_for_confirmation',
  'waiting_for_user',
  'waiting_for_model',
  'review_required',
  'paused',
  'waiting_for_subtask',
];

/** A task's listed state from the tags of the state it is in (and, when final, its outcome). */
export function taskStateOf(tags: ReadonlySet<string> | readonly string[], outcome: FinalStatus | null): TaskState {
  // Asked on every snapshot: plain calls, no closure per ask.
  if (hasTag(tags, TAGS.terminal)) {
    if (!outcome) throw new Error('a final state without an outcome');
    return outcome;
  }
  if (!hasTag(tags, TAGS.waiting)) return 'running';
  if (hasTag(tags, TAGS.confirmation)) return 'waiting_for_confirmation';
  if (hasTag(tags, TAGS.question)) return 'waiting_for_user';
  if (hasTag(tags, TAGS.outage)) return 'waiting_for_model';
  if (hasTag(tags, TAGS.review)) return 'review_required';
  if (hasTag(tags, TAGS.away)) return 'paused';
  if (hasTag(tags, TAGS.subtask)) return 'waiting_for_subtask';
  return 'running';
}

function hasTag(tags: ReadonlySet<string> | readonly string[], tag: Tag): boolean {
  return Array.isArray(tags) ? tags.includes(tag) : (tags as ReadonlySet<string>).has(tag);
}

interface NodeLike {
  tags: readonly string[];
  states: Record<string, NodeLike>;
}

/** The tags of the states a (possibly persisted) state value is in, read off the chart's definition. */
export function tagsAt(root: NodeLike, value: unknown): Set<string> {
  const tags = new Set<string>();
  const visit = (node: NodeLike, inner: unknown) => {
    if (typeof inner === 'string') {
      for (const tag of node.states[inner]?.tags ?? []) tags.add(tag);
      return;
    }
    if (!inner || typeof inner !== 'object') return;
    for (const [key, sub] of Object.entries(inner)) {
      const child = node.states[key];
      if (!child) continue;
      for (const tag of child.tags) tags.add(tag);
      visit(child, sub);
    }
  };
  visit(root, value);
  return tags;
}
