/**
 * What the chart knows about tools beyond the facts persisted in a task's catalog: the host's current definitions,
 * read synchronously by the gates' guards and by the steps that admit a call. The runtime builds it from the
 * installed tools (`src/runtime/toolRegistry.ts`) and passes it to `createAgentMachine`.
 *
 * Kept to pure pieces: zod schemas, scopes, flags, and the tool's own synchronous rules (confirmation, mandate,
 * amount, redaction, the approver's summary). A rule that throws or returns something odd fails closed where it is
 * called.
 */
import type { z } from 'zod';
import type { CallRef, CheckVerdict } from './actors.js';
import type { AgentContext, Effect, Json, Mandate, Principal, RiskClass } from './context.js';
import type { WorkflowDefinition } from './workflows.js';

/**
 * What the task did so far, for rules that bound a total rather than one call: "at most 199.00 in all", "four eyes
 * once the refunds of this task pass 100.00". `moneyMoved` counts every write started (debited before it ran).
 */
export interface TaskFacts {
  moneyMoved: number;
  writesStarted: number;
}

/** A confirmation by people other than the requester, each holding `approverScope` (four eyes and more). */
export interface ApprovalRule {
  approverScope: string;
  /** Distinct approvers needed (default 1, at most 16). */
  approvals?: number;
}

/**
 * A write that needs no confirmation says so in writing: why it is safe to run unconfirmed ("a notice to the requester
 * only, idempotent"). The reason is recorded in the audit of every call that runs without one.
 */
export interface ConfirmationWaiver {
  never: string;
}

/**
 * Who must confirm a call: nobody (`'never'` for a read; a write says why, `{ never: reason }`), the task's user
 * (`'always'`, or a predicate returning true), or approvers (an `ApprovalRule`, or a predicate returning one, e.g.
 * refunds above an amount need a second person). Without a rule, a read runs unconfirmed and a write is confirmed by
 * the task's user. The tool's risk class, the money it moves and the Rule of Two can ask for more, never for less.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so rules of all argument types share one list
export type ConfirmationRule<I = any> =
  | 'never'
  | 'always'
  | ConfirmationWaiver
  | ApprovalRule
  | ((args: I, principal: Readonly<Principal>, task: Readonly<TaskFacts>) => boolean | ApprovalRule);

/** What happens when a confirmation of this tool is rejected, or nobody decides in time. */
export interface ConfirmationPolicy {
  /** `replan` (default): the model is told and proposes again. `cancel`: the task ends as cancelled. */
  onReject?: 'replan' | 'cancel';
  /** `ask_again` (default): asked again up to the policy's limit. `cancel`: the task ends as cancelled. */
  onExpiry?: 'ask_again' | 'cancel';
}

export type MandateVerdict = { ok: true } | { ok: false; code?: string; summary: string };

/** How a tool's arguments must relate to the task's mandate, given what the task did so far. Pure and synchronous. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so rules of all argument types share one list
export type MandateRule<I = any> = (args: I, mandate: Readonly<Mandate>, task: Readonly<TaskFacts>) => MandateVerdict;

/** Which task a check is for (a toolkit whose tools take sealed values opens only that task's). */
export interface TaskRef {
  taskId: string;
  tenantId: string;
  startedAt: number;
}

