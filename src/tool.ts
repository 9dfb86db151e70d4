/**
 * Defining a tool: `defineTool` checks a definition against the contract (toolTypes.ts) and returns it unchanged;
 * `toolVersion` and `toolParametersSchema` give what is recorded and what a model is offered. The host calls a tool;
 * the model never does.
 *
 * Tools receive the trusted principal and an AbortSignal from the host. No input schema may carry identity:
 * `defineTool` refuses fields such as `requester_id` or `user_id`, also nested (`customer.tenant_id`).
 */
import { z } from 'zod';
import { RISK_CLASSES } from '../machines/context.js';
import type { ApprovalRule, ConfirmationPolicy, ConfirmationWaiver } from '../machines/toolkit.js';
import { canonicalJson } from '../machines/lib/canonicalJson.js';
import { identityFieldInSchema } from '../machines/lib/identityFields.js';
import { ToolDefinitionError } from './errors.js';
import type { ReadTool, Tool, WriteTool } from './toolTypes.js';

export * from './toolTypes.js';

const NAME = /^[a-z][a-z0-9_]{0,63}$/;
/**
 * Checks a tool definition and returns it unchanged. Throws `ToolDefinitionError` for: a name that is not
 * snake_case, an effect other than 'read' or 'write', an input schema that is not a strict object, an identity
 * field in the input, retries on a write, a write without lookup, a non-positive timeout.
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
  // Every gate tells reads from writes by this field: anything else would be neither, and fail at each start.
  if ((tool.effect as unknown) !== 'read' && (tool.effect as unknown) !== 'write')
    fail(`effect must be 'read' or 'write', not ${JSON.stringify(tool.effect) ?? 'undefined'}`);
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
    schema = jsonSchemaOf(tool.input, 'input');
  } catch (error) {
    return fail(`the input schema cannot be expressed as JSON Schema (${(error as Error).message})`);
  }
  if (schema.type !== 'object') fail('the input schema must be an object');
  if (schema.additionalProperties !== false) fail('the input schema must reject unknown fields (use z.strictObject)');
  // At any depth (`customer.tenant_id`): identity comes from ctx.principal, or an MCP policy's serverArguments.
  const identity = identityFieldInSchema(schema);
  if (identity?.kind === 'field')
    fail(
      `the input has an identity field "${identity.path}"; identity comes from the host's principal, not from arguments`,
    );
  if (identity?.kind === 'bound') fail(`${identity.detail}; identity fields are checked only within that bound`);
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
  if (tool.hooks !== undefined && tool.hooks !== 'sync' && tool.hooks !== 'async')
    fail(`hooks must be 'sync' or 'async' (the default)`);
  for (const hook of ['validate', 'authorize'] as const) {
    const run = tool[hook] as unknown;
    if (run !== undefined && typeof run !== 'function') fail(`${hook} must be a function (args, ctx) => verdict`);
    if (tool.hooks === 'sync' && typeof run === 'function' && run.constructor?.name === 'AsyncFunction')
      fail(`${hook} is an async function but the tool declares hooks: 'sync'; make it synchronous or drop the flag`);
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
  if ('compensation' in tool && tool.compensation !== undefined) {
    const compensation = tool.compensation as { tool?: unknown; args?: unknown } | null;
    if (tool.effect !== 'write') fail('only a write is compensated: remove compensation from a read');
    if (typeof compensation?.tool !== 'string' || !NAME.test(compensation.tool))
      fail('compensation.tool must name the compensating write tool (snake_case)');
    if (compensation!.tool === tool.name) fail('a write cannot compensate itself: name the tool that undoes it');
    if (typeof compensation!.args !== 'function' || compensation!.args.constructor?.name === 'AsyncFunction')
      fail('compensation.args must be a synchronous function (args, result) => the compensating arguments');
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

/**
 * JSON Schemas by zod schema and direction, made once: a zod schema's methods return new schemas, so its JSON Schema
 * stays as it is, and making it is the costly part of checking a task's catalog on every restore by a new orchestrator
 * (measured: ~5% of a resume). Held weakly, so a schema no longer used is dropped with it. The one change not seen:
 * metadata registered on an existing schema or one of its parts (`schema.register(z.globalRegistry, …)`, which
 * returns the same schema) after its JSON Schema was first made; register metadata before tools are installed.
 */
const jsonSchemas = { input: new WeakMap<object, Record<string, unknown>>(), output: new WeakMap<object, unknown>() };

/** The JSON Schema of `schema` for `io` (cached); throws as `z.toJSONSchema` does, and a throw is not cached. */
function jsonSchemaOf(schema: z.ZodType, io: 'input'): Record<string, unknown>;
function jsonSchemaOf(schema: z.ZodType, io: 'output'): unknown;
function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): unknown {
  const cache = jsonSchemas[io];
  if (cache.has(schema)) return cache.get(schema);
  const made = deepFreeze(
    io === 'input'
      ? z.toJSONSchema(schema, { io: 'input' })
      : z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any' }),
  ) as Record<string, unknown>;
  cache.set(schema, made);
  return made;
}

/** Frozen, so that a caller that changes a schema it was given cannot change what the next caller gets. */
function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

/**
 * Contract hashes by tool, with what they were made from: a new orchestrator checks a restored task's catalog against
 * its tools, so the hash of an unchanged tool is taken once per process, and again only if the tool was changed.
 */
const contractHashes = new WeakMap<Tool, { from: unknown[]; version: string }>();

/** The version recorded for `tool`: its own, or a hash of its declared contract. */
export function toolVersion(tool: Tool, sha256: (text: string) => string): string {
  if (tool.version !== undefined) return tool.version;
  const from = [sha256, tool.name, tool.description, tool.effect, JSON.stringify(tool.scopes), tool.input, tool.output];
  const known = contractHashes.get(tool);
  if (known && known.from.every((part, i) => part === from[i])) return known.version;
  const version = contractHash(tool, sha256);
  contractHashes.set(tool, { from, version });
  return version;
}

function contractHash(tool: Tool, sha256: (text: string) => string): string {
  let output: unknown;
  try {
    output = jsonSchemaOf(tool.output, 'output');
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

/** The JSON Schema of a tool's input, as offered to a model (its nested parts are shared and frozen). */
export function toolParametersSchema(tool: Tool): Record<string, unknown> {
  const { $schema: _drop, ...schema } = jsonSchemaOf(tool.input, 'input');
  return schema;
}
