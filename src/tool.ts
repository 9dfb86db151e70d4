/**
 * The tool contract: a tool is data (name, schemas, effect, scopes, confirmation rule, timeout, retry) plus code
 * (execute, and for writes an idempotent execute + lookup pair). The host calls it; the model never does.
 *
 * Tools receive the trusted principal and an AbortSignal from the host. No input schema may carry identity:
 * `defineTool` refuses fields such as `requester_id` or `user_id`.
 */
import { z } from 'zod';
import type { Json, Mandate, Principal, RiskClass } from '../machines/context.js';
import { RISK_CLASSES } from '../machines/context.js';
import type {
  ApprovalRule,
  ConfirmationPolicy,
  ConfirmationRule,
  ConfirmationWaiver,
  MandateRule,
  MandateVerdict,
  TaskFacts,
} from '../machines/toolkit.js';
import { canonicalJson } from '../machines/lib/canonicalJson.js';
import { ToolDefinitionError } from './errors.js';
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
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so tools of all argument types share one Tool[]
export type Tool<I = any, O = any> = ReadTool<I, O> | WriteTool<I, O>;

const NAME = /^[a-z][a-z0-9_]{0,63}$/;
/** Identity comes from the host session; an argument that names a user would let the model choose one. */
const IDENTITY_FIELDS =
  /^(requester|requester_id|requested_by|user|user_id|userid|principal|principal_id|tenant|tenant_id|on_behalf_of|actor|actor_id|employee_id|caller|caller_id|scopes?|role|roles|permissions?)$/i;

/**
 * Checks a tool definition and returns it unchanged. Throws `ToolDefinitionError` for: a name that is not
 * snake_case, an input schema that is not a strict object, an identity field in the input, retries on a write,
 * a write without lookup, a non-positive timeout.
 *
 * @example
 * const getOrder = defineTool({
 *   name: 'get_order', description: 'Reads one order.', effect: 'read', scopes: ['orders:read'], timeoutMs: 2000,
 *   input: z.strictObject({ order_id: z.string() }), output: orderSchema,
 *   execute: async (args, ctx) => ({ ok: true, value: await orders.get(args.order_id, ctx.signal) }),
 * });
 */