/** A schema check's answer, as zod's `safeParse` gives it. */
export type ParseAnswer =
  | { success: true; data: unknown }
  | { success: false; error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] } };

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so rules of all argument types share one list
export interface ToolRules<I = any> {
  name: string;
  effect: Effect;
  /** The schema gate: the arguments must parse, and parse to themselves (no transforms). */
  input: z.ZodType<I>;
  /** The tool's output schema: what a reviewer reports as the write's result must match it. */
  output?: z.ZodType;
  /** Checks arguments for `task` instead of `input.safeParse` (the runtime's, for tools that take sealed values). */
  parseInput?: (value: unknown, task: TaskRef) => ParseAnswer;
  /** Checks a reviewer's result for `task` instead of `output.safeParse`. */
  parseOutput?: (value: unknown, task: TaskRef) => ParseAnswer;
  /** The permission gate: the task's principal must hold every one. */
  scopes: readonly string[];
  /** The tool has business validation: asked by `validateNow` when synchronous, else in `vetting.validating`. */
  validates: boolean;
  /** The tool has a resource-level permission check: `authorizeNow` when synchronous, else `vetting.authorizing`. */
  authorizes: boolean;
  /**
   * The tool's business validation, declared synchronous by the host (`hooks: 'sync'`): the gate's guard asks it
   * itself, in the step that judges the call (no invoked state, no timer). Host code the runtime provides: it never
   * throws (a hook that throws or answers with a promise is a refusal, `unavailable`). Absent: asynchronous, or none.
   */
  validateNow?: SyncCheck;
  /** The tool's resource-level permission, declared synchronous (`hooks: 'sync'`); as `validateNow`. */
  authorizeNow?: SyncCheck;
  /**
   * Everything the re-check before this tool's write asks answers at once: its hooks are synchronous (or it has
   * none), it has no rate limit, and the host does not refresh the principal's session (no `refreshPrincipal`). The
   * gate then asks them itself, in the step that reaches the write (no `rechecking.hooks`, no `resending`). Set by
   * the runtime; absent: the re-check runs in its invoked state.
   */
  recheckNow?: boolean;
  confirm?: ConfirmationRule<I>;
  confirmation?: ConfirmationPolicy;
  /** The design sources' risk class (`read_only` for reads; `writable` by default for writes). */
  risk?: RiskClass;
  /** The tool's output comes from outside the host's trust (the web, an MCP server): the Rule of Two counts it. */
  untrustedOutput?: boolean;
  /**
   * For a write: the read tools whose facts it depends on. While one of them ended unknown (and has not succeeded
   * since), the write is refused. Undefined: every read does (the conservative default); `[]`: none.
   */
  dependsOn?: readonly string[];
  /** The mandate gate. A task with a mandate refuses a write whose tool has no rule (reads pass without one). */
  mandate?: MandateRule<I>;
  /** Money the call moves, in minor units of the host's currency: debited from the task's money budget first. */
  amount?: (args: I) => number;
  /** One line shown to the approver, e.g. "Refund 999.00 on order O-1001". */
  describeConfirmation?: (args: I) => string;
  /** Arguments as the audit and the approver see them. */
  redact?: (args: I) => Json;
  /**
   * For a write: the write that undoes it, and that write's arguments from this one's validated arguments and its
   * trusted result. Pure and synchronous; a rule that throws leaves the write recorded as not compensable.
   */
  compensation?: CompensationRule<I>;
  /** A sub-task tool (`defineSubtask`): its call starts a child task instead of running `execute`. */
  subtask?: SubtaskRules<I>;
}

/**
 * What a sub-task tool's call starts: the child's goal, tools (a subset of the parent's), mandate (no wider than the
 * parent's) and share of the parent's budgets, all from the validated arguments. Pure and synchronous; a rule that
 * throws refuses the call.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so rules of all argument types share one list
export interface SubtaskRules<I = any> {
  tools: readonly string[];
  goal: (args: I) => string;
  /**
   * The child's mandate from the parent's (null: the child has none, allowed only when the parent has none either),
   * or a refusal when it would not be narrower than the parent's.
   */
  mandate: (
    args: I,
    parent: Readonly<Mandate> | null,
  ) => { ok: true; mandate: { kind: string; terms: Json } | null } | { ok: false; code: string; summary: string };
  /** The child's share of the parent's budgets (dimensions left out get 0; tokens default to turns x reservation). */
  budget: (
    args: I,
  ) => Partial<Record<'modelTurns' | 'toolCalls' | 'writes' | 'retries' | 'tokens' | 'costMicros' | 'money', number>>;
  /** The child's success criterion (it names one of the child's tools), or null: the child can at best answer. */
  success: {
    tool: string;
    match?: Record<string, string | number | boolean>;
    require?: string[];
    description?: string;
  } | null;
}

/** How a write is undone: the compensating write tool, and its arguments from the write's arguments and result. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so rules of all argument types share one list
export interface CompensationRule<I = any, O = any> {
  tool: string;
  args: (args: I, result: O) => unknown;
}

/** What a host's offer rule sees when a model turn starts: where the task is, not what the model said. */
export interface OfferFacts {
  /** The turn about to start (1 for the first). */
  turn: number;
  /** Tools that returned a trusted result so far in this task, in the order they first did. */
  succeeded: readonly string[];
  /** The kind of the task's mandate, or null. */
  mandateKind: string | null;
}

/**
 * Which tools the model is offered this turn (a step of the host's flow: search first, book once a room was found),
 * among those the task's principal may use. Pure and synchronous; a call to a tool not offered is refused
 * (`not_offered`). A rule that throws or returns something else offers nothing (the model can only answer).
 */
export type OfferRule = (facts: Readonly<OfferFacts>) => readonly string[];

/** A synchronous host hook of one call, for the task whose context it is: its verdict, never a throw. */
export type SyncCheck = (call: CallRef, context: AgentContext) => CheckVerdict;

export interface Toolkit {
  /** The installed tool of that name, or undefined. */
  rules(name: string): ToolRules | undefined;
  /** The host's rule for the tools offered per turn; absent: every tool the principal may use. */
  offer?: OfferRule;
  /** The host's installed workflow of that name (`createOrchestrator({ workflows })`), or undefined. */
  workflow?: (name: string) => WorkflowDefinition | undefined;
  /** Hex SHA-256 of a UTF-8 string. Injected so that machines/ stays free of runtime imports. */
  sha256(text: string): string;
}

/** A toolkit with no tools: every call fails the schema gate. For diagrams and for charts under test. */
export function emptyToolkit(sha256: (text: string) => string = () => '0'.repeat(64)): Toolkit {
  return { rules: () => undefined, sha256 };
}
