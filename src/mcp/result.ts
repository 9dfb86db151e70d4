/**
 * An MCP `tools/call` result as a tool result: checked, capped, and passed on as data.
 *
 * What a server returns is untrusted input, for the host and for the model. It is parsed with a schema of our own
 * (not the SDK's, so that a host-made client is held to it too). Text is capped in UTF-8 bytes and handed over as a
 * JSON string field (`{ text }`), which the orchestrator shows the model as a tool observation: data, never an
 * instruction, and never a change to scopes, budgets or confirmations. Images, audio and resources are summarised
 * (type, MIME type, size, link), never passed raw. `isError` becomes a failure value, not an exception.
 */
import { z } from 'zod';
import type { Json } from '../../machines/context.js';
import { cap } from '../../machines/lib/text.js';
import type { ToolResult } from '../tool.js';

export const DEFAULT_MAX_RESULT_BYTES = 16 * 1024;
const MAX_ATTACHMENTS = 20;

const contentBlock = z.looseObject({ type: z.string() });
const callToolResult = z.looseObject({
  content: z.array(contentBlock).optional(),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
  isError: z.boolean().optional(),
});

/** A summary of one non-text content block. */
export const attachmentSchema = z.strictObject({
  type: z.string(),
  mimeType: z.string().optional(),
  uri: z.string().optional(),
  name: z.string().optional(),
  bytes: z.number().int().nonnegative().optional(),
});

/** The default output of an imported tool: the server's answer as untrusted, capped data. */
export const untrustedOutputSchema = z.strictObject({
  /** The text blocks joined by newlines, capped. */
  text: z.string(),
  /** `structuredContent`, if the server sent it and it fits under the cap. */
  structured: z.record(z.string(), z.json()).optional(),
  attachments: z.array(attachmentSchema).optional(),
  /** Set when text or structured content was cut or left out for size. */
  truncated: z.literal(true).optional(),
});
export type UntrustedOutput = z.infer<typeof untrustedOutputSchema>;

/** A checked MCP result, for host code (lookups): text capped, structured content as sent. */
export interface McpCallResult {
  isError: boolean;
  text: string;
  structuredContent?: Record<string, unknown>;
}

export interface ResultOptions {
  toolName: string;
  maxBytes: number;
  /** The host's output schema, if any: then the value is the structured content (or JSON in the text). */
  hostOutput: boolean;
  /** The code of an `isError` answer: `server_error` (the server says it failed) or `tool_error` (look it up). */
  errorCode: 'server_error' | 'tool_error';
}

/** Parses a raw result for host code; `null` when it is not a CallToolResult. */
export function readCallResult(raw: unknown, maxBytes = DEFAULT_MAX_RESULT_BYTES): McpCallResult | null {
  const parsed = callToolResult.safeParse(raw);
  if (!parsed.success) return null;
  const { text } = joinText(parsed.data.content ?? [], maxBytes);
  return {
    isError: parsed.data.isError === true,
    text,
    ...(parsed.data.structuredContent ? { structuredContent: parsed.data.structuredContent } : {}),
  };
}

/** The tool result of a raw MCP result. The runtime then validates `value` against the tool's output schema. */
export function toToolResult(raw: unknown, options: ResultOptions): ToolResult<unknown> {
  const parsed = callToolResult.safeParse(raw);
  if (!parsed.success) {
    return {
      ok: false,
      code: 'invalid_output',
      summary: `${options.toolName}: the MCP server's answer is not a tool result`,
    };
  }
  const { content = [], structuredContent, isError } = parsed.data;
  const { text, truncated } = joinText(content, options.maxBytes);
  if (isError === true) {
    const said = text ? `: ${cap(text, 200)}` : '';
    return {
      ok: false,
      code: options.errorCode,
      summary: `${options.toolName} failed, as the MCP server reports${said}`,
      retryable: false,
    };
  }
  if (options.hostOutput) return hostValue(options, structuredContent, content);
  const value: UntrustedOutput = { text };
  if (structuredContent !== undefined) {
    if (byteLength(structuredContent) <= options.maxBytes) value.structured = structuredContent as Record<string, Json>;
    else value.truncated = true;
  }
  const attachments = summarise(content);
  if (attachments.length > 0) value.attachments = attachments;
  if (truncated) value.truncated = true;
  return { ok: true, value };
}

