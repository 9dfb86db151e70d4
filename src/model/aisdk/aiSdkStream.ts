/**
 * Streaming for the AI SDK adapter (`stream: true`): one `streamText` step whose provider stream is read by a
 * middleware, part by part, into the result the provider's `doGenerate` would have returned (text joined, each
 * `tool-call` part as the provider emitted it, the finish reason, usage and model id). The reply is then mapped by the
 * same code as an unstreamed turn. `text-delta` parts go to `onText`; `tool-input-start` and `tool-input-delta` parts
 * (a call's name, then its arguments being written) to `onCallText`, numbered in the order the calls began: for live
 * views that asked for them, as a proposal nobody has vetted yet.
 *
 * A provider stream that errors or ends without its `finish` part is a TransientModelError (retried; nothing of it
 * used). An error before the stream started (the HTTP request refused) is returned for the shared error taxonomy.
 */
import type { LanguageModelMiddleware, streamText } from 'ai';
import { aiSdk } from '../../peers/aiSdk.js';
import { type ModelRequest, TransientModelError } from '../agentModel.js';
import { maskedLine } from '../replyRules.js';
import type { ProviderResult } from './aiSdkReply.js';

type StreamArgs = Omit<Parameters<typeof streamText>[0], 'model' | 'onError'> & {
  model: Parameters<typeof aiSdk.wrapLanguageModel>[0]['model'];
};
type Part = { type: string; [key: string]: unknown };

/** What came of one streamed step: the assembled result, or the failure before the stream began. */
export type StreamedTurn = { kind: 'result'; result: ProviderResult } | { kind: 'failed'; error: unknown };

export async function streamTurn(
  args: StreamArgs,
  live: Pick<ModelRequest, 'onText' | 'onCallText'>,
  secrets: readonly string[],
): Promise<StreamedTurn> {
  const { onText, onCallText } = live;
  /** Each call's id (the provider's) -> its position and tool name. */
  const calls = new Map<string, { index: number; name?: string }>();
  let started = false;
  let text = '';
  const content: ProviderResult['content'] = [];
  let finish: Part | undefined;
  let modelId: string | undefined;
  let streamError: unknown;
  let parts = 0;
  const capture: LanguageModelMiddleware = {
    specificationVersion: 'v3',
    async wrapStream({ doStream }) {
      const result = await doStream();
      started = true;
      const reader = new TransformStream<Part, Part>({
        transform(part, controller) {
          parts += 1;
          if (part.type === 'text-delta' && typeof part.delta === 'string') {
            text += part.delta;
            if (part.delta !== '') onText?.(part.delta);
          } else if (part.type === 'tool-input-start' && typeof part.id === 'string' && !calls.has(part.id)) {
            const call = { index: calls.size, ...(typeof part.toolName === 'string' ? { name: part.toolName } : {}) };
            calls.set(part.id, call);
            onCallText?.({ ...call, callId: part.id, arguments: '' });
          } else if (part.type === 'tool-input-delta' && typeof part.id === 'string') {
            const call = calls.get(part.id);
            if (call && typeof part.delta === 'string' && part.delta !== '')
              onCallText?.({ ...call, callId: part.id, arguments: part.delta });
          } else if (part.type === 'tool-call' || part.type === 'tool-result') {
            content.push(part as unknown as ProviderResult['content'][number]);
          } else if (part.type === 'response-metadata' && typeof part.modelId === 'string') {
            modelId = part.modelId;
          } else if (part.type === 'finish') {
            finish = part;
          } else if (part.type === 'error') {
            streamError ??= part.error;
          }
          controller.enqueue(part);
        },
      });
      return { ...result, stream: result.stream.pipeThrough(reader as never) };
    },
  };
  let failure: unknown;
  const streamed = aiSdk.streamText({
    ...(args as Parameters<typeof streamText>[0]),
    model: aiSdk.wrapLanguageModel({ model: args.model, middleware: capture }),
    onError: ({ error }) => {
      failure ??= error;
    },
  });
  try {
    await streamed.consumeStream({ onError: (error) => (failure ??= error) });
  } catch (error) {
    failure ??= error;
  }
  if (!started) return { kind: 'failed', error: failure ?? new Error('the provider stream never started') };
  if (!finish || streamError !== undefined || (failure !== undefined && !finish)) {
    const cause = streamError ?? failure;
    const name = cause instanceof Error ? cause.name : cause === undefined ? 'no finish part' : typeof cause;
    const message = cause instanceof Error ? maskedLine(cause.message, secrets).slice(0, 200) : '';
    throw new TransientModelError(
      `the model's stream broke after ${parts} parts (${name}${message ? `: ${message}` : ''}); nothing of it was used`,
    );
  }
  const done = finish as unknown as Pick<ProviderResult, 'usage' | 'finishReason'>;
  return {
    kind: 'result',
    result: {
      content: [...(text !== '' ? [{ type: 'text' as const, text }] : []), ...content],
      finishReason: done.finishReason,
      usage: done.usage,
      warnings: [],
      ...(modelId !== undefined ? { response: { modelId } } : {}),
    } as ProviderResult,
  };
}
