/**
 * Streaming for both OpenAI adapters (`stream: true`). A stream is read to its end and assembled into the body the
 * server would have sent whole, so the reply is mapped by the same code as a non-streamed one (`toModelReply`,
 * `toResponsesReply`): the chart sees the same event either way. On the way, the answer's text deltas go to `onText`
 * in order, and a tool call's pieces (its id and name once known, its argument fragments) to `onCallText`: for live
 * views that asked for them, as a proposal nobody has vetted yet (the runtime redacts and labels them).
 *
 * A stream that fails mid-way (connection cut, proxy timeout, an `error` event) or ends before the turn finished (no
 * finish reason, no `response.completed`) is a TransientModelError: retried against the retry budget, and nothing of
 * it, a half-built call least of all, ever reaches the chart. An abort (timeout, cancellation) is ModelAbortedError:
 * the client ends an aborted stream quietly, so the signal is checked once the stream is done.
 */
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { Response, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { type ModelRequest, TransientModelError } from '../agentModel.js';
import { maskedLine } from '../replyRules.js';
import { ModelAbortedError } from './openaiReply.js';

/** Where the pieces go as they arrive (the request's `onText` and `onCallText`). */
type Live = Pick<ModelRequest, 'onText' | 'onCallText'>;

interface CallParts {
  id?: string;
  type?: string;
  name?: string;
  arguments: string;
}

/**
 * Chat Completions chunks (`chat.completion.chunk`) assembled into a `chat.completion`: content and refusal joined,
 * each tool call's id, type and name as first sent and its argument fragments joined (by the chunk's `index`, else
 * its position), the finish reason, and the usage of the last chunk (`stream_options.include_usage`), or failing that
 * llama.cpp's `timings`.
 */
export async function readChatStream(
  chunks: AsyncIterable<unknown>,
  live: Live,
  signal: AbortSignal,
  secrets: readonly (string | undefined)[] = [],
): Promise<Partial<ChatCompletion>> {
  let head: Partial<ChatCompletionChunk> = {};
  let content: string | null = null;
  let refusal: string | null = null;
  let finish: string | null = null;
  let usage: ChatCompletion['usage'] | undefined;
  // llama.cpp's running count: with `timings_per_token` every chunk carries one, so the last one is the turn's.
  let timed: ChatCompletion['usage'] | undefined;
  // By the index the server numbers each call with (any number: one numbered -1 or 1.5 is still a call, and 2^32 - 2
  // must not make a sparse array walked slot by slot), else by its position in the chunk.
  const calls = new Map<number, CallParts>();
  const count = await readAll(chunks, signal, secrets, (raw) => {
    if (typeof raw !== 'object' || raw === null) return;
    const chunk = raw as Partial<ChatCompletionChunk>;
    if (head.id === undefined && typeof chunk.id === 'string') head = chunk;
    if (chunk.usage) usage = chunk.usage;
    timed = timingsUsage(raw) ?? timed;
    const choice = Array.isArray(chunk.choices)
      ? (chunk.choices.find((c) => c?.index === 0 || c?.index === undefined) ?? undefined)
      : undefined;
    if (!choice || typeof choice !== 'object') return;
    const delta = (choice.delta ?? {}) as Partial<ChatCompletionChunk.Choice.Delta>;
    if (typeof delta.content === 'string' && delta.content !== '') {
      content = (content ?? '') + delta.content;
      live.onText?.(delta.content);
    } else if (typeof delta.content === 'string' && content === null) content = '';
    if (typeof delta.refusal === 'string') refusal = (refusal ?? '') + delta.refusal;
    (Array.isArray(delta.tool_calls) ? delta.tool_calls : []).forEach((part, position) => {
      if (typeof part !== 'object' || part === null) return;
      const at = typeof part.index === 'number' && Number.isFinite(part.index) ? part.index : position;
      let call = calls.get(at);
      if (call === undefined) calls.set(at, (call = { arguments: '' }));
      if (typeof part.id === 'string' && call.id === undefined) call.id = part.id;
      if (typeof part.type === 'string' && call.type === undefined) call.type = part.type;
      const fn = part.function as { name?: unknown; arguments?: unknown } | undefined;
      if (typeof fn?.name === 'string' && fn.name !== '' && fn.name !== call.name)
        call.name = (call.name ?? '') + fn.name;
      let piece = '';
      if (typeof fn?.arguments === 'string') call.arguments += piece = fn.arguments;
      // A server that sends the arguments as an object sends them whole: kept as their JSON text.
      else if (fn?.arguments !== null && typeof fn?.arguments === 'object' && call.arguments === '')
        call.arguments = piece = JSON.stringify(fn.arguments);
      live.onCallText?.({
        index: at,
        ...(call.id === undefined ? {} : { callId: call.id }),
        ...(call.name === undefined ? {} : { name: call.name }),
        arguments: piece,
      });
    });
    if (typeof choice.finish_reason === 'string') finish = choice.finish_reason;
  });
  if (finish === null) throw incomplete(count, 'no finish reason');
  usage ??= timed;
  const toolCalls = [...calls]
    .sort(([a], [b]) => a - b)
    .map(([, call]) => ({
      ...(call.id === undefined ? {} : { id: call.id }),
      ...(call.type === undefined ? {} : { type: call.type }),
      function: { name: call.name as string, arguments: call.arguments },
    }));
  return {
    ...(head.id !== undefined ? { id: head.id } : {}),
    object: 'chat.completion',
    ...(typeof head.created === 'number' ? { created: head.created } : {}),
    ...(typeof head.model === 'string' ? { model: head.model } : {}),
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content,
          refusal,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        } as ChatCompletion.Choice['message'],
        finish_reason: finish as ChatCompletion.Choice['finish_reason'],
        logprobs: null,
      },
    ],
    ...(usage ? { usage } : {}),
  };
}

