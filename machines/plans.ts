/**
 * Plans, the data (plan-and-execute, the first of the design sources' three planning modes). The model proposes a
 * whole plan first (steps, each a tool with a purpose, and the steps it depends on), as a call of the host's own
 * `propose_plan` tool; the host checks it, estimates what it costs, has it approved when the policy says so, then runs
 * it step by step through the same gates as any call. A plan is not a fact: a step's status changes only from a tool
 * result, with the time it was observed. Part of the task's data model (`context.ts` re-exports it).
 */
import { z } from 'zod';
import { SHORT, count, time } from './lib/schemaParts.js';
import { decisionSchema, effectSchema } from './calls.js';

/** The host's own tool through which the model proposes a plan. No installed tool may take this name. */
export const PLAN_TOOL = 'propose_plan';

/** Bounds of a plan, so a snapshot stays small whatever the model proposes. */
export const PLAN_LIMITS = {
  /** The most steps a policy may allow in one plan. */
  steps: 32,
  /** A step's id and a dependency's. */
  stepId: 32,
  /** A step's purpose, as the model wrote it (shown to the approver). */
  purpose: 200,
  /** Steps that succeeded in plans since replaced, kept as facts. */
  earlier: 32,
  /** Identifiers a succeeded step keeps as its evidence. */
  evidenceIds: 8,
} as const;

/** The arguments of `propose_plan`, as the model must send them (checked by the plan gate, never trusted). */
export const planArgumentsSchema = z.strictObject({
  steps: z
    .array(
      z.strictObject({
        id: z
          .string()
          .regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, "_" and "-" only')
          .max(PLAN_LIMITS.stepId),
        tool: z.string().min(1).max(SHORT),
        purpose: z.string().min(1).max(PLAN_LIMITS.purpose),
        depends_on: z.array(z.string().max(PLAN_LIMITS.stepId)).max(PLAN_LIMITS.steps).optional(),
      }),
    )
    .min(1)
    .max(PLAN_LIMITS.steps),
});
export type PlanArguments = z.infer<typeof planArgumentsSchema>;

/**
 * Where a step is. `pending` until a call of its tool returns: `succeeded` with the result's evidence and the time it
 * was observed, `failed` with the tool's code (a gate's refusal, or an unknown outcome, leaves it pending: nothing is
 * known to have happened), `skipped` when the plan was replaced or the task stopped before it ran.
 */
export const PLAN_STEP_STATUSES = ['pending', 'succeeded', 'failed', 'skipped'] as const;
export const planStepStatusSchema = z.enum(PLAN_STEP_STATUSES);

export const planStepSchema = z.strictObject({
  id: z.string().min(1).max(PLAN_LIMITS.stepId),
  tool: z.string().min(1).max(SHORT),
  effect: effectSchema,
  purpose: z.string().max(PLAN_LIMITS.purpose),
  dependsOn: z.array(z.string().max(PLAN_LIMITS.stepId)).max(PLAN_LIMITS.steps),
  status: planStepStatusSchema,
  /** The call whose result set the status, or null while pending. */
  callId: z.string().nullable(),
  /** When the result was observed (host clock), or null while pending. */
  observedAt: time.nullable(),
  /** What the trusted result named (a booking id, an order id): the step's evidence. */
  evidence: z.array(z.string().max(64)).max(PLAN_LIMITS.evidenceIds),
  /** A failed step's code and summary (the tool's), else null. */
  failure: z.strictObject({ code: z.string().max(SHORT), summary: z.string().max(1_000) }).nullable(),
});

/** What a plan is estimated to cost, before anything of it runs: checked against what is left of the budget. */
export const planEstimateSchema = z.strictObject({
  /** One turn per step (the model proposes each call), plus one for the final answer. */
  modelTurns: count,
  toolCalls: count,
  writes: count,
  /** Tokens and cost of those turns at the task's turn reservation. */
  tokens: count,
  costMicros: count,
});

export const planSchema = z.strictObject({
  /** `plan-<n>`: the n-th plan the model proposed in this task. */
  id: z.string().min(1).max(SHORT),
  /** The call of `propose_plan` it came in (its result tells the model what became of the plan). */
  callId: z.string().min(1).max(SHORT),
  turn: count,
  /** `sha256:` of the canonical plan (steps, tools, dependencies, purposes): what an approval is bound to. */
  hash: z.string().min(1).max(SHORT),
  proposedAt: time,
  /** Waiting for approval, or adopted (the steps run). */
  status: z.enum(['awaiting_approval', 'adopted']),
  /** Who approved it, when the policy asked (empty when it did not). */
  approvedBy: z.array(decisionSchema).max(16),
  estimate: planEstimateSchema,
  steps: z.array(planStepSchema).min(1).max(PLAN_LIMITS.steps),
});

/** A task's planning: the current plan, how many were proposed, and the steps earlier plans completed (facts). */
export const planningStateSchema = z.strictObject({
  current: planSchema.nullable(),
  /** Plans proposed so far, refused ones included (the policy bounds it). */
  proposals: count,
  /** Steps that succeeded in plans since replaced: what a re-plan may depend on. */
  earlier: z.array(planStepSchema).max(PLAN_LIMITS.earlier),
});

/**
 * The host's planning policy. `off`: the model plans as it goes (one proposal, then the next). `plan_first`: no tool
 * runs before a plan is adopted; the first turn is offered only `propose_plan`. `optional`: the model may propose a
 * plan; until it does, the tools are offered as without one.
 */
export const PLANNING_MODES = ['off', 'plan_first', 'optional'] as const;

export const planningPolicySchema = z.strictObject({
  mode: z.enum(PLANNING_MODES),
  /**
   * Who approves a plan before it runs: `writes` (default) the task's user, when the plan has a write step; `always`
   * the task's user; `never` nobody. Each write still needs its own confirmation by its tool's rule: an approved plan
   * names tools, not arguments.
   */
  approval: z.enum(['writes', 'always', 'never']),
  /** Approvers (other than the task's user) who approve a plan instead of the user, or null: the user approves. */
  approverScope: z.string().min(1).max(SHORT).nullable(),
  /** Plans the model may propose in a task (the first and its re-plans), refused ones included. */
  maxProposals: z.number().int().min(1).max(16),
  maxSteps: z.number().int().min(1).max(PLAN_LIMITS.steps),
});

export const DEFAULT_PLANNING = {
  mode: 'off',
  approval: 'writes',
  approverScope: null,
  maxProposals: 3,
  maxSteps: 12,
} as const satisfies z.input<typeof planningPolicySchema>;

export type PlanStep = z.infer<typeof planStepSchema>;
export type PlanStepStatus = z.infer<typeof planStepStatusSchema>;
export type PlanEstimate = z.infer<typeof planEstimateSchema>;
export type Plan = z.infer<typeof planSchema>;
export type PlanningState = z.infer<typeof planningStateSchema>;
export type PlanningPolicy = z.infer<typeof planningPolicySchema>;
