/**
 * Response side of the OpenAI adapter: a Chat Completions response mapped to a ModelReply, and transport errors
 * sorted into retryable (TransientModelError) and not. The mapping never parses, repairs or drops tool calls:
 * duplicate or missing call ids and malformed JSON arguments reach the machine's protocol gate as they came.
 */
import type { APIError } from 'openai';
import { openai } from '../../peers/openai.js';
import type { ChatCompletion } from 'openai/resources/chat/completions';
import { AgentError } from '../../errors.js';
import {
  type ModelReply,
  type ModelReplyWithVersion,
  type ModelUsageReport,
  TransientModelError,
} from '../agentModel.js';
import {
  type ModelPrices,
  isTransientStatus,
  maskedLine,
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

/** The model server refused the request for a reason a retry cannot fix (bad request, key, model name). */
export class ModelRequestError extends AgentError<'model_request_failed'> {
  constructor(
    readonly status: number | null,
    message: string,
  ) {
    super('model_request_failed', message);
  }
}

const STATUS_HINT: Record<number, string> = {
  400: 'bad request',
  401: 'authentication failed: check OPENAI_API_KEY',
  403: 'permission denied for this key or model',
  404: 'not found: check OPENAI_BASE_URL and OPENAI_MODEL',
  422: 'unprocessable request',
};

/** Error codes with which a provider refuses the model's own output (its tool call failed the provider's checks). */
const MODEL_OUTPUT_CODES: ReadonlySet<string> = new Set(['tool_use_failed', 'json_validate_failed']);

/**
 * A 400 about the model's own output, not the request (Groq's `tool_use_failed`: "Failed to call a function"):
 * nothing usable was generated, and the next attempt usually succeeds. An unusable reply (re-asked, counted against
 * maxInvalidOutputs) that charges nothing, instead of a request failure that ends the task; null for any other error.
 */
export function refusedModelOutput(error: unknown, apiKey: string | undefined): ModelReply | null {
  if (!(error instanceof openai.APIError) || error.status !== 400) return null;
  const code = typeof error.code === 'string' ? error.code : '';
  if (!MODEL_OUTPUT_CODES.has(code)) return null;
  const detail = serverDetail(error, apiKey);
  return {
    type: 'invalid',
    detail: `the provider refused the model's output (${code})${detail ? `: ${detail}` : ''}; call the offered tools with a JSON object of arguments`,
    usage: { inputTokens: 0, outputTokens: 0 },
  };
}

/**
 * Sorts a failure of `chat.completions.create` into what the runtime expects: TransientModelError to retry
 * within the task's retry budget, anything else to fail the task. Messages carry no stack and no key.
 */
export function toModelError(error: unknown, apiKey: string | undefined, maxRetryAfterMs: number): Error {
  if (error instanceof openai.APIUserAbortError) return new ModelAbortedError();
  if (error instanceof openai.APIConnectionError) {
    return new TransientModelError(`the model server could not be reached (${error.name})`);
  }
  if (error instanceof openai.APIError && typeof error.status === 'number') {
    const detail = serverDetail(error, apiKey);
    if (isTransientStatus(error.status)) {
      const retryAfter = retryAfterMs((name) => error.headers?.get(name));
      return new TransientModelError(
        `the model server answered ${error.status}${detail ? `: ${detail}` : ''}`,
        retryAfter === undefined ? undefined : Math.min(retryAfter, maxRetryAfterMs),
      );
    }
    const hint = STATUS_HINT[error.status] ?? 'request refused';
    return new ModelRequestError(
      error.status,
      `The model server answered ${error.status} (${hint})${detail ? `: ${detail}` : ''}.`,
    );
  }
  const name = error instanceof Error ? error.name : typeof error;
  return new ModelRequestError(null, `The model request failed unexpectedly (${name}).`);
}

/** The request's signal was aborted (timeout or cancellation): nothing to retry from here. */
export class ModelAbortedError extends Error implements CodedError<'model_request_aborted'> {
  readonly code = 'model_request_aborted' as const;
  constructor() {
    super('the model request was aborted');
    this.name = new.target.name;
  }
}

/** The server's own error message, one line, capped, with anything key-like masked. */
function serverDetail(error: APIError, apiKey: string | undefined): string {
  const body = error.error as { message?: unknown } | undefined;
  return maskedLine(typeof body?.message === 'string' ? body.message : '', [apiKey]);
}