/**
 * llama.cpp's own count, on the last chunk of a stream that carries no `usage` (its `timings`: the prompt tokens
 * taken from the cache plus those evaluated, and the tokens predicted), so the turn is charged what the server
 * counted rather than its whole reservation.
 */
function timingsUsage(chunk: object): ChatCompletion['usage'] | undefined {
  const timings = (chunk as { timings?: unknown }).timings;
  if (typeof timings !== 'object' || timings === null) return undefined;
  const { cache_n: cached = 0, prompt_n: prompt, predicted_n: predicted } = timings as Record<string, unknown>;
  const count = (n: unknown) => (typeof n === 'number' && Number.isInteger(n) && n >= 0 ? n : null);
  const [c, p, o] = [count(cached), count(prompt), count(predicted)];
  if (c === null || p === null || o === null) return undefined;
  return { prompt_tokens: c + p, completion_tokens: o, total_tokens: c + p + o };
}

/**
 * Responses API events read to the terminal one: `response.completed`, `response.incomplete` or `response.failed`,
 * whose `response` is the whole response as the non-streamed call returns it. Text deltas
 * (`response.output_text.delta`) go to `onText`; a `function_call` item as it is added, then its argument deltas
 * (`response.function_call_arguments.delta`, by `item_id`), to `onCallText`, numbered in the order the calls began;
 * everything else is only waited through.
 */
export async function readResponsesStream(
  events: AsyncIterable<unknown>,
  live: Live,
  signal: AbortSignal,
  secrets: readonly (string | undefined)[] = [],
): Promise<Partial<Response>> {
  let final: Partial<Response> | undefined;
  /** Each function call's item id -> its position, id and name. */
  const calls = new Map<string, { index: number; callId?: string; name?: string }>();
  const count = await readAll(events, signal, secrets, (raw) => {
    if (final || typeof raw !== 'object' || raw === null) return;
    const event = raw as Partial<ResponseStreamEvent> & { delta?: unknown; response?: unknown };
    if (event.type === 'response.output_text.delta' && typeof event.delta === 'string' && event.delta !== '') {
      live.onText?.(event.delta);
    } else if (event.type === 'response.output_item.added' || event.type === 'response.function_call_arguments.delta') {
      callPiece(raw as Record<string, unknown>, calls, live);
    } else if (
      (event.type === 'response.completed' ||
        event.type === 'response.incomplete' ||
        event.type === 'response.failed') &&
      typeof event.response === 'object' &&
      event.response !== null
    ) {
      final = event.response as Partial<Response>;
    }
  });
  if (!final) throw incomplete(count, 'no response.completed');
  return final;
}

/** A Responses event about a function call, to `onCallText`: the item as it is added, then its argument deltas. */
function callPiece(
  event: Record<string, unknown>,
  calls: Map<string, { index: number; callId?: string; name?: string }>,
  live: Live,
): void {
  if (!live.onCallText) return;
  if (event.type === 'response.output_item.added') {
    const item = event.item as Record<string, unknown> | null | undefined;
    if (item?.type !== 'function_call' || typeof item.id !== 'string' || calls.has(item.id)) return;
    const call = {
      index: calls.size,
      ...(typeof item.call_id === 'string' ? { callId: item.call_id } : {}),
      ...(typeof item.name === 'string' ? { name: item.name } : {}),
    };
    calls.set(item.id, call);
    live.onCallText({ ...call, arguments: typeof item.arguments === 'string' ? item.arguments : '' });
    return;
  }
  const call = typeof event.item_id === 'string' ? calls.get(event.item_id) : undefined;
  if (call && typeof event.delta === 'string' && event.delta !== '')
    live.onCallText({ ...call, arguments: event.delta });
}

/** Iterates to the end; a failure mid-way becomes a transient error, an abort ModelAbortedError. Returns the count. */
async function readAll(
  items: AsyncIterable<unknown>,
  signal: AbortSignal,
  secrets: readonly (string | undefined)[],
  each: (item: unknown) => void,
): Promise<number> {
  let count = 0;
  try {
    for await (const item of items) {
      count += 1;
      each(item);
    }
  } catch (error) {
    if (signal.aborted) throw new ModelAbortedError();
    if (error instanceof TransientModelError) throw error;
    const name = error instanceof Error ? error.name : typeof error;
    const message = error instanceof Error ? maskedLine(error.message, secrets).slice(0, 200) : '';
    throw new TransientModelError(
      `the model's stream broke after ${count} events (${name}${message ? `: ${message}` : ''}); nothing of it was used`,
    );
  }
  if (signal.aborted) throw new ModelAbortedError();
  return count;
}

function incomplete(count: number, missing: string): TransientModelError {
  return new TransientModelError(
    `the model's stream ended after ${count} events with ${missing}; the turn is incomplete and nothing of it was used`,
  );
}
