/**
 * The summary a store lists tasks by, derived from a snapshot and the tags of the state it is in (the chart says
 * what waiting and final mean, not a list of state names here).
 */
import { z } from 'zod';
import type { AgentContext } from '../../machines/context.js';
import { TASK_STATES, type TaskState, taskStateOf } from '../../machines/tags.js';

export { TASK_STATES, type TaskState };

export interface TaskSummary {
  taskId: string;
  state: TaskState;
  /** The machine state, dotted ("executing.awaitingConfirmation"). */
  stateValue: string;
  userId: string;
  tenantId: string;
  revision: number;
  createdAt: number;
  updatedAt: number;
  /** When something is due without an event (a confirmation's or a question's expiry, a model retry), else null. */
  wakeAt: number | null;
  outcomeCode: string | null;
}

const time = z.number().int().nonnegative();

export const taskSummarySchema = z.strictObject({
  taskId: z.string(),
  state: z.enum(TASK_STATES as [TaskState, ...TaskState[]]),
  stateValue: z.string(),
  userId: z.string(),
  tenantId: z.string(),
  revision: z.number().int().positive(),
  createdAt: time,
  updatedAt: time,
  wakeAt: time.nullable(),
  outcomeCode: z.string().nullable(),
}) satisfies z.ZodType<TaskSummary>;

/** Dotted form of a state value: {executing: 'writing'} -> "executing.writing". */
export function stateValueToString(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object') {
    const [key, inner] = Object.entries(value)[0] ?? [];
    return key === undefined ? '' : `${key}.${stateValueToString(inner)}`;
  }
  return '';
}

/** The summary of a snapshot whose state carries `tags`. */
export function summarize(
  snapshot: { value: unknown; context: AgentContext },
  tags: ReadonlySet<string>,
  meta: { revision: number; createdAt: number; updatedAt: number },
): TaskSummary {
  const { context } = snapshot;
  const state = taskStateOf(tags, context.outcome?.status ?? null);
  return {
    taskId: context.taskId,
    state,
    stateValue: stateValueToString(snapshot.value),
    userId: context.principal.userId,
    tenantId: context.principal.tenantId,
    revision: meta.revision,
    createdAt: meta.createdAt,
    updatedAt: meta.updatedAt,
    wakeAt: wakeAtOf(state, context),
    outcomeCode: context.outcome?.reason.code ?? null,
  };
}

/** When a waiting task needs a timer event: its confirmation or question expires, or its model retry is due. */
export function wakeAtOf(state: TaskState, context: AgentContext): number | null {
  if (state === 'waiting_for_confirmation') return context.pendingConfirmation?.expiresAt ?? null;
  if (state === 'waiting_for_user') return context.questionExpiresAt;
  if (state === 'waiting_for_model') return context.outage?.wakeAt ?? null;
  if (state === 'paused') return context.away?.expiresAt ?? null;
  return null;
}
