/**
 * Sub-tasks: a host-declared tool whose call starts a child task with a narrower mandate, a share of the parent's
 * budgets and a subset of its tools. The model proposes a call of it like any tool, and the call passes the same gates
 * (schema, mandate, permission, budget, confirmation); the chart's `vetting.judging` adds three guards: the child's
 * tools within the parent's, its mandate no wider, its share within what is left. The orchestrator starts the child
 * (a real task, same principal, its id derived from the parent's id and the call's key: a start sent again finds it),
 * the parent waits (persisted, `waiting_for_subtask`), and the child's outcome comes back as the call's result.
 *
 * @example
 * const delegateRefund = defineSubtask({
 *   name: 'delegate_refund', description: 'Hands the refund of one order to a sub-task that may only read and refund.',
 *   input: z.strictObject({ order_id: z.string(), amount_cents: z.number().int() }),
 *   tools: ['get_order', 'refund_order'],
 *   goal: (args) => `Refund ${args.amount_cents} cents on order ${args.order_id}.`,
 *   mandate: { kind: refundMandate, terms: (args) => ({ order_id: args.order_id, max_cents: args.amount_cents }) },
 *   budget: { modelTurns: 4, toolCalls: 4, writes: 1, money: 19_900 },
 *   success: { tool: 'refund_order', match: { status: 'refunded' } },
 *   confirm: { never: 'the child confirms its own refund' },
 * });
 */
import { z } from 'zod';
import type { Json, Mandate, Principal, SuccessCriterion } from '../machines/context.js';
import type { SubtaskRules } from '../machines/toolkit.js';
import { ToolDefinitionError } from './errors.js';
import type { MandateKind } from './mandate.js';
import { defineTool } from './tool.js';
import type { ConfirmationRule, LookupResult, RiskClass, ToolResult, WriteTool } from './toolTypes.js';

/** A child's share of its parent's budgets. Left out: 0 (tokens and cost: turns times the model's reservation). */
export interface SubtaskBudget {
  modelTurns: number;
  toolCalls: number;
  writes?: number;
  retries?: number;
  tokens?: number;
  costMicros?: number;
  money?: number;
}

/** The child's mandate: its kind (which must say when terms are `within` others) and its terms from the arguments. */
export interface SubtaskMandate<I, T> {
  kind: MandateKind<T>;
  /** The child's terms, from the validated arguments and the parent's terms (null when the parent has none). */
  terms: (args: I, parent: T | null) => T;
}

export interface SubtaskDefinition<I, T = unknown> {
  /** snake_case, as the model sees it. */
  name: string;
  description: string;
  input: z.ZodType<I>;
  /** The tools the child may use: installed tools, none of them a sub-task tool (one level only). */
  tools: readonly string[];
  /** What the child is asked to do. */
  goal: (args: I) => string;
  /** The child's mandate; required when the parent has one (a child never has a wider mandate than its parent). */
  mandate?: SubtaskMandate<I, T>;
  /** The child's share of the parent's budgets, taken from the parent before the child starts. */
  budget: SubtaskBudget | ((args: I) => SubtaskBudget);
  /** The child's success criterion (naming one of its tools); without one the child can at best answer. */
  success?: SuccessCriterion;
  /** Scopes the principal must hold to start the child (besides those of the child's own tools). Default none. */
  scopes?: string[];
  /** Who confirms the start; default: the task's user, as for any write. */
  confirm?: ConfirmationRule<I>;
  risk?: RiskClass;
  /** How long starting the child may take (not how long the child runs). Default 5,000 ms. */
  timeoutMs?: number;
  version?: string;
}

/** What the start of a child returns: its id (the call's result is the child's outcome, later). */
export interface SubtaskStarted {
  child_task_id: string;
}

/** How the orchestrator starts a child and finds one started before (bound when the tool is installed). */
export interface SubtaskStarter {
  start(parentTaskId: string, callId: string, principal: Readonly<Principal>): Promise<ToolResult<SubtaskStarted>>;
  find(parentTaskId: string, idempotencyKey: string): Promise<LookupResult<SubtaskStarted>>;
}

const SUBTASK = Symbol.for('statechart-agent.subtask');

/** A sub-task tool as installed: a write, with the rules the chart's gates read. */
export type SubtaskTool<I = unknown> = WriteTool<I, SubtaskStarted> & { [SUBTASK]: SubtaskRules<I> };

const startedSchema = z.strictObject({ child_task_id: z.string() });

/** The sub-task rules of an installed tool, or undefined for any other tool. */
export function subtaskRulesOf(tool: unknown): SubtaskRules | undefined {
  return (tool as Partial<SubtaskTool>)?.[SUBTASK];
}

/**
 * Declares a sub-task tool. Throws ToolDefinitionError for: no tools, a budget share that is not whole amounts, a
 * mandate kind that cannot say when terms are within others (`defineMandate(kind, schema, { within })`), and every
 * check `defineTool` makes.
 */
