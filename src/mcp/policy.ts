/**
 * The host's policy for an MCP tool, and how it meets what the server says about the tool.
 *
 * The host decides every property that a gate reads: the effect, the scopes, the confirmation rule, the timeout, the
 * mandate rule, same-key retry safety. The server's annotations (`readOnlyHint`, `destructiveHint`, ...) come from
 * the party the gates exist to check, so they may only make a tool stricter, never looser:
 *
 * - a host `read` that the server marks `readOnlyHint: false` or `destructiveHint: true` is a contradiction: the
 *   import refuses it (`onHintConflict: 'throw'`, the default), leaves the tool out (`'skip'`), or imports it as a
 *   write under the rules for a write without a host lookup (`'as_write'`);
 * - a host `write` that the server marks `destructiveHint: true` and whose policy gives no `confirm` is confirmed
 *   by the user every time (`confirm: 'always'`); an explicit `confirm` of the host stands;
 * - `readOnlyHint: true` never turns a host `write` into a read, and `idempotentHint` never makes a write retry-safe.
 *
 * Only hints the server states count: the spec's defaults (`readOnlyHint: false`, `destructiveHint: true`) would make
 * every unannotated tool "destructive", and an absent hint says nothing.
 *
 * A write needs the host's `lookup(idempotencyKey)` to be reconciled after an unknown outcome. Without one it is
 * imported only if it is confirmed every time (`'always'` or an approver rule; omitted means `'always'`) and not
 * declared retry-safe: its lookup can only say "unknown", so a timed-out call waits for a reviewer.
 */
import type { z } from 'zod';
import type { Json, RiskClass } from '../../machines/context.js';
import { McpPolicyError } from '../errors.js';
import type {
  ConfirmationPolicy,
  ConfirmationRule,
  LookupContext,
  LookupResult,
  MandateRule,
  RateLimit,
  RetryPolicy,
  ToolContext,
  ValidationContext,
  ValidationResult,
} from '../tool.js';
import type { McpCallResult } from './result.js';

/** What a host lookup of an MCP write gets: the task's context, and the connection's tools to ask. */
export interface McpLookupContext extends LookupContext {
  /** Calls any tool of the same server (host code: not gated), under the lookup's signal and timeout. */
  callTool(name: string, args?: Record<string, unknown>): Promise<McpCallResult>;
}

