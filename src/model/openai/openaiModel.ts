/**
 * A model adapter on the official `openai` package (Chat Completions with tool calling). It works against the
 * OpenAI API and against OpenAI-compatible servers (vLLM, Ollama, llama.cpp, LM Studio) through `baseURL`.
 *
 * The adapter only translates. Each turn it rebuilds the conversation from the task's persisted transcript,
 * offers the tools the runtime passed (already filtered by the principal's scopes), and maps the response to a
 * ModelReply without repairing anything: call ids, tool names and argument strings go to the machine's gates as
 * the model produced them. The client runs with `maxRetries: 0`: retries are the runtime's, counted against the
 * task's retry budget.
 *
 * @example
 * const model = createOpenAIModel({ baseURL: 'http://127.0.0.1:11434/v1', model: 'qwen2.5:7b', apiKey: 'ollama' });
 * const orchestrator = createOrchestrator({ tools, model });
 */
import type { OpenAI } from 'openai';
import { openai } from '../../peers/openai.js';
import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import { readChatStream } from './openaiStreams.js';
import { AgentError } from '../../errors.js';
import { type AgentModel, type ModelReplyWithVersion, type ModelRequest } from '../agentModel.js';
import { adapterLimits } from '../adapterLimits.js';
import { type AdapterOptions, adapterProvenance } from '../replyRules.js';
import { DEFAULT_SYSTEM_PROMPT, buildMessages, toolDefinitions } from './openaiMessages.js';
import { sendOpenAI, toModelReply } from './openaiReply.js';

export interface OpenAIModelOptions extends AdapterOptions {
  /** Default: OPENAI_API_KEY. Local servers that ignore keys still need a non-empty value. */
  apiKey?: string;
  /** Default: OPENAI_BASE_URL, else the OpenAI API. For local servers, e.g. http://127.0.0.1:8000/v1. */
  baseURL?: string;
  /** Model name. Default: OPENAI_MODEL. */
  model?: string;
  /** Output token limit per turn (default 1,024). */
  maxTokens?: number;
  /**
   * Which request field carries maxTokens. Default: `max_completion_tokens` on OpenAI's own API (its reasoning models,
   * gpt-5 and the o-series, refuse `max_tokens`), `max_tokens` on any other server (`baseURL`: vLLM, Ollama, Groq...,
   * which read that one).
   */
  maxTokensField?: 'max_tokens' | 'max_completion_tokens';
  /** Transport timeout of the client in ms (default 10 min); the orchestrator's modelTimeoutMs usually fires first. */
  requestTimeoutMs?: number;
  /**
   * A ready client (tests, proxies, custom fetch). Its own retries should be off (`maxRetries: 0`). It keeps its own
   * fetch: an error body without an `error` key (vLLM, Mistral) then reaches the adapter without its message.
   */
  client?: OpenAI;
  /** Where the env fallbacks are read (default process.env). */
  env?: Record<string, string | undefined>;
  /** For audit and status (default "openai:<model>"). */
  name?: string;
}

/** The adapter cannot start: something it needs is not configured. */
export class ModelConfigError extends AgentError<'model_not_configured'> {
  constructor(message: string) {
    super('model_not_configured', message);
  }
}

const DEFAULT_MAX_TOKENS = 1_024;

/** Creates an AgentModel backed by Chat Completions. Throws ModelConfigError when the key or model is missing. */
export function createOpenAIModel(options: OpenAIModelOptions = {}): AgentModel {
  const env = options.env ?? process.env;
  const model = options.model ?? nonEmpty(env.OPENAI_MODEL);
  if (!model) {
    throw new ModelConfigError(
      'No model name: set OPENAI_MODEL (e.g. gpt-4o-mini, or the name your local server serves) or pass `model`.',
    );
  }
  const apiKey = options.apiKey ?? nonEmpty(env.OPENAI_API_KEY);
  if (!options.client && !apiKey) {
    throw new ModelConfigError(
      'No API key: set OPENAI_API_KEY or pass `apiKey`. A local OpenAI-compatible server that ignores keys still needs a non-empty value (e.g. OPENAI_API_KEY=local).',
    );
  }
  const maxTokens = positive(options.maxTokens, DEFAULT_MAX_TOKENS, 'maxTokens');
  const { maxToolResultBytes, maxPromptTokens, fallbackUsage, reservation } = adapterLimits(
    options,
    maxTokens,
    positive,
  );
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
  const client = openaiClient(options, env, apiKey);
  const maxTokensField = options.maxTokensField ?? defaultMaxTokensField(client.baseURL);

  return {
    name: options.name ?? `openai:${model}`,
    ...adapterProvenance(options, DEFAULT_SYSTEM_PROMPT),
    reservation,
    window: { maxPromptTokens, maxToolResultBytes },
    async decide(request: ModelRequest): Promise<ModelReplyWithVersion> {
      const transcript = await request.transcript();
      const body: ChatCompletionCreateParamsNonStreaming = {
        model,
        messages: buildMessages(transcript, request.principal, {
          systemPrompt: options.systemPrompt,
          maxToolResultBytes,
          compaction: {
            maxTokens: maxPromptTokens,
            maxToolResultBytes,
            level: request.compaction?.level ?? 0,
            ...(request.summary ? { summary: request.summary } : {}),
          },
        }),
        ...(request.tools.length > 0 ? { tools: toolDefinitions(request.tools, options.strictTools ?? true) } : {}),
        [maxTokensField]: maxTokens,
        ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
      };
      const sent = await sendOpenAI(
        async () =>
          options.stream
            ? await readChatStream(
                // include_usage: the last chunk carries the turn's usage, charged as reported.
                await client.chat.completions.create(
                  { ...body, stream: true, stream_options: { include_usage: true } },
                  { signal: request.signal },
                ),
                request,
                request.signal,
                [apiKey],
              )
            : await client.chat.completions.create(body, { signal: request.signal }),
        { apiKey, maxRetryAfterMs, fallbackUsage, prices: options.prices },
      );
      if ('reply' in sent) return sent.reply;
      const { response } = sent;
      return toModelReply(response, { prices: options.prices, fallbackUsage });
    },
  };
}

