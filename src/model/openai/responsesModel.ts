/**
 * A model adapter on OpenAI's Responses API (`client.responses.create`), the API OpenAI recommends for new work and the
 * one its Agents SDK uses. It sits beside the Chat Completions adapter and behaves the same way: each turn rebuilds the
 * conversation from the task's persisted transcript, offers the tools the runtime passed, and maps the response to a
 * ModelReply without repairing anything; errors are sorted by the same taxonomy (providerErrors.ts).
 *
 * Stateless by design: every request sends `store: false` and the whole conversation as `input`, never
 * `previous_response_id`. The host owns the conversation (persisted, redacted, audited, restorable on another process);
 * a conversation kept by the provider would be a second copy the host cannot audit or restore, would hold tool
 * results the host may have to erase, and would break when a task moves to another key, region or provider.
 *
 * @example
 * const model = createOpenAIResponsesModel({ model: 'gpt-5-mini' });
 * const orchestrator = createOrchestrator({ tools, model });
 */
import type { OpenAI } from 'openai';
import type { ResponseCreateParamsNonStreaming } from 'openai/resources/responses/responses';
import type { ReasoningEffort } from 'openai/resources/shared';
import { adapterLimits } from '../adapterLimits.js';
import { type AgentModel, type ModelReplyWithVersion, type ModelRequest } from '../agentModel.js';
import { type AdapterOptions, adapterProvenance } from '../replyRules.js';
import { DEFAULT_SYSTEM_PROMPT } from './openaiMessages.js';
import { ModelConfigError, nonEmpty, openaiClient, positive } from './openaiModel.js';
import { sendOpenAI } from './openaiReply.js';
import { readResponsesStream } from './openaiStreams.js';
import { buildInput, isReasoningModel, responsesTools } from './responsesInput.js';
import { toResponsesReply } from './responsesReply.js';
import { ReasoningCarry } from './reasoningCarry.js';

export interface OpenAIResponsesModelOptions extends AdapterOptions {
  /** Default: OPENAI_API_KEY. */
  apiKey?: string;
  /** Default: OPENAI_BASE_URL, else the OpenAI API. */
  baseURL?: string;
  /** Model name. Default: OPENAI_MODEL. */
  model?: string;
  /** Output token limit per turn, reasoning tokens included (`max_output_tokens`, default 1,024). */
  maxTokens?: number;
  /**
   * Whether the model is a reasoning model, which refuses sampling parameters (default: guessed from the name: the
   * o-series and gpt-5 and later, except their `-chat` variants). A reasoning model with `temperature` set is refused
   * when the adapter is made, rather than by the API on the first turn.
   */
  reasoningModel?: boolean;
  /** `reasoning.effort` for a reasoning model; left out when unset (the API's default applies). */
  reasoningEffort?: Exclude<ReasoningEffort, null>;
  /** Transport timeout of the client in ms (default 10 min); the orchestrator's modelTimeoutMs usually fires first. */
  requestTimeoutMs?: number;
  /** A ready client (tests, proxies, custom fetch). Its own retries should be off (`maxRetries: 0`). */
  client?: OpenAI;
  /** Where the env fallbacks are read (default process.env). */
  env?: Record<string, string | undefined>;
  /** For audit and status (default "openai-responses:<model>"). */
  name?: string;
}

const DEFAULT_MAX_TOKENS = 1_024;

/** Creates an AgentModel backed by the Responses API. Throws ModelConfigError when the key or model is missing. */
export function createOpenAIResponsesModel(options: OpenAIResponsesModelOptions = {}): AgentModel {
  const env = options.env ?? process.env;
  const model = options.model ?? nonEmpty(env.OPENAI_MODEL);
  if (!model) throw new ModelConfigError('No model name: set OPENAI_MODEL (e.g. gpt-5-mini) or pass `model`.');
  const apiKey = options.apiKey ?? nonEmpty(env.OPENAI_API_KEY);
  if (!options.client && !apiKey) throw new ModelConfigError('No API key: set OPENAI_API_KEY or pass `apiKey`.');
  const reasoning = options.reasoningModel ?? isReasoningModel(model);
  if (reasoning && options.temperature !== undefined) {
    throw new ModelConfigError(
      `${model} is a reasoning model, which refuses sampling parameters ("Unsupported parameter: 'temperature'"): remove \`temperature\`, or pass \`reasoningModel: false\` if it is not one.`,
    );
  }
  if (!reasoning && options.reasoningEffort !== undefined) {
    throw new ModelConfigError(
      `reasoningEffort is only for reasoning models; ${model} is not taken as one (pass \`reasoningModel: true\` if it is).`,
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
  // A reasoning model's items of each turn, sent back with that turn's calls (this process only: reasoningCarry.ts).
  const carry = reasoning ? new ReasoningCarry() : null;

  return {
    name: options.name ?? `openai-responses:${model}`,
    ...adapterProvenance(options, DEFAULT_SYSTEM_PROMPT),
    reservation,
    window: { maxPromptTokens, maxToolResultBytes },
    async decide(request: ModelRequest): Promise<ModelReplyWithVersion> {
      const transcript = await request.transcript();
      const tools = responsesTools(request.tools, options.strictTools ?? true);
      const body: ResponseCreateParamsNonStreaming = {
        model,
        input: buildInput(transcript, request.principal, {
          systemPrompt: options.systemPrompt,
          maxToolResultBytes,
          compaction: {
            maxTokens: maxPromptTokens,
            maxToolResultBytes,
            level: request.compaction?.level ?? 0,
            ...(request.summary ? { summary: request.summary } : {}),
          },
          ...(carry ? { reasoningOf: (turn: number) => carry.of(request.taskId, turn) } : {}),
        }),
        // The host owns the conversation: nothing is kept at the provider, nothing is chained by response id.
        store: false,
        // Without a stored item, reasoning can only go back whole: its encrypted content is asked for.
        ...(carry ? { include: ['reasoning.encrypted_content' as const] } : {}),
        max_output_tokens: maxTokens,
        ...(tools.length > 0 ? { tools } : {}),
        // Strict schemas hold for one call at a time: with parallel calls the API does not enforce them.
        ...(tools.some((tool) => tool.strict) ? { parallel_tool_calls: false } : {}),
        ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
        ...(options.reasoningEffort !== undefined ? { reasoning: { effort: options.reasoningEffort } } : {}),
      };
      const sent = await sendOpenAI(
        async () =>
          options.stream
            ? await readResponsesStream(
                await client.responses.create({ ...body, stream: true }, { signal: request.signal }),
                request,
                request.signal,
                [apiKey],
              )
            : await client.responses.create(body, { signal: request.signal }),
        { apiKey, maxRetryAfterMs, fallbackUsage, prices: options.prices },
      );
      if ('reply' in sent) return sent.reply;
      const { response } = sent;
      carry?.keep(request.taskId, request.turn, (response as { output?: unknown } | null)?.output);
      return toResponsesReply(response, { prices: options.prices, fallbackUsage });
    },
  };
}