interface McpPolicyBase<I, O> {
  /** The name the model sees (snake_case). Default: the MCP name, if it already is snake_case. */
  name?: string;
  /** What the model is told. Default: the server's description, capped and marked as the server's own text. */
  description?: string;
  /** Scopes the principal must hold. */
  scopes: readonly string[];
  /** Per-attempt timeout in milliseconds; the MCP request is cancelled when it passes. */
  timeoutMs: number;
  /** Who confirms a call; see `ConfirmationRule`. For a write without `lookup`: `'always'` or an approver rule. */
  confirm?: ConfirmationRule<I>;
  /** What a rejected or expired confirmation does. */
  confirmation?: ConfirmationPolicy;
  /** The tool's risk class (see `defineTool`). */
  risk?: RiskClass;
  /**
   * Whether the server's output is untrusted input for the Rule of Two (a task that saw it and holds sensitive data
   * confirms every write). Default true: a server's text is not the host's. Set false only for a server you run.
   */
  untrustedOutput?: boolean;
  /** How the arguments must fit the task's mandate (`defineMandate(...).rule(...)`). */
  mandate?: MandateRule<I>;
  rateLimit?: RateLimit;
  describeConfirmation?: (args: I) => string;
  validate?: (args: I, ctx: ValidationContext) => ValidationResult | Promise<ValidationResult>;
  authorize?: (args: I, ctx: ValidationContext) => ValidationResult | Promise<ValidationResult>;
  redact?: (args: I) => Json;
  /** Argument and output fields holding sensitive values, sealed everywhere but in the call itself (see `defineTool`). */
  sensitive?: { args?: string[]; output?: string[] };
  /**
   * The input the model may send (a strict zod object). Default: the server's JSON Schema converted with
   * `z.fromJSONSchema`, made strict (unknown fields refused at the schema gate).
   */
  input?: z.ZodType<I>;
  /**
   * The output the host trusts: the result's `structuredContent` (or its text parsed as JSON) must match it.
   * Default: `{ text, structured?, attachments?, truncated? }`, the server's answer as capped, untrusted data.
   */
  output?: z.ZodType<O>;
  /**
   * The arguments sent to the server, from the model's validated ones. Use it to add what the model must not choose,
   * e.g. identity from `ctx.principal`. Default: the arguments as they are.
   */
  serverArguments?: (args: I, ctx: ToolContext) => Record<string, unknown>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so policies of all argument types share one map
export interface McpReadPolicy<I = any, O = any> extends McpPolicyBase<I, O> {
  effect: 'read';
  /** Transient failures (transport errors, timeouts) are retried within this policy. */
  retry?: RetryPolicy;
  /**
   * What an `isError` answer establishes. `'unknown'` (default): nothing. The server says the read failed, so the
   * facts it was to read are unverified, as after a timeout: the model is told (`tool_error`), and a write that
   * depends on the read waits until the same read succeeds. `'final'`: the error is the server's answer (one that
   * reports "not found" as `isError`), `server_error`, and writes may rest on it. Set it only for a server whose
   * errors you know to be answers.
   */
  serverErrors?: 'final' | 'unknown';
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so policies of all argument types share one map
export interface McpWritePolicy<I = any, O = any> extends McpPolicyBase<I, O> {
  effect: 'write';
  /**
   * Finds an earlier call's effect by its idempotency key (e.g. through `ctx.callTool('find_payment', ...)`); throw
   * if unsure. The found value must match `output`; without one, it is the write's structured content (and is shown
   * as `{ text: '', structured }`). Without a lookup, the write must be confirmed every time and an unknown outcome
   * waits for a reviewer.
   */
  lookup?: (idempotencyKey: string, ctx: McpLookupContext) => Promise<LookupResult<O>>;
  /** True only if the server guarantees that the same key never applies twice. Needs `lookup`. Default false. */
  sameKeyRetrySafe?: boolean;
  lookupRetry?: Omit<RetryPolicy, 'maxAttempts'>;
  /** Money the call moves, in minor units (debited from the task's money budget before it runs). */
  amount?: (args: I) => number;
  /** The read tools whose facts this write depends on (see `defineTool`). */
  dependsOn?: readonly string[];
  /**
   * Also send the idempotency key as this argument (for servers that take it as input rather than from `_meta`). It
   * is removed from the schema the model sees.
   */
  keyArgument?: string;
  /**
   * What an `isError` answer means. `'final'` (default): the server says the call failed; the model is told
   * (`server_error`). `'unknown'`: it may still have taken effect, and is looked up like a timeout.
   */
  serverErrors?: 'final' | 'unknown';
}

/** The host's decision about one MCP tool. Tools without one are not imported. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- so policies of all argument types share one map
export type McpToolPolicy<I = any, O = any> = McpReadPolicy<I, O> | McpWritePolicy<I, O>;

/** What the server says about a tool (untrusted). */
export interface McpToolHints {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

export type HintConflictMode = 'throw' | 'skip' | 'as_write';

const KNOWN_FIELDS = new Set([
  'effect',
  'name',
  'description',
  'scopes',
  'timeoutMs',
  'confirm',
  'confirmation',
  'mandate',
  'rateLimit',
  'describeConfirmation',
  'validate',
  'authorize',
  'redact',
  'sensitive',
  'input',
  'output',
  'serverArguments',
  'retry',
  'lookup',
  'sameKeyRetrySafe',
  'lookupRetry',
  'amount',
  'keyArgument',
  'serverErrors',
  'risk',
  'untrustedOutput',
  'dependsOn',
]);
const WRITE_ONLY = ['lookup', 'sameKeyRetrySafe', 'lookupRetry', 'amount', 'keyArgument', 'dependsOn'] as const;

/** Checks the fields `defineTool` does not know about; a typo in a safety field must not pass silently. */
export function checkPolicyShape(mcpName: string, policy: McpToolPolicy): void {
  const fail = (detail: string): never => {
    throw new McpPolicyError(mcpName, detail);
  };
  if (!policy || typeof policy !== 'object') fail('its policy must be an object');
  for (const key of Object.keys(policy)) {
    if (!KNOWN_FIELDS.has(key)) fail(`its policy has an unknown field "${key}"`);
  }
  if (policy.effect !== 'read' && policy.effect !== 'write')
    fail(`effect must be 'read' or 'write', not ${JSON.stringify((policy as { effect?: unknown }).effect)}`);
  if (!Array.isArray(policy.scopes) || !policy.scopes.every((s) => typeof s === 'string'))
    fail('scopes must be a list of strings (may be empty)');
  if (policy.serverErrors !== undefined && policy.serverErrors !== 'final' && policy.serverErrors !== 'unknown')
    fail(`serverErrors must be 'final' or 'unknown'`);
  if (policy.effect === 'read') {
    for (const key of WRITE_ONLY) if (key in policy) fail(`${key} applies to a write only`);
  } else {
    if (policy.lookup !== undefined && typeof policy.lookup !== 'function')
      fail('lookup must be a function (idempotencyKey, ctx) => { found, value }');
    if (policy.sameKeyRetrySafe !== undefined && typeof policy.sameKeyRetrySafe !== 'boolean')
      fail('sameKeyRetrySafe must be a boolean');
    if (policy.keyArgument !== undefined && !/^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/.test(String(policy.keyArgument)))
      fail('keyArgument must be a field name');
  }
}

/** The settings a tool is built with once the hints and the write rules have been applied. */
export interface EffectivePolicy {
  policy: McpToolPolicy;
  /** Why the settings differ from the host's, for the import report (empty when they do not). */
  tightened: string[];
}

export type HintVerdict = { ok: true; effective: EffectivePolicy } | { ok: false; detail: string };

/** Applies the server's hints (tighten only) and the write rules to a host policy. Throws McpPolicyError. */
export function applyHints(
  mcpName: string,
  policy: McpToolPolicy,
  hints: McpToolHints | undefined,
  mode: HintConflictMode,
): HintVerdict {
  const tightened: string[] = [];
  let effective: McpToolPolicy = policy;
  const saysWrites = hints?.readOnlyHint === false || hints?.destructiveHint === true;
  if (policy.effect === 'read' && saysWrites) {
    const said = hints?.destructiveHint === true ? 'destructiveHint: true' : 'readOnlyHint: false';
    const detail = `the host's policy says "read" but the server says ${said}`;
    if (mode === 'throw') {
      throw new McpPolicyError(
        mcpName,
        `${detail}; make it a write (with a lookup), or import with onHintConflict 'skip' or 'as_write'`,
      );
    }
    if (mode === 'skip') return { ok: false, detail };
    const { retry: _retry, ...rest } = policy;
    effective = { ...rest, effect: 'write' };
    tightened.push(`imported as a write: ${detail}`);
    // The host wrote a read's confirmation rule; a write without lookup is confirmed every time, whatever it said.
    if (!isForcedConfirmation(effective.confirm)) {
      effective = { ...effective, confirm: 'always' };
      tightened.push("confirm: 'always' (a write without a host lookup)");
    }
  }
  if (effective.effect === 'write' && hints?.destructiveHint === true && effective.confirm === undefined) {
    effective = { ...effective, confirm: 'always' };
    tightened.push("confirm: 'always' (the server says destructiveHint: true and the policy sets no confirm)");
  }
  if (effective.effect === 'write' && effective.lookup === undefined) {
    if (effective.sameKeyRetrySafe === true) {
      throw new McpPolicyError(
        mcpName,
        'sameKeyRetrySafe needs a host lookup (a write is only re-sent after a lookup found nothing)',
      );
    }
    if (effective.confirm === undefined) {
      effective = { ...effective, confirm: 'always' };
      tightened.push("confirm: 'always' (a write without a host lookup)");
    } else if (!isForcedConfirmation(effective.confirm)) {
      throw new McpPolicyError(
        mcpName,
        `a write without a host lookup must be confirmed every time (confirm 'always' or an approver rule), not ${describeRule(effective.confirm)}; or give it a lookup`,
      );
    }
  }
  return { ok: true, effective: { policy: effective, tightened } };
}

/** A rule that asks someone every time: the user (`'always'`) or approvers. Predicates may say no. */
function isForcedConfirmation(rule: ConfirmationRule | undefined): boolean {
  return rule === 'always' || (typeof rule === 'object' && rule !== null && 'approverScope' in rule);
}

function describeRule(rule: ConfirmationRule): string {
  return typeof rule === 'function' ? 'a predicate' : JSON.stringify(rule);
}