export function defineSubtask<I, T = unknown>(definition: SubtaskDefinition<I, T>): SubtaskTool<I> {
  const fail = (detail: string): never => {
    throw new ToolDefinitionError(definition.name, detail);
  };
  const { tools, mandate } = definition;
  if (!Array.isArray(tools) || tools.length === 0 || !tools.every((t) => typeof t === 'string' && t.length > 0))
    fail('tools must list the tools the child may use (at least one)');
  if (new Set(tools).size !== tools.length) fail('tools lists a tool twice');
  if (tools.includes(definition.name)) fail('a sub-task cannot use itself');
  if (typeof definition.goal !== 'function') fail('goal must be a function (args) => what the child is asked to do');
  if (mandate !== undefined && (typeof mandate.terms !== 'function' || typeof mandate.kind?.within !== 'function'))
    fail(
      `mandate needs terms(args, parentTerms) and a kind that says when terms are within others: defineMandate(kind, schema, { within })`,
    );
  const budgetOf = (args: I): SubtaskBudget =>
    typeof definition.budget === 'function' ? definition.budget(args) : definition.budget;
  if (typeof definition.budget !== 'function') checkBudget(definition.budget, fail);
  const rules: SubtaskRules<I> = {
    tools: [...tools],
    goal: (args) => definition.goal(args),
    budget: (args) => ({ ...budgetOf(args) }),
    success: definition.success ?? null,
    mandate: (args, parent) => childMandate(definition, args, parent),
  };
  const tool: SubtaskTool<I> = {
    name: definition.name,
    description: definition.description,
    effect: 'write',
    input: definition.input,
    output: startedSchema as z.ZodType<SubtaskStarted>,
    scopes: [...(definition.scopes ?? [])],
    timeoutMs: definition.timeoutMs ?? 5_000,
    ...(definition.confirm !== undefined ? { confirm: definition.confirm } : {}),
    ...(definition.risk !== undefined ? { risk: definition.risk } : {}),
    ...(definition.version !== undefined ? { version: definition.version } : {}),
    // Starting the same child twice finds the first: the child's id comes from the parent's id and this key.
    sameKeyRetrySafe: true,
    // The mandate gate: the child's mandate must be no wider than the parent's (the same check as isSubtaskMandateNarrower).
    mandate: (args, parent) => {
      const verdict = childMandate(definition, args, parent);
      return verdict.ok ? { ok: true } : { ok: false, code: verdict.code, summary: verdict.summary };
    },
    describeConfirmation: (args) => `Start a sub-task: ${definition.goal(args)}`,
    async execute() {
      return { ok: false, code: 'tool_error', summary: 'sub-task tools are run by an orchestrator' };
    },
    async lookup() {
      throw new Error('sub-task tools are looked up by an orchestrator');
    },
    [SUBTASK]: rules,
  };
  defineTool(tool);
  return tool;
}

/** The tool as an orchestrator installs it: its start and lookup go to `starter`. */
export function bindSubtask(tool: SubtaskTool, starter: () => SubtaskStarter): SubtaskTool {
  return {
    ...tool,
    execute: (_args, ctx) => starter().start(ctx.taskId, ctx.callId, ctx.principal),
    lookup: (key, ctx) => starter().find(ctx.taskId, key),
  };
}

function checkBudget(budget: SubtaskBudget, fail: (detail: string) => never): void {
  if (!budget || typeof budget !== 'object')
    fail('budget must give the child its share ({ modelTurns, toolCalls, ... })');
  for (const [key, value] of Object.entries(budget)) {
    if (!(Number.isSafeInteger(value) && (value as number) >= 0))
      fail(`budget.${key} must be a whole number of 0 or more, not ${String(value)}`);
  }
  if (!(budget.modelTurns >= 1)) fail('budget.modelTurns must be at least 1: the child needs a model turn');
}

function childMandate<I, T>(
  definition: SubtaskDefinition<I, T>,
  args: I,
  parent: Readonly<Mandate> | null,
): ReturnType<SubtaskRules['mandate']> {
  const spec = definition.mandate;
  if (!spec) return { ok: true, mandate: null };
  const { kind } = spec;
  if (parent && parent.kind !== kind.kind)
    return {
      ok: false,
      code: 'other_mandate_kind',
      summary: `the child's mandate is ${kind.kind}, the parent's ${parent.kind}: not comparable`,
    };
  const parentTerms = parent ? kind.termsOf(parent) : null;
  if (parent && parentTerms === null)
    return { ok: false, code: 'invalid_mandate', summary: "the parent's mandate does not match its schema" };
  const terms = spec.terms(args, parentTerms);
  const parsed = kind.schema.safeParse(terms);
  if (!parsed.success)
    return { ok: false, code: 'invalid_mandate', summary: "the child's terms do not match the schema" };
  if (parentTerms !== null && !kind.within!(parsed.data, parentTerms))
    return {
      ok: false,
      code: 'wider_than_parent',
      summary: `the child's terms ${JSON.stringify(terms)} are not within the parent's ${JSON.stringify(parentTerms)}`,
    };
  return { ok: true, mandate: { kind: kind.kind, terms: terms as Json } };
}