export function defineTool<I, O>(tool: ReadTool<I, O>): ReadTool<I, O>;
export function defineTool<I, O>(tool: WriteTool<I, O>): WriteTool<I, O>;
export function defineTool(tool: Tool): Tool {
  const fail = (detail: string): never => {
    throw new ToolDefinitionError(tool.name, detail);
  };
  if (!NAME.test(tool.name)) fail('the name must be snake_case (a-z, 0-9, _), starting with a letter');
  if (!tool.description.trim()) fail('the description is empty');
  if (!(tool.timeoutMs > 0)) fail('timeoutMs must be positive');
  if (tool.version !== undefined && !(typeof tool.version === 'string' && /^\S.{0,127}$/.test(tool.version))) {
    fail('version must be a non-empty string of at most 128 characters');
  }
  if (tool.compatibleWith !== undefined) {
    const earlier = tool.compatibleWith as unknown;
    if (!Array.isArray(earlier) || earlier.some((v) => !(typeof v === 'string' && /^\S.{0,127}$/.test(v)))) {
      fail('compatibleWith must be a list of versions (non-empty strings of at most 128 characters)');
    }
    if (new Set(earlier as string[]).size !== (earlier as string[]).length)
      fail('compatibleWith lists a version twice');
    if (tool.version !== undefined && (earlier as string[]).includes(tool.version))
      fail(`compatibleWith lists the tool's own version ${JSON.stringify(tool.version)}`);
  }
  for (const [which, schema] of [
    ['input', tool.input],
    ['output', tool.output],
  ] as const) {
    if (!schema || typeof schema !== 'object' || !('_zod' in schema)) {
      fail(
        `the ${which} schema is not a zod 4 schema; statechart-agent needs zod ^4.0.0 (zod 3 schemas, including zod 3.25's root export, are not supported)`,
      );
    }
  }
  let schema: Record<string, unknown>;
  try {
    schema = z.toJSONSchema(tool.input, { io: 'input' }) as Record<string, unknown>;
  } catch (error) {
    return fail(`the input schema cannot be expressed as JSON Schema (${(error as Error).message})`);
  }
  if (schema.type !== 'object') fail('the input schema must be an object');
  if (schema.additionalProperties !== false) fail('the input schema must reject unknown fields (use z.strictObject)');
  for (const field of Object.keys((schema.properties as Record<string, unknown>) ?? {})) {
    if (IDENTITY_FIELDS.test(field)) {
      fail(`the input has an identity field "${field}"; identity comes from the host's principal, not from arguments`);
    }
  }
  checkConfirmation(tool, fail);
  if (tool.sensitive !== undefined) {
    const { args = [], output = [] } = tool.sensitive;
    for (const path of [...args, ...output]) {
      if (typeof path !== 'string' || !/^[^.\s]+(\.[^.\s]+)*$/.test(path))
        fail(`sensitive path ${JSON.stringify(path)} must be dotted field names ("card.number", "items.*.iban")`);
    }
    const fields = Object.keys((schema.properties as Record<string, unknown>) ?? {});
    for (const path of args) {
      const first = path.split('.')[0]!;
      if (first !== '*' && !fields.includes(first))
        fail(`sensitive argument ${JSON.stringify(path)} names no field of the input schema`);
    }
  }
  if (tool.mandate !== undefined && typeof tool.mandate !== 'function')
    fail('mandate must be a function (args, mandate) => verdict; see defineMandate');
  if (typeof tool.mandate === 'function' && tool.mandate.constructor?.name === 'AsyncFunction')
    fail('mandate must be synchronous (a pure rule over the arguments)');
  if (tool.rateLimit !== undefined) {
    const { points, perSeconds } = tool.rateLimit;
    if (!(Number.isInteger(points) && points > 0 && Number.isInteger(perSeconds) && perSeconds > 0)) {
      fail('rateLimit needs whole positive points and perSeconds');
    }
  }
  if ('amount' in tool && tool.amount !== undefined) {
    if (tool.effect !== 'write') fail('only a write moves money: remove amount from a read');
    if (typeof tool.amount !== 'function') fail('amount must be a function (args) => minor units');
  }
  checkRisk(tool, fail);
  if (tool.untrustedOutput !== undefined && typeof tool.untrustedOutput !== 'boolean')
    fail('untrustedOutput must be true or false');
  if ('dependsOn' in tool && tool.dependsOn !== undefined) {
    if (tool.effect !== 'write') fail('only a write depends on reads: remove dependsOn from a read');
    if (
      !Array.isArray(tool.dependsOn) ||
      !tool.dependsOn.every((name) => typeof name === 'string' && NAME.test(name))
    ) {
      fail('dependsOn must list read tools by name (snake_case), or be [] for none');
    }
  }
  if (tool.effect === 'write') {
    if ('retry' in tool && tool.retry)
      fail('writes are never retried blindly; remove retry (reconciliation uses lookup)');
    if (typeof tool.lookup !== 'function') fail('a write needs lookup(idempotencyKey) for reconciliation');
    if (typeof tool.sameKeyRetrySafe !== 'boolean') fail('a write must declare sameKeyRetrySafe');
  }
  if (tool.effect === 'read' && tool.retry) {
    if (!(tool.retry.maxAttempts >= 1 && tool.retry.maxAttempts <= 10)) fail('retry.maxAttempts must be 1..10');
  }
  return tool;
}

function checkRisk(tool: Tool, fail: (detail: string) => never): void {
  const { risk } = tool;
  if (risk === undefined) return;
  if (!(RISK_CLASSES as readonly string[]).includes(risk))
    fail(`risk must be one of ${RISK_CLASSES.join(', ')}, not ${JSON.stringify(risk)}`);
  if (tool.effect === 'read' && risk !== 'read_only')
    fail(`a read is read_only; a tool whose effect is ${risk} is a write`);
  if (tool.effect === 'write' && risk === 'read_only')
    fail('a write cannot be read_only: declare it writable, irreversible or high_risk');
}

