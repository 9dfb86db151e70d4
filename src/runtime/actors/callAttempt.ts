/** One attempt of a tool call: its timeout, thrown errors and output validation turned into a CallOutcome. */
import type { CallOutcome } from '../../../machines/actors.js';
import type { Json, Principal } from '../../../machines/context.js';
import type { Privacy, SealScope } from '../../privacy/privacy.js';
import { type CallSealing, openArguments, sealCallText, sealOutcome } from '../sealing.js';
import { CALL_CODES, type CallCode } from '../../../machines/failures.js';
import { copyOf, toJson } from '../../../machines/lib/arguments.js';
import { cap, errorName, safeErrorText, zodSummary } from '../../../machines/lib/text.js';
import type { Clock } from '../../clock.js';
import { type Tool, type ToolResult, TransientToolError } from '../../tool.js';
import { type Cancel, runWithTimeout } from '../timeouts.js';

/**
 * The task's principal as a host function receives it: a copy, so that a hook or tool that changed it (a scope
 * added) cannot change the trusted principal the chart's gates judge later calls by.
 */
export function principalCopy(principal: Principal): Principal {
  return copyOf(principal);
}

/** A failure the host itself observed, retryable as the code table says. */
function failed(code: CallCode, summary: string): CallOutcome {
  return { kind: 'error', code, summary, retryable: CALL_CODES[code].retryable };
}

/**
 * Runs one attempt and says what came of it, sealed as the task may record it (`sealing`): texts are sealed before
 * they are cut to their bound, so a cut never leaves part of a value that a whole one would have matched.
 */
export async function attemptTool<O>(
  clock: Clock,
  tool: Tool<unknown, O>,
  stop: Cancel,
  work: (stop: Cancel) => Promise<ToolResult<O>>,
  sealing: CallSealing,
): Promise<CallOutcome> {
  let timed;
  try {
    timed = await runWithTimeout(clock, tool.timeoutMs, stop, work);
  } catch (error) {
    if (error instanceof TransientToolError)
      return failed('unavailable', `${tool.name} is unavailable: ${textOf(sealing, error.message)}`);
    return failed('tool_error', `${tool.name} failed unexpectedly (${errorName(error)})`);
  }
  if (timed.kind === 'timeout') return failed('timeout', `${tool.name} timed out`);
  if (timed.kind === 'aborted') return failed('aborted', `${tool.name} was aborted`);
  const result = timed.value;
  if (!result.ok) {
    return sealOutcome(sealing, {
      kind: 'error',
      code: String(result.code),
      summary: textOf(sealing, String(result.summary)),
      retryable: result.retryable ?? false,
    });
  }
  const parsed = tool.output.safeParse(result.value);
  if (!parsed.success) {
    // What the schema says about a sensitive output field is not repeated: a message might quote the value.
    const why = tool.sensitive?.output?.length ? 'it fails the output schema' : zodSummary(parsed.error);
    return failed(
      'invalid_output',
      `${tool.name} returned output that does not match its schema: ${textOf(sealing, why)}`,
    );
  }
  try {
    return sealOutcome(sealing, { kind: 'ok', value: toJson(parsed.data) });
  } catch (error) {
    return failed('invalid_output', `${tool.name} returned non-JSON output (${safeErrorText(error)})`);
  }
}

/** A text of the call's, sealed as the task may record it, then cut to its bound. */
function textOf(sealing: CallSealing, raw: string): string {
  return cap(sealCallText(sealing, raw));
}

/** The span attributes of a tool call, and what its outcome adds. */
export function toolSpanAttributes(tool: Tool, callId: string, attempt: number, idempotencyKey?: string) {
  return {
    'statechart_agent.tool.name': tool.name,
    'statechart_agent.tool.effect': tool.effect,
    'statechart_agent.call.id': callId,
    'statechart_agent.call.attempt': attempt,
    ...(idempotencyKey ? { 'statechart_agent.idempotency_key': idempotencyKey } : {}),
  };
}

export function describeOutcome(outcome: CallOutcome): { attributes: Record<string, string>; error?: string } {
  const code = outcome.kind === 'ok' ? 'ok' : outcome.code;
  return {
    attributes: { 'statechart_agent.call.code': code },
    ...(outcome.kind === 'ok' ? {} : { error: `${code}: ${outcome.summary}` }),
  };
}

/**
 * Re-validates arguments the schema gate accepted, as the tool's own typed value: with the sealed values at its
 * sensitive paths opened (only this task's). What the schema says is not returned when the tool has sensitive
 * fields: a message might quote a value.
 */
export function parseArguments(
  privacy: Privacy,
  scope: SealScope,
  tool: Tool,
  args: Json,
):
  | { ok: true; value: unknown; sealing: CallSealing }
  | { ok: false; code: 'invalid_arguments' | 'sealed_value_unavailable'; summary: string } {
  const opened = openArguments(privacy, scope, tool, args);
  if (!opened.ok) return { ok: false, code: 'sealed_value_unavailable', summary: opened.summary };
  // Parsed from a copy: a schema passes values it does not type (`z.unknown()`, records) through by reference, and a
  // hook or tool that changed one would change the task's own arguments after they were judged and hashed.
  const parsed = tool.input.safeParse(copyOf(opened.value));
  if (parsed.success) return { ok: true, value: parsed.data, sealing: { privacy, scope, tool, opened: opened.opened } };
  return {
    ok: false,
    code: 'invalid_arguments',
    summary: tool.sensitive?.args?.length ? 'the arguments no longer match the input schema' : zodSummary(parsed.error),
  };
}
