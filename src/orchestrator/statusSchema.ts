/**
 * The task status as a schema, built from the core's own schemas (the context's fields, the summary's state), for
 * the service's OpenAPI document and for clients that validate what they receive. The compiler keeps it equal to
 * `TaskStatus`: a field added to one and not the other fails the typecheck.
 */
import { z } from 'zod';
import { observationSchema } from '../../machines/calls.js';
import {
  agentContextSchema,
  budgetCountersSchema,
  budgetLimitsSchema,
  forkLinkSchema,
} from '../../machines/context.js';
import { time } from '../../machines/lib/schemaParts.js';
import { planSchema } from '../../machines/plans.js';
import { workflowStateSchema } from '../../machines/workflows.js';
import { parentLinkSchema, subtaskLinkSchema } from '../../machines/subtasks.js';
import { taskSummarySchema } from '../store/summary.js';
import type { TaskStatus } from './status.js';

export const taskStatusSchema = agentContextSchema
  .pick({
    taskId: true,
    goal: true,
    principal: true,
    turn: true,
    outcome: true,
    mandate: true,
    pendingConfirmation: true,
    question: true,
    questionExpiresAt: true,
    review: true,
    outage: true,
    evidence: true,
  })
  .extend({
    state: taskSummarySchema.shape.state,
    stateValue: taskSummarySchema.shape.stateValue.describe(
      'The machine state, dotted ("executing.awaitingConfirmation")',
    ),
    revision: taskSummarySchema.shape.revision,
    budget: z.strictObject({
      limits: budgetLimitsSchema,
      used: budgetCountersSchema,
      remaining: budgetCountersSchema,
      deadlineAt: time,
    }),
    observations: z.array(observationSchema).describe('Results of the last batch, paired by call id'),
    workflow: workflowStateSchema
      .nullable()
      .describe('The workflow the task follows: its current step and what each step established; else null'),
    plan: planSchema
      .nullable()
      .describe('The plan in force or awaiting approval, its steps as tool results left them; else null'),
    parent: parentLinkSchema
      .nullable()
      .describe('The task that started this one through a sub-task tool (its id and call), or null'),
    forkedFrom: forkLinkSchema
      .nullable()
      .describe('A copy an operator forked from another task: that task and the step it was copied at; else null'),
    children: z
      .array(subtaskLinkSchema)
      .describe('The children this task started through sub-task tools, with their status and outcome'),
    createdAt: time,
    updatedAt: time,
  })
  .meta({ id: 'TaskStatus', description: 'A task as its host sees it: state, pending decision, budgets, outcome' });

/** Fails to compile when `TaskStatus` and the schema's type differ in either direction. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const statusMatchesSchema: Same<TaskStatus, z.output<typeof taskStatusSchema>> = true;
void statusMatchesSchema;