/** The value checked against a host's output schema: structured content, or one text block holding JSON. */
function hostValue(
  options: ResultOptions,
  structured: Record<string, unknown> | undefined,
  content: { type: string }[],
): ToolResult<unknown> {
  let value: unknown = structured;
  if (value === undefined) {
    const texts = content.filter(isText);
    if (texts.length === 1 && Buffer.byteLength(texts[0]!.text) <= options.maxBytes) {
      try {
        value = JSON.parse(texts[0]!.text);
      } catch {
        // not JSON: nothing the output schema could accept
      }
    }
  }
  if (value === undefined) {
    return {
      ok: false,
      code: 'invalid_output',
      summary: `${options.toolName}: the MCP server sent no structured content to check against the output schema`,
    };
  }
  // A write's output that is too large is still "not trusted" (invalid_output), which a write reconciles.
  if (byteLength(value) > options.maxBytes) {
    return {
      ok: false,
      code: 'invalid_output',
      summary: `${options.toolName}: the MCP server's structured content is larger than ${options.maxBytes} bytes`,
    };
  }
  return { ok: true, value };
}

function isText(block: { type: string }): block is { type: 'text'; text: string } {
  return block.type === 'text' && typeof (block as { text?: unknown }).text === 'string';
}

/** Text blocks joined by newlines, cut at `maxBytes` UTF-8 bytes (never inside a character). */
function joinText(content: { type: string }[], maxBytes: number): { text: string; truncated?: true } {
  const joined = content
    .filter(isText)
    .map((block) => block.text)
    .join('\n');
  const bytes = Buffer.from(joined, 'utf8');
  if (bytes.length <= maxBytes) return { text: joined };
  const marker = ` …[cut: ${bytes.length} bytes in all]`;
  const kept = bytes
    .subarray(0, Math.max(0, maxBytes - Buffer.byteLength(marker)))
    .toString('utf8')
    .replace(/\uFFFD+$/, '');
  return { text: `${kept}${marker}`, truncated: true };
}

/** Non-text blocks as summaries: what they are and how big, never their bytes or embedded text. */
function summarise(content: { type: string }[]): z.infer<typeof attachmentSchema>[] {
  const summaries: z.infer<typeof attachmentSchema>[] = [];
  for (const block of content) {
    if (block.type === 'text') continue;
    if (summaries.length >= MAX_ATTACHMENTS) break;
    const b = block as Record<string, unknown>;
    const resource = (typeof b.resource === 'object' && b.resource !== null ? b.resource : {}) as Record<
      string,
      unknown
    >;
    const mimeType = str(b.mimeType) ?? str(resource.mimeType);
    const uri = str(b.uri) ?? str(resource.uri);
    const name = str(b.name);
    const payload = str(b.data) ?? str(resource.blob);
    const bytes =
      payload !== undefined
        ? base64Bytes(payload)
        : str(resource.text) !== undefined
          ? Buffer.byteLength(str(resource.text)!)
          : undefined;
    summaries.push({
      type: cap(block.type, 40),
      ...(mimeType !== undefined ? { mimeType: cap(mimeType, 100) } : {}),
      ...(uri !== undefined ? { uri: cap(uri, 300) } : {}),
      ...(name !== undefined ? { name: cap(name, 100) } : {}),
      ...(bytes !== undefined ? { bytes } : {}),
    });
  }
  return summaries;
}

/** The decoded size of base64 text, without decoding it. */
function base64Bytes(data: string): number {
  const trimmed = data.replace(/\s+/g, '');
  const padding = trimmed.endsWith('==') ? 2 : trimmed.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((trimmed.length * 3) / 4) - padding);
}

/**
 * A host lookup's found value as the default output: a record is the write's structured content, anything else its
 * text (a lookup has no text blocks to show).
 */
export function lookupValueAsOutput(value: unknown, maxBytes: number): UntrustedOutput {
  if (typeof value === 'object' && value !== null && !Array.isArray(value))
    return { text: '', structured: value as Record<string, Json> };
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  return joinText([{ type: 'text', text } as { type: string }], maxBytes);
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function byteLength(value: unknown): number {
  try {
    return Buffer.byteLength(JSON.stringify(value) ?? '');
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}
