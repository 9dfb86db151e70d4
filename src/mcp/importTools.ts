/**
 * MCP tools as statechart-agent tools, behind the same gates as the host's own.
 *
 * Default deny: a server tool is imported only if the host's policy names it; the others are reported, not offered.
 * Each imported tool is built with `defineTool`, so every definition check applies (snake_case name, strict input,
 * no identity field, a write's lookup, confirmation and rate-limit settings), and the orchestrator gates its calls
 * exactly like a local tool's. What the server says (descriptions, schemas, annotations, results) is treated as
 * untrusted: see policy.ts for the hints, schema.ts for the input, result.ts for the output.
 */
import type { z } from 'zod';
import { cap, safeErrorText } from '../../machines/lib/text.js';
import { McpConnectionError, McpLookupUnavailableError, McpPolicyError } from '../errors.js';
import {
  type ReadTool,
  type Tool,
  type ToolContext,
  type ToolResult,
  TransientToolError,
  type WriteTool,
  defineTool,
} from '../tool.js';
import type { McpConnection } from './connect.js';
import {
  type HintConflictMode,
  type McpToolHints,
  type McpToolPolicy,
  type McpWritePolicy,
  applyHints,
  checkPolicyShape,
} from './policy.js';
import {
  DEFAULT_MAX_RESULT_BYTES,
  type McpCallResult,
  lookupValueAsOutput,
  readCallResult,
  toToolResult,
  untrustedOutputSchema,
} from './result.js';
import { inputFromJsonSchema } from './schema.js';

/** The `_meta` field that carries a write's idempotency key, for servers that deduplicate by it. */
export const IDEMPOTENCY_META_KEY = 'io.statechart-agent/idempotency-key';

const NAME = /^[a-z][a-z0-9_]{0,63}$/;
const MAX_DESCRIPTION = 1_000;
const MAX_PAGES = 100;
/** The SDK's own request timeout is set past ours, so that the host's timeout decides (and reports) first. */
const SDK_TIMEOUT_GRACE_MS = 1_000;

export interface ImportMcpToolsOptions {
  /** The host's decision per MCP tool name. Tools not named here are not imported. */
  policy: Record<string, McpToolPolicy>;
  /** A server tool without a policy entry: left out and reported (`'skip'`, default), or an error (`'throw'`). */
  onUnlisted?: 'skip' | 'throw';
  /** A host "read" the server marks as writing: an error (default), left out, or imported as a confirmed write. */
  onHintConflict?: HintConflictMode;
  /** Cap on a result's text, and on its structured content, in UTF-8 bytes (default 16 KiB). */
  maxResultBytes?: number;
  /** The server's name in the descriptions the model sees (default: the name it gave in the handshake, capped). */
  serverLabel?: string;
  /** Time allowed for listing the server's tools (default 10 s). */
  listTimeoutMs?: number;
}

export type McpSkipReason = 'not_in_policy' | 'hint_conflict' | 'needs_task_execution';

export interface ImportedMcpTools {
  /** The tools to install (`createOrchestrator({ tools: [...own, ...tools] })`). */
  tools: Tool[];
  /** Server tools not imported, and why. */
  skipped: { name: string; reason: McpSkipReason; detail: string }[];
  /** Policy entries the server has no tool for. */
  missing: string[];
  /** What the server's hints changed in the host's settings, by imported tool name. */
  tightened: { name: string; changes: string[] }[];
}

interface ListedTool {
  name: string;
  description?: string;
  inputSchema: unknown;
  annotations?: McpToolHints;
  execution?: { taskSupport?: string };
}

/**
 * Lists the server's tools and builds a `Tool` for each that the host's policy names.
 *
 * @example
 * const { tools, skipped } = await importMcpTools(connection, {
 *   policy: {
 *     lookupOrder: { name: 'lookup_order', effect: 'read', scopes: ['orders:read'], timeoutMs: 2_000 },
 *     create_payment: { effect: 'write', scopes: ['payments:write'], timeoutMs: 5_000, lookup: findPayment, sameKeyRetrySafe: true },
 *   },
 * });
 */
