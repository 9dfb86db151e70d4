/**
 * Response side of the OpenAI adapter: a Chat Completions response mapped to a ModelReply, and transport errors
 * sorted into retryable (TransientModelError) and not. The mapping never parses, repairs or drops tool calls:
 * duplicate or missing call ids and malformed JSON arguments reach the machine's protocol gate as they came.
 */
import type { APIError } from 'openai';
import { openai } from '../../peers/openai.js';
import type { ChatCompletion } from 'openai/resources/chat/completions';
import {
  type ModelReply,
  type ModelReplyWithVersion,
  type ModelUsageReport,
  TransientModelError,
} from '../agentModel.js';
import { ProviderRequestError, classifyProviderError, settleProviderError } from '../providerErrors.js';
import {
  type ModelPrices,
  priceOf,
  receivedText,
  retryAfterMs,
  textualToolCall,
  writtenCallDetail,
} from '../replyRules.js';
import type { CodedError } from '../../errorCodes.js';

export { type ModelPrices, priceOf, retryAfterMs };

export interface ReplyOptions {
  prices?: ModelPrices;
  /** Charged when the server reports no usage: the turn's reservation, so budgets fail closed. */
  fallbackUsage: { inputTokens: number; outputTokens: number };
}

/** Maps one response. `response` is whatever the client returned (a server may send non-JSON text). */
export function toModelReply(response: unknown, options: ReplyOptions): ModelReplyWithVersion {
  if (typeof response === 'string') {
    return {
      type: 'invalid',
      // The text itself is kept (sealed) as `received`; a cut excerpt here could hold part of a value.
      detail: `the server answered ${response.length} characters of text, not a chat completion`,
      received: response,
      usage: usageOf({}, options),
    };
  }
  const completion = (typeof response === 'object' && response !== null ? response : {}) as Partial<ChatCompletion>;
  const reply = mapCompletion(completion, usageOf(completion, options));
  // The model that answered, as the server names it ("gpt-4o-2024-08-06"): the audit records it.
  return typeof completion.model === 'string' && completion.model !== ''
    ? { ...reply, modelVersion: completion.model }
    : reply;
}

function mapCompletion(completion: Partial<ChatCompletion>, usage: ModelUsageReport): ModelReply {
  const choice = Array.isArray(completion.choices) ? completion.choices[0] : undefined;
  const message = (choice && typeof choice === 'object' ? choice.message : undefined) as
    Partial<ChatCompletion.Choice['message']> | undefined;
  // What the audit keeps of an output it cannot use: the message, else the whole response.
  const invalid = (detail: string): ModelReply => ({
    type: 'invalid',
    detail,
    received: receivedText(message ?? completion),
    usage,
  });
  if (!choice || typeof choice !== 'object') return invalid('the response has no choices');
  if (!message || typeof message !== 'object') return invalid('the response choice has no message');
  if (choice.finish_reason === 'length') {
    return invalid('the output was cut off at the token limit (finish_reason "length"); reply more briefly');
  }
  // Withheld by the provider's filter (Azure, OpenAI): asking again gets the same, so it is a refusal (model_refused).
  if (choice.finish_reason === 'content_filter')
    return { type: 'refusal', reason: 'the provider withheld the output (content filter)', usage };
  if (typeof message.refusal === 'string' && message.refusal.trim() !== '') {
    return { type: 'refusal', reason: message.refusal, usage };
  }
  const toolCalls = message.tool_calls;
  // Tolerant reading (the gates stay strict): Mistral sends content as an array of parts, and tool calls without
  // `type`; some servers send `arguments` as an object. What is read is still only a proposal.
  const content = textOf(message.content);
  if (Array.isArray(toolCalls) && toolCalls.length > 0) {
    const odd = toolCalls.findIndex((call: unknown) => typeof call !== 'object' || call === null);
    if (odd >= 0) {
      const what = toolCalls[odd] === null ? 'null' : typeof toolCalls[odd];
      return invalid(`tool call #${odd + 1} is ${what}, not an object`);
    }
    const other = toolCalls.find((call) => call?.type !== undefined && call?.type !== 'function');
    if (other)
      return invalid(
        `unsupported tool call type ${JSON.stringify(String(other?.type))}; only function calls are accepted`,
      );
    return {
      type: 'tool_calls',
      calls: toolCalls.map((call) => {
        const fn = (call as { function?: { name?: unknown; arguments?: unknown } }).function;
        // Passed as they came: the protocol and schema gates decide. A non-string fails event validation.
        const args = fn?.arguments;
        return {
          ...(typeof call.id === 'string' ? { callId: call.id } : {}),
          name: fn?.name as string,
          arguments: (args !== null && typeof args === 'object' ? JSON.stringify(args) : args) as string,
        };
      }),
      text: content !== null && content !== '' ? content : null,
      usage,
    };
  }
  if (message.function_call) return invalid('legacy function_call output is not supported; use tool calls');
  if (content !== null && content.trim() !== '') {
    const written = textualToolCall(content);
    if (written) return invalid(writtenCallDetail(written));
    return { type: 'answer', text: content, usage };
  }
  return invalid('empty output: no text, tool calls or refusal');
}

/** The message's text: a string, or the text parts of an array of parts (`[{ type: 'text', text }]`), joined. */
function textOf(content: unknown): string | null {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return null;
  const texts = content.flatMap((part: unknown) => {
    const { type, text } = (part ?? {}) as { type?: unknown; text?: unknown };
    return (type === 'text' || type === undefined) && typeof text === 'string' ? [text] : [];
  });
  return texts.length > 0 ? texts.join('') : null;
}

