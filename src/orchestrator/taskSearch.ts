/**
 * The operator's task search: one tenant's tasks by state, by what they wait for, by the tool they wait on, by user,
 * by id and by age, paged. The store narrows by state and owner (its indexes); what a task waits for and on which
 * tool is read off its status, and only for tasks in a waiting state (a running or finished task waits for nothing).
 */
import { CorruptTaskError, TaskNotFoundError, UnsupportedVersionError } from '../errors.js';
import { WAITING_TASK_STATES } from '../../machines/tags.js';
import type { TaskState, TaskSummary } from '../store/summary.js';
import type { ListQuery } from '../store/taskStore.js';
import type { TaskStatus } from './status.js';

/**
 * What a waiting task waits for: the requester's `confirmation` of a call, an approver's `approval` (four eyes), the
 * user's `answer` to the model's question, the `model` (an outage), a reviewer's `review` of a write whose outcome is
 * unknown, or its user's return (`user_away`).
 */
export const WAITING_REASONS = ['confirmation', 'approval', 'answer', 'model', 'review', 'user_away'] as const;
export type WaitingReason = (typeof WAITING_REASONS)[number];

/** The listed state each reason waits in. */
const STATE_OF: Record<WaitingReason, TaskState> = {
  confirmation: 'waiting_for_confirmation',
  approval: 'waiting_for_confirmation',
  answer: 'waiting_for_user',
  model: 'waiting_for_model',
  review: 'review_required',
  user_away: 'paused',
};

export interface TaskSearch {
  /** Required: a search never crosses tenants. */
  tenantId: string;
  states?: readonly TaskState[];
  /** Only tasks waiting for one of these. */
  waitingFor?: readonly WaitingReason[];
  /** Only tasks waiting on a call of this tool (its confirmation, or the review of its write). */
  tool?: string;
  /** Only this user's tasks. */
  userId?: string;
  /** Only tasks whose id contains this text. */
  idContains?: string;
  /** Only tasks created at or before this time (ms since epoch): "older than". */
  createdAtMost?: number;
  /**
   * Only tasks this says yes to, asked of each summary before its status is read (a caller who is no operator: their
   * own tasks and confirmations that may wait for them), so a search never reads what its caller may not see.
   */
  mayShow?: (summary: TaskSummary) => boolean;
  /** Matching tasks to skip (paging), then at most `limit` of them. */
  offset?: number;
  limit?: number;
}

/** A task as the search finds it: its summary, what it waits for, and the tool it waits on. */
export interface FoundTask extends TaskSummary {
  waitingFor: WaitingReason | null;
  tool: string | null;
}

/** What the search reads: the store's listing and a task's status. */
export interface SearchReads {
  list(query: ListQuery): Promise<TaskSummary[]>;
  status(taskId: string): Promise<TaskStatus>;
}

/** What a status waits for (null: it waits for nothing: running or finished). */
export function waitingReasonOf(status: Pick<TaskStatus, 'state' | 'pendingConfirmation'>): WaitingReason | null {
  switch (status.state) {
    case 'waiting_for_confirmation':
      return status.pendingConfirmation?.approverScope ? 'approval' : 'confirmation';
    case 'waiting_for_user':
      return 'answer';
    case 'waiting_for_model':
      return 'model';
    case 'review_required':
      return 'review';
    case 'paused':
      return 'user_away';
    default:
      return null;
  }
}

/** The tool a waiting task waits on: its pending confirmation's, or the reviewed write's. */
export function waitingToolOf(status: Pick<TaskStatus, 'pendingConfirmation' | 'review'>): string | null {
  return status.pendingConfirmation?.tool ?? status.review?.tool ?? null;
}

/** The tasks matching `search`, most recently updated first (the store's order). */
export async function searchTasks(reads: SearchReads, search: TaskSearch): Promise<FoundTask[]> {
  let states = search.states ? [...search.states] : undefined;
  if (search.waitingFor) {
    const waitingIn = new Set(search.waitingFor.map((reason) => STATE_OF[reason]));
    states = (states ?? [...waitingIn]).filter((state) => waitingIn.has(state));
    if (states.length === 0) return [];
  }
  if (search.tool !== undefined) {
    const toolStates = new Set<TaskState>(['waiting_for_confirmation', 'review_required']);
    states = (states ?? [...toolStates]).filter((state) => toolStates.has(state));
    if (states.length === 0) return [];
  }
  const listed = await reads.list({
    ...(states ? { states } : {}),
    ...(search.userId !== undefined ? { owner: { tenantId: search.tenantId, userId: search.userId } } : {}),
  });
  const found: FoundTask[] = [];
  let skipped = 0;
  for (const summary of listed) {
    if (summary.tenantId !== search.tenantId) continue;
    if (search.idContains !== undefined && !summary.taskId.includes(search.idContains)) continue;
    if (search.createdAtMost !== undefined && summary.createdAt > search.createdAtMost) continue;
    if (search.mayShow && !search.mayShow(summary)) continue;
    const task = await withWait(reads, summary);
    if (!task || (states && !states.includes(task.state))) continue;
    if (search.waitingFor && (task.waitingFor === null || !search.waitingFor.includes(task.waitingFor))) continue;
    if (search.tool !== undefined && task.tool !== search.tool) continue;
    if (search.offset !== undefined && skipped < search.offset) {
      skipped += 1;
      continue;
    }
    found.push(task);
    if (search.limit !== undefined && found.length >= search.limit) break;
  }
  return found;
}

/**
 * The summary with what it waits for; null when the task cannot be listed (`listedStatus`): left out, as the file
 * store's listing leaves it out, so that one damaged task never fails the search of every other.
 */
async function withWait(reads: SearchReads, summary: TaskSummary): Promise<FoundTask | null> {
  if (!WAITING_TASK_STATES.includes(summary.state)) return { ...summary, waitingFor: null, tool: null };
  const status = await listedStatus(reads, summary.taskId);
  if (!status) return null;
  // The status is newer than the listing when the task moved meanwhile: its own state decides.
  return { ...summary, state: status.state, waitingFor: waitingReasonOf(status), tool: waitingToolOf(status) };
}

/**
 * The status of a task a listing found, or null when it cannot be shown: erased since, or its stored data damaged or
 * of a version this build does not read. A listing (the search, the HTTP task list and inbox) leaves such a task out
 * rather than failing for every other task; its own reads name the problem.
 */
export async function listedStatus(reads: Pick<SearchReads, 'status'>, taskId: string): Promise<TaskStatus | null> {
  try {
    return await reads.status(taskId);
  } catch (error) {
    if (
      error instanceof TaskNotFoundError ||
      error instanceof CorruptTaskError ||
      error instanceof UnsupportedVersionError
    )
      return null;
    throw error;
  }
}