export async function importMcpTools(
  connection: McpConnection,
  options: ImportMcpToolsOptions,
): Promise<ImportedMcpTools> {
  const policies = options.policy;
  if (!policies || typeof policies !== 'object')
    throw new McpPolicyError('*', 'importMcpTools needs a policy: { [mcpToolName]: McpToolPolicy }');
  const maxBytes = options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
  if (!(Number.isInteger(maxBytes) && maxBytes >= 256))
    throw new McpPolicyError('*', 'maxResultBytes must be a whole number of at least 256');
  const label = cap(options.serverLabel ?? connection.server.name, 80).replace(/["\\]/g, '');
  const listed = await listTools(connection, options.listTimeoutMs ?? 10_000);
  const result: ImportedMcpTools = { tools: [], skipped: [], missing: [], tightened: [] };
  const names = new Map<string, string>();
  for (const server of listed) {
    const policy = Object.hasOwn(policies, server.name) ? policies[server.name] : undefined;
    if (policy === undefined) {
      if (options.onUnlisted === 'throw')
        throw new McpPolicyError(
          server.name,
          'the server offers it and the policy does not name it (onUnlisted: throw)',
        );
      result.skipped.push({ name: server.name, reason: 'not_in_policy', detail: 'the host policy does not name it' });
      continue;
    }
    checkPolicyShape(server.name, policy);
    if (server.execution?.taskSupport === 'required') {
      result.skipped.push({
        name: server.name,
        reason: 'needs_task_execution',
        detail: 'the server runs it only as an MCP task, which this import does not support',
      });
      continue;
    }
    const verdict = applyHints(server.name, policy, server.annotations, options.onHintConflict ?? 'throw');
    if (!verdict.ok) {
      result.skipped.push({ name: server.name, reason: 'hint_conflict', detail: verdict.detail });
      continue;
    }
    const tool = buildTool(connection, server, verdict.effective.policy, { label, maxBytes });
    const earlier = names.get(tool.name);
    if (earlier !== undefined)
      throw new McpPolicyError(server.name, `its name ${tool.name} is also the name of ${earlier}; rename one`);
    names.set(tool.name, server.name);
    result.tools.push(tool);
    if (verdict.effective.tightened.length > 0)
      result.tightened.push({ name: tool.name, changes: verdict.effective.tightened });
  }
  const offered = new Set(listed.map((t) => t.name));
  result.missing = Object.keys(policies).filter((name) => !offered.has(name));
  return result;
}

async function listTools(connection: McpConnection, timeoutMs: number): Promise<ListedTool[]> {
  const tools: ListedTool[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    let answer: { tools?: unknown; nextCursor?: unknown };
    try {
      answer = (await connection.client.listTools(cursor ? { cursor } : undefined, {
        timeout: timeoutMs,
      })) as typeof answer;
    } catch (error) {
      throw new McpConnectionError(`listing its tools failed (${safeErrorText(error)})`, { cause: error });
    }
    if (!Array.isArray(answer.tools)) throw new McpConnectionError('its tool list is not a list');
    for (const entry of answer.tools as ListedTool[]) {
      if (typeof entry?.name !== 'string' || entry.name === '')
        throw new McpConnectionError('it lists a tool without a name');
      if (seen.has(entry.name))
        throw new McpConnectionError(`it lists the tool ${JSON.stringify(cap(entry.name, 80))} twice`);
      seen.add(entry.name);
      tools.push(entry);
    }
    cursor = typeof answer.nextCursor === 'string' && answer.nextCursor !== '' ? answer.nextCursor : undefined;
    if (!cursor) return tools;
  }
  throw new McpConnectionError(`its tool list has more than ${MAX_PAGES} pages`);
}

function buildTool(
  connection: McpConnection,
  server: ListedTool,
  policy: McpToolPolicy,
  settings: { label: string; maxBytes: number },
): Tool {
  const mcpName = server.name;
  const name = policy.name ?? mcpName;
  if (!NAME.test(name)) {
    throw new McpPolicyError(
      mcpName,
      `the model needs a snake_case name (a-z, 0-9, _): give its policy name: '${suggestName(mcpName)}'`,
    );
  }
  const keyArgument = policy.effect === 'write' ? policy.keyArgument : undefined;
  const input = policy.input ?? inputFromJsonSchema(mcpName, server.inputSchema, keyArgument);
  const output: z.ZodType = policy.output ?? untrustedOutputSchema;
  const description = policy.description ?? describeFromServer(mcpName, server.description, settings.label);
  const { serverArguments, lookup: _lookup, keyArgument: _key, serverErrors, ...rest } = policy as McpWritePolicy;
  const send = (args: Record<string, unknown>, signal: AbortSignal, meta?: Record<string, string>) =>
    connection.client.callTool({ name: mcpName, arguments: args, ...(meta ? { _meta: meta } : {}) }, undefined, {
      signal,
      timeout: policy.timeoutMs + SDK_TIMEOUT_GRACE_MS,
    });
  /** The arguments for the server; a host mapping that throws is a host failure, and nothing is sent. */
  const prepare = (
    args: unknown,
    ctx: ToolContext,
  ): { ok: true; args: Record<string, unknown> } | { ok: false; result: ToolResult<never> } => {
    const refuse = (why: string) => ({
      ok: false as const,
      result: {
        ok: false as const,
        code: 'internal_error',
        summary: `${name}: serverArguments ${why}; nothing was sent`,
      },
    });
    let mapped: unknown;
    try {
      mapped = serverArguments ? serverArguments(args, ctx) : args;
    } catch (error) {
      return refuse(`failed (${safeErrorText(error)})`);
    }
    if (typeof mapped !== 'object' || mapped === null || Array.isArray(mapped))
      return refuse('did not return an object');
    return { ok: true, args: mapped as Record<string, unknown> };
  };
  const resultOptions = { toolName: name, maxBytes: settings.maxBytes, hostOutput: policy.output !== undefined };
  // A server's output is not the host's: untrusted input for the Rule of Two unless the host says otherwise.
  const base = {
    ...rest,
    scopes: [...policy.scopes],
    name,
    description,
    input,
    output,
    untrustedOutput: policy.untrustedOutput ?? true,
  };

  if (policy.effect === 'read') {
    const tool: ReadTool = {
      ...(base as unknown as Omit<ReadTool, 'execute'>),
      effect: 'read',
      async execute(args, ctx) {
        const prepared = prepare(args, ctx);
        if (!prepared.ok) return prepared.result;
        let raw: unknown;
        try {
          raw = await send(prepared.args, ctx.signal);
        } catch (error) {
          // The request did not get an answer (transport, protocol, the SDK's timeout): worth another attempt.
          if (ctx.signal.aborted) throw error;
          throw new TransientToolError(`the MCP request failed (${safeErrorText(error)})`);
        }
        // An error established nothing about the facts (unverified, as after a timeout) unless the host says the
        // server's errors are answers.
        return toToolResult(raw, {
          ...resultOptions,
          errorCode: serverErrors === 'final' ? 'server_error' : 'tool_error',
        });
      },
    };
    return defineTool(tool);
  }

  const tool: WriteTool = {
    ...(base as unknown as Omit<WriteTool, 'execute' | 'lookup' | 'sameKeyRetrySafe'>),
    effect: 'write',
    sameKeyRetrySafe: policy.sameKeyRetrySafe ?? false,
    async execute(args, ctx) {
      // Thrown errors propagate: the outcome is unknown, so the runtime looks the write up by its key.
      const prepared = prepare(args, ctx);
      if (!prepared.ok) return prepared.result;
      const sent = keyArgument ? { ...prepared.args, [keyArgument]: ctx.idempotencyKey } : prepared.args;
      const raw = await send(sent, ctx.signal, { [IDEMPOTENCY_META_KEY]: ctx.idempotencyKey });
      return toToolResult(raw, {
        ...resultOptions,
        errorCode: serverErrors === 'unknown' ? 'tool_error' : 'server_error',
      });
    },
    async lookup(idempotencyKey, ctx) {
      if (!policy.lookup) throw new McpLookupUnavailableError(name);
      const callTool = async (toolName: string, args: Record<string, unknown> = {}): Promise<McpCallResult> => {
        const raw = await connection.client.callTool({ name: toolName, arguments: args }, undefined, {
          signal: ctx.signal,
          timeout: policy.timeoutMs + SDK_TIMEOUT_GRACE_MS,
        });
        const read = readCallResult(raw, settings.maxBytes);
        if (!read) throw new Error(`${toolName}: the MCP server's answer is not a tool result`);
        return read;
      };
      const found = await policy.lookup(idempotencyKey, { ...ctx, callTool });
      // Without a host output schema the tool's output is the untrusted shape: the found value is put in it.
      if (!found.found || policy.output !== undefined) return found;
      return { found: true, value: lookupValueAsOutput(found.value, settings.maxBytes) };
    },
  };
  return defineTool(tool);
}

/** The server's description, capped and marked as its own words, so the model (and a reader) can tell. */
function describeFromServer(mcpName: string, text: string | undefined, label: string): string {
  const said = typeof text === 'string' ? cap(text, MAX_DESCRIPTION) : '';
  if (!said) return `The tool "${cap(mcpName, 80)}" of the MCP server "${label}" (it gave no description).`;
  return `From the MCP server "${label}" (its own words, unverified): ${said}`;
}

function suggestName(mcpName: string): string {
  const snake = mcpName
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .toLowerCase()
    .slice(0, 64);
  return /^[a-z]/.test(snake) ? snake : `mcp_${snake}`.slice(0, 64);
}
