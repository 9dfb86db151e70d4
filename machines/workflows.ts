/**
 * Workflows, the data and the host's definition (the third of the design sources' planning modes: a fixed flow with
 * model decisions inside it). The host fixes the main flow in code: each step is a call the program makes (its
 * arguments from earlier steps' results) or a decision the model makes within a schema or a set of choices; each
 * step says which comes next. The model is confined to the decisions: it is offered only the decision of the step at
 * hand, and its answer is checked like a call's arguments. The program's calls go through every gate like any call.
 * Part of the task's data model (`context.ts` re-exports it).
 */
import { z } from 'zod';
import type { Json } from './lib/strictJson.js';
import { SHORT, count, jsonSchema, time } from './lib/schemaParts.js';

/** The host's own tool through which the model gives a workflow's decision. No installed tool may take this name. */
export const DECISION_TOOL = 'submit_decision';

/** Bounds: steps a definition has, and step runs a task may make (a flow that loops is stopped, never run forever). */
export const WORKFLOW_LIMITS = { steps: 32, runs: 64, stepId: 64 } as const;

/** What a step established: the program's call (its result, or why it has none), or the model's decision. */
export const workflowFactSchema = z.discriminatedUnion('ok', [
  z.strictObject({ kind: z.enum(['call', 'decision']), ok: z.literal(true), value: jsonSchema, at: time }),
  z.strictObject({
    kind: z.literal('call'),
    ok: z.literal(false),
    code: z.string().max(SHORT),
    summary: z.string().max(1_000),
    at: time,
  }),
]);

export const workflowStateSchema = z.strictObject({
  name: z.string().min(1).max(SHORT),
  /** The step to run next, or null once the flow has ended. */
  current: z.string().max(WORKFLOW_LIMITS.stepId).nullable(),
  /** The latest fact of each step that ran, by step id. */
  facts: z.record(z.string().max(WORKFLOW_LIMITS.stepId), workflowFactSchema),
  /** Step runs so far (a step run again counts again). */
  runs: count,
  /** Why the flow ended without its last step, when the program's own rule failed; else null. */
  problem: z.string().max(1_000).nullable(),
});

export type WorkflowFact = z.infer<typeof workflowFactSchema>;
export type WorkflowState = z.infer<typeof workflowStateSchema>;
export type WorkflowFacts = Readonly<Record<string, WorkflowFact>>;

/** What a workflow's rules see besides the facts: the task's trusted inputs, never the model's text. */
export interface WorkflowTask {
  mandate: { kind: string; terms: Json } | null;
  principal: { userId: string; tenantId: string };
}

/** A step the program runs: a call of an installed tool, its arguments from what earlier steps established. */
export interface WorkflowCall {
  tool: string;
  args: (facts: WorkflowFacts, task: WorkflowTask) => unknown;
}

/**
 * A step the model decides: one of `choices` (it answers `{ choice }`), or an object `output` accepts. `prompt` says
 * what to decide; it is the decision's description as the model is offered it.
 */
export interface WorkflowDecision {
  prompt: string;
  choices?: readonly string[];
  output?: z.ZodType;
}

export interface WorkflowStep {
  /** One line for the audit and the approver: what the step is for. */
  purpose?: string;
  call?: WorkflowCall;
  decide?: WorkflowDecision;
  /** The step after this one, from the facts so far (branches are code); null or absent: the flow ends. */
  next?: (facts: WorkflowFacts, task: WorkflowTask) => string | null;
}

export interface WorkflowDefinition {
  name: string;
  /** The first step's id. */
  start: string;
  steps: Readonly<Record<string, WorkflowStep>>;
}