/** A response body that could not be parsed as the JSON it claimed to be. */
export function unusableBody(
  error: SyntaxError,
  fallbackUsage: ReplyOptions['fallbackUsage'],
  prices?: ModelPrices,
): ModelReply {
  const usage = usageOf({}, { fallbackUsage, prices });
  return { type: 'invalid', detail: `the server's response is not valid JSON (${error.message.slice(0, 120)})`, usage };
}

function usageOf(completion: Partial<ChatCompletion>, options: ReplyOptions): ModelUsageReport {
  const reported = completion.usage;
  const count = (n: unknown) => (typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.round(n) : null);
  const input = count(reported?.prompt_tokens);
  const output = count(reported?.completion_tokens);
  const tokens =
    input === null || output === null ? options.fallbackUsage : { inputTokens: input, outputTokens: output };
  return options.prices ? { ...tokens, costMicros: priceOf(tokens, options.prices) } : tokens;
}

// --- errors -----------------------------------------------------------------------------------------------

/** The model server refused the request for a reason a retry cannot fix; `code` says which (providerErrors.ts). */
export class ModelRequestError extends ProviderRequestError {}

const STATUS_HINT: Record<number, string> = {
  400: 'bad request',
  401: 'authentication failed: check OPENAI_API_KEY',
  403: 'permission denied for this key or model',
  404: 'not found: check OPENAI_BASE_URL and OPENAI_MODEL',
  422: 'unprocessable request',
};

/**
 * Sorts a failure of `chat.completions.create` by the shared taxonomy (providerErrors.ts): an unusable reply when the
 * provider refused the model's own output (Groq's `tool_use_failed`: re-asked, nothing charged), TransientModelError
 * to retry within the task's retry budget, ModelRequestError (with its specific code) to fail the task at once.
 * Messages carry no stack and no key.
 */
export function settleOpenAIError(
  error: unknown,
  apiKey: string | undefined,
  maxRetryAfterMs: number,
): { reply: ModelReply } | { error: Error } {
  if (error instanceof openai.APIUserAbortError) return { error: new ModelAbortedError() };
  const options = { who: 'model server', hints: STATUS_HINT, refusal: ModelRequestError };
  const classify = { secrets: [apiKey], maxRetryAfterMs };
  if (error instanceof openai.APIConnectionError) {
    const unreachable = classifyProviderError({ status: null, body: null }, classify);
    return settleProviderError(unreachable, { ...options, unreachable: error.name });
  }
  if (error instanceof openai.APIError && typeof error.status === 'number') {
    const failure = { status: error.status, body: bodyOf(error), header: (name: string) => error.headers?.get(name) };
    return settleProviderError(classifyProviderError(failure, classify), options);
  }
  const name = error instanceof Error ? error.name : typeof error;
  return { error: new ModelRequestError(null, `The model request failed unexpectedly (${name}).`) };
}

/**
 * Sends one request of an OpenAI adapter (`send`: Chat Completions or Responses, streamed or not) and sorts what went
 * wrong: a stream that broke or ended early (TransientModelError, see openaiStreams.ts) and an abort are thrown as
 * they are; a body that claims JSON and is not is an unusable reply (the server answered with output nobody can use:
 * re-asked, counted); anything else goes by `settleOpenAIError` (the model's own output refused: re-asked, nothing
 * charged; transient: retried; otherwise the task fails with its own code).
 */
export async function sendOpenAI<T>(
  send: () => Promise<T>,
  how: ReplyOptions & { apiKey: string | undefined; maxRetryAfterMs: number },
): Promise<{ response: T } | { reply: ModelReply }> {
  try {
    return { response: await send() };
  } catch (error) {
    if (error instanceof TransientModelError || error instanceof ModelAbortedError) throw error;
    if (error instanceof SyntaxError) return { reply: unusableBody(error, how.fallbackUsage, how.prices) };
    const settled = settleOpenAIError(error, how.apiKey, how.maxRetryAfterMs);
    if ('reply' in settled) return settled;
    throw settled.error;
  }
}

/** The error as a thrown Error (a refused model output is not an error: use settleOpenAIError for it). */
export function toModelError(error: unknown, apiKey: string | undefined, maxRetryAfterMs: number): Error {
  const settled = settleOpenAIError(error, apiKey, maxRetryAfterMs);
  if ('error' in settled) return settled.error;
  return new ModelRequestError(
    400,
    `The model server refused the model's output: ${settled.reply.type === 'invalid' ? settled.reply.detail : ''}.`,
  );
}

/** The error body as the client kept it: the `error` object, else the client's message (a body it could not read). */
function bodyOf(error: APIError): unknown {
  if (error.error !== undefined && error.error !== null) return { error: error.error };
  // Without a body the client's message is "400 status code (no body)": nothing the provider said.
  if (/status code \(no body\)$/.test(error.message)) return null;
  // A body that is not JSON (an HTML error page): the client's message is the status, then the text.
  return error.message.replace(/^\d{3} /, '');
}

/** The request's signal was aborted (timeout or cancellation): nothing to retry from here. */
export class ModelAbortedError extends Error implements CodedError<'model_request_aborted'> {
  readonly code = 'model_request_aborted' as const;
  constructor() {
    super('the model request was aborted');
    this.name = new.target.name;
  }
}
