/** One attempt of a tool call: its timeout, thrown errors and output validation turned into a CallOutcome. */
import type { CallOutcome } from '../../../machines/actors.js';
import { toJson } from '../../../machines/lib/arguments.js';
import { cap, errorName, safeErrorText, zodSummary } from '../../../machines/lib/text.js';
import type { Clock } from '../../clock.js';
import { type Tool, type ToolResult, TransientToolError } from '../../tool.js';
import { runWithTimeout } from '../timeouts.js';

export async function attemptTool<O>(
  clock: Clock,
  tool: Tool<unknown, O>,
  signal: AbortSignal,
  work: (signal: AbortSignal) => Promise<ToolResult<O>>,
): Promise<CallOutcome> {
  let timed;
  try {
    timed = await runWithTimeout(clock, tool.timeoutMs, signal, work);
  } catch (error) {
    if (error instanceof TransientToolError) {
      return { kind: 'error', code: 'unavailable', summary: `${tool.name} is unavailable: ${cap(error.message)}`, retryable: true };
    }
    return { kind: 'error', code: 'tool_error', summary: `${tool.name} failed unexpectedly (${errorName(error)})`, retryable: false };
  }
  if (timed.kind === 'timeout') return { kind: 'error', code: 'timeout', summary: `${tool.name} timed out`, retryable: true };
  if (timed.kind === 'aborted') return { kind: 'error', code: 'aborted', summary: `${tool.name} was aborted`, retryable: false };
  const result = timed.value;
  if (!result.ok) {
    return { kind: 'error', code: result.code, summary: cap(result.summary), retryable: result.retryable ?? false };
  }
  const parsed = tool.output.safeParse(result.value);
  if (!parsed.success) {
    return { kind: 'error', code: 'invalid_output', summary: `${tool.name} returned output that does not match its schema: ${zodSummary(parsed.error)}`, retryable: false };
  }
  try {
    return { kind: 'ok', value: toJson(parsed.data) };
  } catch (error) {
    return { kind: 'error', code: 'invalid_output', summary: `${tool.name} returned non-JSON output (${safeErrorText(error)})`, retryable: false };
  }
}

/** Re-validates arguments the schema gate accepted, as the tool's own typed value. */
export function parseArguments(tool: Tool, args: unknown): { ok: true; value: unknown } | { ok: false; summary: string } {
  const parsed = tool.input.safeParse(args);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, summary: zodSummary(parsed.error) };
}