/**
 * A fetch that hands the client every JSON error body under an `error` key. Servers on vLLM, and Mistral's API,
 * answer `{ "object": "error", "message": ... }`; the client reads only `body.error`, so it would keep nothing of
 * what they said ("400 status code (no body)") and a context overflow could not be told from any other 400.
 */
export const errorEnvelopeFetch = envelopeErrorsOf((input, init) => fetch(input, init));

/** `errorEnvelopeFetch` over another fetch (a host client's own: its proxy, headers and transport stay). */
export function envelopeErrorsOf(
  send: (input: string | URL | Request, init?: RequestInit) => Promise<Response>,
): (input: string | URL | Request, init?: RequestInit) => Promise<Response> {
  return async (input, init) => envelopeErrors(await send(input, init));
}

async function envelopeErrors(response: Response): Promise<Response> {
  if (response.ok || !(response.headers.get('content-type') ?? '').includes('json')) return response;
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const wrapped =
    typeof body === 'object' && body !== null && !Array.isArray(body) && !('error' in body)
      ? JSON.stringify({ error: body })
      : text;
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  headers.delete('content-encoding');
  return new Response(wrapped, { status: response.status, statusText: response.statusText, headers });
}

/** `max_completion_tokens` for OpenAI's own API, `max_tokens` for the compatible servers that read only that. */
export function defaultMaxTokensField(baseURL: string | undefined): 'max_tokens' | 'max_completion_tokens' {
  try {
    return new URL(baseURL ?? 'https://api.openai.com/v1').hostname === 'api.openai.com'
      ? 'max_completion_tokens'
      : 'max_tokens';
  } catch {
    return 'max_tokens';
  }
}

export function nonEmpty(value: string | undefined): string | undefined {
  return value !== undefined && value.trim() !== '' ? value.trim() : undefined;
}

/**
 * The host's client, sending through its own fetch wrapped by `envelopeErrorsOf`, so that its error bodies are read
 * as the adapter's own client reads them. Only a client of the SDK's own class is rebuilt: `withOptions` makes a new
 * one from the base options, and a subclass's own (AzureOpenAI's api version and deployment) would be lost, so a
 * subclass, like a stand-in without `withOptions`, is used as is.
 */
function withErrorEnvelope(client: OpenAI): OpenAI {
  if (typeof client.withOptions !== 'function' || Object.getPrototypeOf(client) !== openai.OpenAI.prototype)
    return client;
  const own = (client as unknown as { fetch?: typeof fetch }).fetch ?? ((input, init) => fetch(input, init));
  return client.withOptions({ fetch: envelopeErrorsOf(own) });
}

/**
 * The client an OpenAI adapter sends with: the host's own (`options.client`), or one whose retries are off (the
 * runtime's retries count against the task's budget) and whose error bodies are kept whole (`errorEnvelopeFetch`).
 */
export function openaiClient(
  options: { client?: OpenAI; baseURL?: string; requestTimeoutMs?: number },
  env: Record<string, string | undefined>,
  apiKey: string | undefined,
): OpenAI {
  if (options.client) return withErrorEnvelope(options.client);
  return new openai.OpenAI({
    apiKey,
    baseURL: options.baseURL ?? nonEmpty(env.OPENAI_BASE_URL) ?? null,
    maxRetries: 0,
    timeout: options.requestTimeoutMs ?? 600_000,
    fetch: errorEnvelopeFetch,
  });
}

export function positive(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0)
    throw new ModelConfigError(`${what} must be a positive integer, not ${value}.`);
  return value;
}