function checkConfirmation(tool: Tool, fail: (detail: string) => never): void {
  const { confirm, confirmation } = tool;
  if (typeof confirm === 'function' && confirm.constructor?.name === 'AsyncFunction') {
    fail('confirm must be synchronous: it is asked inside a transition, and a promise would decide nothing');
  }
  if (confirm === 'never' && tool.effect === 'write') {
    fail(
      "a write runs unconfirmed only with a reason in writing: confirm: { never: 'why it is safe without one' } (it is recorded in the audit)",
    );
  }
  const waiver =
    confirm && typeof confirm === 'object' && 'never' in confirm ? (confirm as ConfirmationWaiver).never : undefined;
  if (confirm && typeof confirm === 'object' && 'never' in confirm) {
    if (typeof waiver !== 'string' || waiver.trim().length < 3 || waiver.length > 500)
      fail('confirm.never must give the reason (3 to 500 characters) the write needs no confirmation');
    // A waiver beside an approver rule would read as "approvers confirm it" and run unconfirmed.
    const others = Object.keys(confirm).filter((key) => key !== 'never');
    if (others.length > 0)
      fail(
        `confirm.never stands alone: a call either runs unconfirmed or is confirmed, so remove ${others.join(', ')} (or the waiver)`,
      );
    if (tool.risk === 'irreversible' || tool.risk === 'high_risk')
      fail(
        `an ${tool.risk === 'irreversible' ? 'irreversible' : 'high_risk'} write is always confirmed: remove confirm.never`,
      );
    return checkConfirmationPolicy(confirmation, fail);
  }
  if (confirm !== undefined && confirm !== 'never' && confirm !== 'always' && typeof confirm !== 'function') {
    const rule = confirm as Partial<ApprovalRule> | null;
    if (!rule || typeof rule !== 'object' || typeof rule.approverScope !== 'string' || rule.approverScope === '') {
      fail(
        `confirm must be 'never', 'always', { never: reason }, { approverScope, approvals? } or a function, not ${JSON.stringify(confirm)}`,
      );
    }
    if (
      rule.approvals !== undefined &&
      !(Number.isInteger(rule.approvals) && rule.approvals >= 1 && rule.approvals <= 16)
    ) {
      fail('confirm.approvals must be a whole number from 1 to 16');
    }
  }
  checkConfirmationPolicy(confirmation, fail);
}

function checkConfirmationPolicy(confirmation: ConfirmationPolicy | undefined, fail: (detail: string) => never): void {
  if (confirmation !== undefined) {
    if (
      confirmation.onReject !== undefined &&
      confirmation.onReject !== 'replan' &&
      confirmation.onReject !== 'cancel'
    ) {
      fail(`confirmation.onReject must be 'replan' or 'cancel'`);
    }
    if (
      confirmation.onExpiry !== undefined &&
      confirmation.onExpiry !== 'ask_again' &&
      confirmation.onExpiry !== 'cancel'
    ) {
      fail(`confirmation.onExpiry must be 'ask_again' or 'cancel'`);
    }
  }
}

/** The version recorded for `tool`: its own, or a hash of its declared contract. */
export function toolVersion(tool: Tool, sha256: (text: string) => string): string {
  if (tool.version !== undefined) return tool.version;
  let output: unknown;
  try {
    output = z.toJSONSchema(tool.output, { io: 'output', unrepresentable: 'any' });
  } catch {
    output = null;
  }
  const contract = {
    name: tool.name,
    description: tool.description,
    effect: tool.effect,
    scopes: [...tool.scopes].sort(),
    input: toolParametersSchema(tool),
    output,
  };
  return `contract:${sha256(canonicalJson(contract)).slice(0, 16)}`;
}

/** The JSON Schema of a tool's input, as offered to a model. */
export function toolParametersSchema(tool: Tool): Record<string, unknown> {
  const { $schema: _drop, ...schema } = z.toJSONSchema(tool.input, { io: 'input' }) as Record<string, unknown>;
  return schema;
}
