/**
 * The rules every model adapter applies the same way, whatever the provider SDK: what a turn costs, which statuses
 * are worth retrying and after how long, which text is a tool call written as text (never a final answer), how a
 * provider's message is made safe to store, and the host's notes to the model. Imports no provider SDK, so each
 * adapter entry loads only its own.
 */

import { createHash } from 'node:crypto';
import type { Observation } from '../../machines/context.js';
import type { TranscriptEntry } from '../../machines/journal.js';

/** Prices in micro-units of the host currency per million tokens. */
export interface ModelPrices {
  inputPerMillionMicros: number;
  outputPerMillionMicros: number;
}

/** Cost in micro-units, rounded up. */
export function priceOf(tokens: { inputTokens: number; outputTokens: number }, prices: ModelPrices): number {
  return Math.ceil(
    (tokens.inputTokens * prices.inputPerMillionMicros + tokens.outputTokens * prices.outputPerMillionMicros) /
      1_000_000,
  );
}

/** Statuses worth retrying: timeouts, lock conflicts, rate limits and server errors (as the SDKs' own retry rules). */
export const isTransientStatus = (status: number) =>
  status === 408 || status === 409 || status === 429 || status >= 500;

/** Milliseconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date), if present and sane. */
export function retryAfterMs(
  header: (name: 'retry-after-ms' | 'retry-after') => string | null | undefined,
  now = Date.now(),
): number | undefined {
  const ms = header('retry-after-ms');
  if (ms) {
    const value = Number.parseFloat(ms);
    if (Number.isFinite(value) && value >= 0) return Math.round(value);
  }
  const after = header('retry-after')?.trim();
  if (after) {
    const seconds = Number(after);
    if (Number.isFinite(seconds) && seconds >= 0) return Math.round(seconds * 1000);
    const date = Date.parse(after);
    if (Number.isFinite(date)) return Math.max(0, date - now);
  }
  return undefined;
}

