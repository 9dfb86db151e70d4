/**
 * A model adapter on the Vercel AI SDK (`ai` 6): any AI SDK provider's language model (Anthropic, Google, OpenAI,
 * Ollama and the others implementing the v3 model spec) drives a task with the same guarantees as the OpenAI
 * adapter.
 *
 * The adapter only translates. Each turn it rebuilds the messages from the task's persisted transcript, offers the
 * tools the runtime passed (already filtered by the principal's scopes) without `execute`, and runs one
 * `generateText` step with `maxRetries: 0`: no automatic tool loop, no SDK retries (retries are the runtime's,
 * counted against the task's retry budget). The reply is mapped from the provider's own result, captured by a
 * middleware, so call ids, names and argument texts reach the machine's gates as the model produced them. With
 * `stream: true` the step is a `streamText` step read the same way (aiSdkStream.ts).
 *
 * @example
 * import { anthropic } from '@ai-sdk/anthropic';
 * const model = createAiSdkModel({ model: anthropic('claude-sonnet-4-5') });
 * const orchestrator = createOrchestrator({ tools, model });
 */
import type { LanguageModelMiddleware, generateText, wrapLanguageModel } from 'ai';
import { aiSdk } from '../../peers/aiSdk.js';
import { AgentError } from '../../errors.js';
import type { AgentModel, ModelReplyWithVersion, ModelRequest } from '../agentModel.js';
import { DEFAULT_SYSTEM_PROMPT } from '../openai/openaiMessages.js';
import { adapterLimits } from '../adapterLimits.js';
import { type AdapterOptions, adapterProvenance } from '../replyRules.js';
import { AiSdkAbortedError, classifyError } from './aiSdkErrors.js';
import { buildModelMessages, systemPrompt, toolSet } from './aiSdkMessages.js';
import { type ProviderResult, toModelReply, unusableOutput } from './aiSdkReply.js';
import { streamTurn } from './aiSdkStream.js';

/** A provider's language model object, e.g. `anthropic('claude-sonnet-4-5')` or `ollama('qwen2.5:7b')`. */
export type AiSdkLanguageModel = Parameters<typeof wrapLanguageModel>[0]['model'];
type ProviderOptions = NonNullable<Parameters<typeof generateText>[0]['providerOptions']>;

export interface AiSdkModelOptions extends AdapterOptions {
  /** The provider's model object (AI SDK model spec v3, which every AI SDK 6 provider implements). */
  model: AiSdkLanguageModel;
  /** Output token limit per turn (default 1,024), sent as `maxOutputTokens`. */
  maxOutputTokens?: number;
  /** Passed to `generateText` as they are (e.g. `{ anthropic: { sendReasoning: false } }`). */
  providerOptions?: ProviderOptions;
  /** Values masked out of error messages, such as the API key the provider was given. */
  secrets?: string[];
  /** For audit and status (default "ai-sdk:<provider>:<modelId>"). */
  name?: string;
}

/** The adapter cannot start: its options are incomplete or wrong. */
export class AiSdkConfigError extends AgentError<'model_not_configured'> {
  constructor(message: string) {
    super('model_not_configured', message);
  }
}

const DEFAULT_MAX_OUTPUT_TOKENS = 1_024;

/** Creates an AgentModel backed by an AI SDK language model. Throws AiSdkConfigError for a missing or unsupported model. */
export function createAiSdkModel(options: AiSdkModelOptions): AgentModel {
  const model = options?.model as unknown;
  if (typeof model !== 'object' || model === null) {
    throw new AiSdkConfigError(
      'No model: pass a provider model object, e.g. `model: anthropic("claude-sonnet-4-5")` from @ai-sdk/anthropic (model id strings are not accepted).',
    );
  }
  const spec = (model as { specificationVersion?: unknown }).specificationVersion;
  if (spec !== 'v3') {
    throw new AiSdkConfigError(
      `The model implements AI SDK model spec ${JSON.stringify(spec)}; this adapter needs spec "v3" (providers for ai 6).`,
    );
  }
  const languageModel = options.model;
  const maxOutputTokens = positive(options.maxOutputTokens, DEFAULT_MAX_OUTPUT_TOKENS, 'maxOutputTokens');
  const { maxToolResultBytes, maxPromptTokens, fallbackUsage, reservation } = adapterLimits(
    options,
    maxOutputTokens,
    positive,
  );
  const errorOptions = { maxRetryAfterMs: options.maxRetryAfterMs ?? 60_000, secrets: options.secrets ?? [] };
  const replyOptions = { prices: options.prices, fallbackUsage };

  return {
    name: options.name ?? `ai-sdk:${languageModel.provider}:${languageModel.modelId}`,
    ...adapterProvenance(options, DEFAULT_SYSTEM_PROMPT),
    reservation,
    window: { maxPromptTokens, maxToolResultBytes },
    async decide(request: ModelRequest): Promise<ModelReplyWithVersion> {
      const transcript = await request.transcript();
      const args = {
        system: systemPrompt(request.principal, options.systemPrompt),
        messages: buildModelMessages(transcript, {
          maxToolResultBytes,
          compaction: {
            maxTokens: maxPromptTokens,
            maxToolResultBytes,
            level: request.compaction?.level ?? 0,
            ...(request.summary ? { summary: request.summary } : {}),
          },
        }),
        ...(request.tools.length > 0
          ? { tools: toolSet(request.tools, options.strictTools ?? true), toolChoice: 'auto' as const }
          : {}),
        maxOutputTokens,
        ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
        ...(options.providerOptions ? { providerOptions: options.providerOptions } : {}),
        maxRetries: 0,
        // One step: with no execute functions there is nothing to loop on, and the host decides what runs next.
        stopWhen: aiSdk.stepCountIs(1),
        abortSignal: request.signal,
      };
      const failed = (error: unknown) => {
        const classified = classifyError(error, request.signal, errorOptions);
        if (classified.kind === 'unusable') return unusableOutput(classified.detail, replyOptions);
        if (classified.kind === 'reply') return classified.reply;
        throw classified.error;
      };
      if (options.stream) {
        const streamed = await streamTurn({ ...args, model: languageModel }, request, errorOptions.secrets).catch(
          (error: unknown) => {
            if (request.signal.aborted) throw new AiSdkAbortedError();
            throw error;
          },
        );
        if (request.signal.aborted) throw new AiSdkAbortedError();
        if (streamed.kind === 'failed') return failed(streamed.error);
        return toModelReply(streamed.result, replyOptions);
      }
      // The provider's own result for this call, before generateText parses anything.
      let captured: ProviderResult | undefined;
      const capture: LanguageModelMiddleware = {
        specificationVersion: 'v3',
        async wrapGenerate({ doGenerate }) {
          const result = await doGenerate();
          captured = result;
          return result;
        },
      };
      try {
        await aiSdk.generateText({
          ...args,
          model: aiSdk.wrapLanguageModel({ model: languageModel, middleware: capture }),
        });
      } catch (error) {
        if (request.signal.aborted) throw new AiSdkAbortedError();
        // The provider answered, and the SDK choked on its output while processing it: unusable output, re-asked.
        if (captured) {
          const name = error instanceof Error ? error.name : typeof error;
          return unusableOutput(`the response could not be processed (${name})`, replyOptions, captured);
        }
        return failed(error);
      }
      if (!captured) return unusableOutput('the model returned no result', replyOptions);
      return toModelReply(captured, replyOptions);
    },
  };
}

function positive(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0)
    throw new AiSdkConfigError(`${what} must be a positive integer, not ${value}.`);
  return value;
}
