/**
 * An AI SDK language model (spec v3) that calls an OpenAI-compatible `/chat/completions` endpoint over HTTP, built
 * the way `@ai-sdk/openai-compatible` builds its chat model: `postJsonToApi` with `createJsonErrorResponseHandler`
 * (error schema `{ error: { message, type, param, code } }`) from `@ai-sdk/provider-utils`. So a failed call reaches
 * the adapter as the `APICallError` a real provider throws: status, raw body, parsed data, headers, `isRetryable`.
 *
 * Only what the error tests need: non-streaming text and tool calls. The prompt is sent as plain messages.
 */
import type { LanguageModelV3, LanguageModelV3CallOptions } from '@ai-sdk/provider';
import {
  createJsonErrorResponseHandler,
  createJsonResponseHandler,
  postJsonToApi,
  zodSchema,
} from '@ai-sdk/provider-utils';
import { z } from 'zod';

const errorSchema = z.object({
  error: z.object({
    message: z.string(),
    type: z.string().nullish(),
    param: z.any().nullish(),
    code: z.union([z.string(), z.number()]).nullish(),
  }),
});

const completionSchema = z.object({
  model: z.string().nullish(),
  choices: z.array(
    z.object({
      message: z.object({
        content: z.string().nullish(),
        tool_calls: z
          .array(z.object({ id: z.string(), function: z.object({ name: z.string(), arguments: z.string() }) }))
          .nullish(),
      }),
      finish_reason: z.string().nullish(),
    }),
  ),
  usage: z.object({ prompt_tokens: z.number(), completion_tokens: z.number() }).nullish(),
});

function messagesOf(prompt: LanguageModelV3CallOptions['prompt']) {
  return prompt.map((message) => ({
    role: message.role,
    content:
      typeof message.content === 'string'
        ? message.content
        : message.content.map((part) => ('text' in part ? part.text : JSON.stringify(part))).join('\n'),
  }));
}

/** `baseURL` ends in /v1, as the fake server's url does. */
export function chatCompletionsModel(baseURL: string, apiKey: string): LanguageModelV3 {
  return {
    specificationVersion: 'v3',
    provider: 'openai-compatible.chat',
    modelId: 'fake',
    supportedUrls: {},
    async doGenerate(options) {
      const { value, responseHeaders } = await postJsonToApi({
        url: `${baseURL}/chat/completions`,
        headers: { authorization: `Bearer ${apiKey}` },
        body: { model: 'fake', messages: messagesOf(options.prompt), max_tokens: options.maxOutputTokens },
        failedResponseHandler: createJsonErrorResponseHandler({
          errorSchema: zodSchema(errorSchema),
          errorToMessage: (data) => data.error.message,
        }),
        successfulResponseHandler: createJsonResponseHandler(zodSchema(completionSchema)),
        abortSignal: options.abortSignal,
      });
      const choice = value.choices[0];
      const content: Awaited<ReturnType<LanguageModelV3['doGenerate']>>['content'] = [];
      if (choice?.message.content) content.push({ type: 'text', text: choice.message.content });
      for (const call of choice?.message.tool_calls ?? []) {
        content.push({
          type: 'tool-call',
          toolCallId: call.id,
          toolName: call.function.name,
          input: call.function.arguments,
        });
      }
      const input = value.usage?.prompt_tokens;
      const output = value.usage?.completion_tokens;
      const finish = choice?.finish_reason === 'tool_calls' ? 'tool-calls' : 'stop';
      return {
        content,
        finishReason: { unified: finish, raw: choice?.finish_reason ?? undefined },
        usage: {
          inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
          outputTokens: { total: output, text: output, reasoning: undefined },
        },
        warnings: [],
        response: { modelId: value.model ?? undefined, headers: responseHeaders },
      };
    },
    async doStream() {
      throw new Error('chatCompletionsModel does not stream');
    },
  };
}