/** One line, capped at 200 characters, with the given secrets and anything key-like masked. */
export function maskedLine(message: string, secrets: readonly (string | undefined)[] = []): string {
  let text = message.replace(/\s+/g, ' ').trim();
  for (const secret of secrets) if (secret && secret.length >= 4) text = text.split(secret).join('[key]');
  text = text
    .replace(/\b(sk|pk|rk)-[A-Za-z0-9_*-]{6,}/g, '[key]')
    .replace(/\bAIza[0-9A-Za-z_-]{20,}/g, '[key]')
    .replace(/\bBearer\s+[A-Za-z0-9._~+/*-]+=*/g, 'Bearer [key]')
    .replace(/([?&](?:key|api_key|apikey)=)[^&\s]+/gi, '$1[key]');
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/**
 * The markers servers leave in the text when their tool-call parser failed (Hermes/Qwen `<tool_call>`, Mistral
 * `[TOOL_CALLS]`, Llama `<|python_tag|>` and `<function=`), or a whole reply that is a JSON tool call. Such a reply
 * is not a final answer: taken as one, the task would end on a call that never ran.
 */
const TOOL_CALL_MARKERS = [
  /<tool_call>/i,
  /<\|tool_call\|>/i,
  /\[TOOL_CALLS\]/,
  /<\|python_tag\|>/,
  /<function=[\w.-]+>/,
  /<\|tool▁call/,
];

/** How `content` shows a tool call written as text, or null when it is plain text. */
export function textualToolCall(content: string): string | null {
  const marker = TOOL_CALL_MARKERS.find((pattern) => pattern.test(content));
  if (marker) return `marker ${JSON.stringify(content.match(marker)![0])}`;
  const trimmed = content.trim().replace(/^```(?:json)?\s*([\s\S]*?)\s*```$/, '$1');
  if (!trimmed.startsWith('{') && !trimmed.startsWith('[')) return null;
  try {
    const parsed: unknown = JSON.parse(trimmed);
    const items = Array.isArray(parsed) ? parsed : [parsed];
    const looksLikeCall = (item: unknown) =>
      typeof item === 'object' &&
      item !== null &&
      typeof (item as { name?: unknown }).name === 'string' &&
      ('arguments' in item || 'parameters' in item);
    return items.length > 0 && items.every(looksLikeCall) ? 'a JSON object with "name" and "arguments"' : null;
  } catch {
    return null;
  }
}

/** The detail of an unusable reply that wrote a tool call as text. */
export const writtenCallDetail = (how: string) =>
  `a tool call was written as text (${how}) instead of through the tools interface; call tools as tool calls`;

/** A note the host adds to the rebuilt conversation only (compaction's facts of older turns): never persisted. */
export interface HostNote {
  kind: 'host_note';
  text: string;
}

/**
 * A transcript entry that is plain text as a chat message: the goal and the user's answers as the user's; the
 * model's answers, questions, refusals and text without calls as the assistant's; the host's notes as user messages
 * marked as the host's. Null for the other entries (calls and their results are each provider's own shape).
 */
export function textMessageOf(
  entry: TranscriptEntry | HostNote,
): { role: 'assistant' | 'user'; content: string } | null {
  switch (entry.kind) {
    case 'host_note':
      return { role: 'user', content: entry.text };
    case 'goal':
      return { role: 'user', content: entry.text };
    case 'proposal':
      return entry.calls.length === 0 && entry.text ? { role: 'assistant', content: entry.text } : null;
    case 'answer':
    case 'question':
    case 'refusal':
      return { role: 'assistant', content: entry.text };
    case 'user_answer':
      return { role: 'user', content: entry.text };
    case 'no_answer':
      return { role: 'user', content: hostNotes.noAnswer(entry.question) };
    case 'invalid_output':
      return { role: 'user', content: hostNotes.invalidOutput(entry.detail) };
    case 'plan_progress':
      return { role: 'user', content: hostNotes.planProgress(entry.text) };
    default:
      return null;
  }
}

/** The host's notes to the model, sent as user messages marked as not coming from the user. */
export const hostNotes = {
  noAnswer: (question: string) =>
    `[Host note, not from the user] Nobody answered your question in time ("${question}"). Go on without an answer, or end with a final answer.`,
  planProgress: (progress: string) =>
    `[Host note, not from the user] The plan's state, from tool results (each step's status changes only from its tool's result):\n${progress}`,
  invalidOutput: (detail: string) =>
    `[Host note, not from the user] Your previous reply could not be used: ${detail}. ` +
    'Reply again with tool calls (each with a unique id and a JSON object as arguments) or with a final answer.',
  /** Older turns replaced by the facts the host recorded from them (src/model/compaction.ts). */
  compacted: (facts: string) => `[Host note, not from the user] ${facts}`,
};

/**
 * Each call's result, by turn and call id (some servers reuse ids such as "call_0" from one response to the next).
 * The latest result of a call wins: a write a reviewer resolved after the fact is sent as they found it. A call
 * without one is said not to have run.
 */
export function pairedResults(
  transcript: readonly TranscriptEntry[],
): (turn: number, call: { callId: string; tool: string }) => Observation {
  const key = (turn: number, callId: string) => `${turn}\u0000${callId}`;
  const results = new Map<string, Observation>();
  for (const entry of transcript)
    if (entry.kind === 'result') results.set(key(entry.turn, entry.observation.callId), entry.observation);
  return (turn, call) =>
    results.get(key(turn, call.callId)) ?? {
      callId: call.callId,
      tool: call.tool,
      ok: false,
      code: 'missing_result',
      summary: 'the host has no result for this call; assume it did not run',
      retryable: false,
    };
}

/** Most of an unusable output an adapter hands on for the audit (the runtime cuts it further and redacts it). */
const RECEIVED_BOUND = 16_384;

/** An unusable output as text for the audit: a string as it is, anything else as JSON; bounded either way. */
export function receivedText(output: unknown): string | undefined {
  let text: string | undefined;
  try {
    text = typeof output === 'string' ? output : JSON.stringify(output);
  } catch {
    text = undefined;
  }
  return text === undefined || text === '' ? undefined : text.slice(0, RECEIVED_BOUND);
}

/** What both model adapters take besides the model itself and its output token limit. */
export interface AdapterOptions {
  /** Upper bound of one turn's prompt tokens, for the reservation (default 16,000). */
  promptTokenBound?: number;
  /** Sampling temperature; left out of the request when unset. */
  temperature?: number;
  /** Replaces the default host instructions (the system prompt). */
  systemPrompt?: string;
  /** The version of `systemPrompt` recorded in the audit (default: a hash of the instructions). */
  promptVersion?: string;
  /** The model version to record, when the host pins one (default: the model each response reports). */
  modelVersion?: string;
  /** Cap of each tool result sent to the model, in UTF-8 bytes (default 8,192). */
  maxToolResultBytes?: number;
  /** Prices per million tokens in micro-units; without them a turn costs 0. */
  prices?: ModelPrices;
  /** Offer tools as `strict` when their schema qualifies (default true); false for servers and providers that refuse it. */
  strictTools?: boolean;
  /** Longest Retry-After honoured, in ms (default 60,000); a server asking for longer is retried sooner. */
  maxRetryAfterMs?: number;
  /**
   * Estimated tokens (characters / 4) the conversation after the system prompt may take before its older turns are
   * replaced by one host note of their facts (default: 3/4 of promptTokenBound). See src/model/compaction.ts.
   */
  maxPromptTokens?: number;
  /**
   * Stream each turn (default false) so that live views see the answer's text, and the tool calls (as unvetted
   * proposals, to views that ask), as they are written (`orchestrator.watchModelText`, the `model_text` and
   * `model_call` events of the task's event stream, in any process on the same Redis). The chart still gets one event
   * per turn, the same as unstreamed. Off by default: an unstreamed turn is the path every provider serves alike,
   * while a stream can break mid-turn (the whole turn is then asked again) and some compatible servers leave the
   * usage out of a stream (the turn is then charged its reservation).
   */
  stream?: boolean;
}

/**
 * The model version an adapter pins (if the host gave one) and the version of its prompt: the host's name for it,
 * or a hash of the instructions themselves (`defaultPrompt` when the host gave none).
 */
export function adapterProvenance(
  options: AdapterOptions,
  defaultPrompt: string,
): { version?: string; promptVersion: string } {
  const instructions = options.systemPrompt ?? defaultPrompt;
  const promptVersion =
    options.promptVersion ?? `prompt:${createHash('sha256').update(instructions, 'utf8').digest('hex').slice(0, 12)}`;
  return options.modelVersion ? { version: options.modelVersion, promptVersion } : { promptVersion };
}
