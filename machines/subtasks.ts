/**
 * Sub-tasks, the data: a host-declared tool (`defineSubtask`) whose call starts a child task with a narrower mandate,
 * a share of the parent's budgets and a subset of its tools. The parent keeps one link per child (what it started,
 * with what, and the outcome that came back); the child keeps the link to its parent. Part of the task's data model
 * (`context.ts` re-exports it). Pure: the child's id is derived from the parent's id and the call's idempotency key,
 * so a start sent again (after a restart) finds the same child.
 */
import { z } from 'zod';
import { FINAL_STATUSES } from './failures.js';
import { SHORT, budgetCounterShape, jsonSchema, time } from './lib/schemaParts.js';

/** How many children a task remembers (each one is a call of a sub-task tool; a task's write budget is smaller). */
export const MAX_SUBTASKS = 16;

/** The share of the parent's budgets a child gets: taken from the parent before the child starts. */
export const subtaskShareSchema = z.strictObject(budgetCounterShape);

/** The child's trusted results, as they come back to the parent: its status, the reason, its evidence. */
export const subtaskOutcomeSchema = z.strictObject({
  status: z.enum(FINAL_STATUSES),
  code: z.string().min(1).max(SHORT),
  message: z.string().max(2_000),
  /** The child's evidence: its own trusted tool results (never its model's text). */
  evidence: z
    .array(z.strictObject({ tool: z.string().max(SHORT), callId: z.string().max(SHORT), fields: jsonSchema }))
    .max(8),
  /** What the child spent of its share: the rest goes back to the parent. */
  used: subtaskShareSchema,
  at: time,
});

/** The parent's record of one child. */
export const subtaskLinkSchema = z.strictObject({
  /** The call of the sub-task tool that started it. */
  callId: z.string().min(1).max(SHORT),
  tool: z.string().min(1).max(SHORT),
  childTaskId: z.string().min(1).max(SHORT),
  /** What the child is asked to do (from the tool's `goal(args)`), its tools, its mandate and its success criterion. */
  goal: z.string().min(1).max(4_000),
  tools: z.array(z.string().min(1).max(SHORT)).max(256),
  mandate: z
    .strictObject({ kind: z.string().min(1).max(SHORT), terms: jsonSchema, id: z.string().max(128) })
    .nullable(),
  success: z
    .strictObject({
      tool: z.string().min(1),
      match: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
      require: z.array(z.string()).optional(),
      description: z.string().optional(),
    })
    .nullable(),
  /** The share taken from the parent, and the child's deadline (never later than the parent's). */
  share: subtaskShareSchema,
  deadlineAt: time,
  /**
   * `starting` until the start is known to have happened; `running` while the parent waits; `finished` after;
   * `not_started` when the start was refused or found not to have happened (the share went back).
   */
  status: z.enum(['starting', 'running', 'finished', 'not_started']),
  startedAt: time,
  outcome: subtaskOutcomeSchema.nullable(),
});

/** The child's record of its parent. */
export const parentLinkSchema = z.strictObject({
  taskId: z.string().min(1).max(SHORT),
  callId: z.string().min(1).max(SHORT),
  tool: z.string().min(1).max(SHORT),
});

export type SubtaskShare = z.infer<typeof subtaskShareSchema>;
export type SubtaskOutcome = z.infer<typeof subtaskOutcomeSchema>;
export type SubtaskLink = z.infer<typeof subtaskLinkSchema>;
export type ParentLink = z.infer<typeof parentLinkSchema>;

/** The child's task id: derived from the parent's id and the call's idempotency key, so a re-sent start finds it. */
export function childTaskIdOf(sha256: (text: string) => string, parentTaskId: string, idempotencyKey: string): string {
  return `sub_${sha256(`${parentTaskId}\u0000${idempotencyKey}`).slice(0, 32)}`;
}
