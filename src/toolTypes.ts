/**
 * The tool contract's types: a tool is data (name, schemas, effect, scopes, confirmation rule, timeout, retry) plus
 * code (execute, and for writes an idempotent execute + lookup pair), and what the host hands it when it runs (the
 * trusted principal, an AbortSignal, the idempotency key). `defineTool` (tool.ts) checks a definition.
 */
import type { z } from 'zod';
import type { Json, Mandate, Principal, RiskClass } from '../machines/context.js';
import type {
  ApprovalRule,
  ConfirmationPolicy,
  ConfirmationRule,
  ConfirmationWaiver,
  MandateRule,
  MandateVerdict,
  TaskFacts,
} from '../machines/toolkit.js';
import type { CodedError } from './errorCodes.js';

/** What a tool call produced. Business-terminal failures (conflict, not_found) are values, not throws. */
export type ToolResult<O> = { ok: true; value: O } | { ok: false; code: string; summary: string; retryable?: boolean };

/** Throw from a read's execute to mark a failure as transient: it is retried within the retry policy. */
export class TransientToolError extends Error implements CodedError<'tool_unavailable'> {
  readonly code = 'tool_unavailable' as const;
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export interface ToolContext {
  taskId: string;
  callId: string;
  /** The task's trusted principal, from the host session. */
  principal: Readonly<Principal>;
  /** Aborted on timeout or cancellation: stop work and return. */
  signal: AbortSignal;
  /** 1 for the first attempt. */
  attempt: number;
}

export interface WriteContext extends ToolContext {
  /** Host-made, derived from task + tool + canonical arguments; send it to the service as its idempotency key. */
  idempotencyKey: string;
}

export interface LookupContext {
  taskId: string;
  principal: Readonly<Principal>;
  signal: AbortSignal;
}

export type ValidationResult = { ok: true } | { ok: false; code?: string; summary: string };

export interface ValidationContext {
  taskId: string;
  principal: Readonly<Principal>;
  signal: AbortSignal;
  /**
   * What the user asked for: the task's mandate (null when it has none). A fact of the world the arguments do not
   * carry (does the room have a projector?) is checked against it here, and again right before the write.
   * `defineMandate(...).termsOf(ctx.mandate)` gives its typed terms.
   */
  mandate: Readonly<Mandate> | null;
  /** What the task did so far (the money its writes moved, the writes it started), for rules that bound a total. */
  task: Readonly<TaskFacts>;
}

export type {
  ApprovalRule,
  ConfirmationPolicy,
  ConfirmationRule,
  ConfirmationWaiver,
  MandateRule,
  MandateVerdict,
  RiskClass,
  TaskFacts,
};

/** A per-tenant rate limit of a tool: at most `points` calls per `perSeconds`, counted before a call runs. */
export interface RateLimit {
  points: number;
  perSeconds: number;
}

export interface RetryPolicy {
  /** Total attempts including the first (2 = one retry). */
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export type LookupResult<O> = { found: true; value: O } | { found: false };

interface ToolBase<I, O> {
  /** snake_case, as the model sees it. */
  name: string;
  /** When to use it, what it changes, what success means. */
  description: string;
  /**
   * The tool's version, recorded with every audit entry about it ("2.3.0", a git sha). Default: `contract:` and a
   * hash of what the tool declares (name, description, effect, scopes, input and output schemas), so a changed
   * contract shows as a new version even if nobody bumps it.
   */
  version?: string;
  /**
   * Earlier versions of this tool that this one can stand in for (their `version`, or their `contract:` hash as a
   * task recorded it). A task is driven only by a process whose tools are the ones it started with: same effect, and
   * the version the task recorded, or one listed here. List a version only when this tool takes the calls the older
   * one was offered and answers them as the task expects (a deliberate, compatible upgrade), so that tasks in flight
   * across a deploy carry on instead of waiting for a process with the old tool.
   */
  compatibleWith?: string[];
  /** Input schema; must reject unknown fields (z.strictObject). */
  input: z.ZodType<I>;
  /** Output schema; results that do not match are not trusted. */
  output: z.ZodType<O>;
  /** Scopes the principal must hold. */
  scopes: string[];
  /**
   * Whether a human must confirm these exact arguments first, and who: the task's user (`'always'`, or a predicate
   * returning true), or approvers other than the requester holding a scope (`{ approverScope, approvals? }`, or a
   * predicate returning one). Default: a read runs unconfirmed, a write is confirmed by the task's user. A write that
   * needs no confirmation says why, in writing: `{ never: 'a notice to the requester only' }` (recorded in the audit).
   * The risk class, the money a write moves and the Rule of Two can ask for more than this rule, never for less.
   */
  confirm?: ConfirmationRule<I>;
  /**
   * The design sources' risk class. A read is `read_only` (the default). A write is `writable` (the default: confirmed
   * unless it waives it in writing), `irreversible` (always confirmed by the task's user: no waiver) or `high_risk`
   * (always confirmed, by approvers when the host's policy names them: `highRiskApproval`).
   */
  risk?: RiskClass;
  /**
   * Its output comes from outside the host's trust (web pages, e-mail, another company's API, an MCP server): text in
   * it may try to steer the model. Under the Rule of Two, a task that saw it and holds sensitive data confirms every
   * write. Default false (true for tools imported over MCP).
   */
  untrustedOutput?: boolean;
  /** What a rejected or expired confirmation does: re-plan (default) or cancel the task. */
  confirmation?: ConfirmationPolicy;
  /**
   * How the arguments must relate to the task's mandate (what the user asked for); see `defineMandate`. A task with a
   * mandate refuses a write whose tool declares none.
   */
  mandate?: MandateRule<I>;
  /** A per-tenant rate limit, checked right before a call runs (`rate_limited` when used up). */
  rateLimit?: RateLimit;
  /** One line shown to the approver, e.g. "Refund 999.00 on order O-1001". */
  describeConfirmation?: (args: I) => string;
  /** Per-attempt timeout in milliseconds. */
  timeoutMs: number;
  /** Business validation after the schema: time order, capacity, refundable amount... */
  validate?: (args: I, ctx: ValidationContext) => ValidationResult | Promise<ValidationResult>;
  /** Resource-level permission beyond scopes (e.g. executive rooms). Runs after business validation. */
  authorize?: (args: I, ctx: ValidationContext) => ValidationResult | Promise<ValidationResult>;
  /**
   * How `validate` and `authorize` answer. `'sync'`: at once, with no I/O (they must not be `async` functions nor
   * return a promise): the gate's guard asks them itself, in the step that judges the call, with no invoked state and
   * no timer (`ctx.signal` never aborts); a hook that throws, or returns a promise after all, refuses the call
   * (`unavailable`). `'async'` (the default): each runs in its own invoked state (`vetting.validating`,
   * `vetting.authorizing`) under `timeoutMs`. Either way they are asked again right before a write.
   */
  hooks?: 'sync' | 'async';
  /** Arguments as recorded in the audit trail; default: as they are. */
  redact?: (args: I) => Json;
  /**
   * Fields that hold sensitive values, as dotted paths (`*` for any array element or key): `args` the tool takes,
   * `output` it returns. Their values are sealed before anything is persisted, streamed or shown to the model (a
   * token such as `[[sealed:card_number:…]]` stands in), and opened only for this tool's `validate`, `authorize`,
   * `execute`. The chart's synchronous rules (`mandate`, `amount`, `confirm`, `describeConfirmation`, `redact`)
   * see the token: do not mark a field they depend on.
   */
  sensitive?: { args?: string[]; output?: string[] };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so tools of all argument types share one Tool[]
export interface ReadTool<I = any, O = any> extends ToolBase<I, O> {
  effect: 'read';
  /** Transient failures (timeouts, TransientToolError, retryable results) are retried within this policy. */
  retry?: RetryPolicy;
  execute(args: I, ctx: ToolContext): Promise<ToolResult<O>>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so tools of all argument types share one Tool[]
export interface WriteTool<I = any, O = any> extends ToolBase<I, O> {
  effect: 'write';
  /** Money the call moves, in minor units of the host's currency: debited from the task's money budget before it runs. */
  amount?: (args: I) => number;
  /**
   * The read tools whose facts this write depends on: while a read of one of them ended unknown (a timeout,
   * unavailable, a throw, output its schema refuses) and the same read (same arguments) has not succeeded since, the write is refused
   * (`unverified_facts`), and a task whose re-reads keep failing stops (`could_not_verify`). Default: every read of
   * the task (the conservative choice); `[]`: none. Each name must be a read installed beside it.
   */
  dependsOn?: readonly string[];
  /** True only if the service guarantees that re-sending the same idempotency key never duplicates the effect. */
  sameKeyRetrySafe: boolean;
  /**
   * Must pass `ctx.idempotencyKey` to the service. Never retried blindly by the host. Return
   * `{ ok: false, code: 'needs_review', summary }` when the service's records are inconsistent (an amount mismatch,
   * a duplicate risk): the task then waits for a reviewer.
   */
  execute(args: I, ctx: WriteContext): Promise<ToolResult<O>>;
  /** Finds the effect of an earlier execute by its idempotency key, for reconciliation. Throw if unsure. */
  lookup(idempotencyKey: string, ctx: LookupContext): Promise<LookupResult<O>>;
  /** Retry policy for lookups of an unknown outcome. */
  lookupRetry?: Omit<RetryPolicy, 'maxAttempts'>;
  /**
   * The write that undoes this one (`cancel_booking` for `reserve_room`), and its arguments from this write's
   * validated arguments and trusted result (pure and synchronous). When the task then stops without meeting its goal
   * (policy `compensateOn`: failed, out of budget or cancelled, by default), the writes that succeeded are undone
   * newest first, each a call of its own through the gates (schema, scopes, business validation, permission,
   * confirmation by its own rule, the rate limit), with its own idempotency key, reconciled by lookup when its outcome
   * is unknown. The outcome's `compensations` says what became of each. The tool named must be an installed write.
   */
  compensation?: { tool: string; args: (args: I, result: O) => unknown };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so tools of all argument types share one Tool[]
export type Tool<I = any, O = any> = ReadTool<I, O> | WriteTool<I, O>;
