/**
 * Streaming in the OpenAI adapters (`stream: true`): the real `openai` client against a local server that replays
 * streams recorded from OpenAI (test/fixtures/wire/streams, see SOURCES.md) as Server-Sent Events. The turn's reply
 * must be the one the same turn gives unstreamed; text deltas reach `onText` in order; argument deltas never do; a
 * stream cut mid-way is a transient failure that never yields a call.
 */
import { APICallError } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { E17 } from '../examples/booking/scenarios.js';
import { type ModelReply, type ModelRequest, TransientModelError } from '../src/model/agentModel.js';
import { createAiSdkModel } from '../src/model/aisdk/aiSdkModel.js';
import { createOpenAIModel } from '../src/model/openai/openaiModel.js';
import { ModelAbortedError, toModelReply } from '../src/model/openai/openaiReply.js';
import { readChatStream } from '../src/model/openai/openaiStreams.js';
import { createOpenAIResponsesModel } from '../src/model/openai/responsesModel.js';
import { toResponsesReply } from '../src/model/openai/responsesReply.js';
import { defineTool } from '../src/tool.js';
import { type FakeOpenAI, type FakeReply, type FakeStep, startFakeOpenAI } from './support/fakeOpenAI.js';
import { harness } from './support/harness.js';

const KEY = 'sk-test-0123456789abcdefghij';
const FALLBACK = { inputTokens: 16_000, outputTokens: 1_024 };

const events = (name: string): Record<string, unknown>[] =>
  readFileSync(new URL(`./fixtures/wire/streams/${name}.jsonl`, import.meta.url), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
const recordedBody = (name: string) =>
  JSON.parse(readFileSync(new URL(`./fixtures/wire/responses/${name}`, import.meta.url), 'utf8')) as unknown;

const CHAT_TEXT = 'openai-chat-gpt-4.1-nano-text';
const CHAT_CALL = 'openai-chat-gpt-4.1-nano-tool-call';
const RESPONSES_TEXT = 'openai-responses-gpt-4o-mini-text';
const RESPONSES_CALL = 'openai-responses-gpt-5.1-tool-call';

const chatStream = (name: string, more: Partial<Extract<FakeReply, { kind: 'sse' }>> = {}): FakeReply => ({
  kind: 'sse',
  events: events(name),
  done: true,
  ...more,
});
const responsesStream = (name: string, more: Partial<Extract<FakeReply, { kind: 'sse' }>> = {}): FakeReply => ({
  kind: 'sse',
  events: events(name),
  ...more,
});

let server: FakeOpenAI | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});
async function serve(...steps: FakeStep[]) {
  server = await startFakeOpenAI(steps);
  return server;
}
const chat = (stream = true) =>
  createOpenAIModel({ baseURL: server!.url, apiKey: KEY, model: 'gpt-4.1-nano', env: {}, stream });
const responses = (stream = true) =>
  createOpenAIResponsesModel({ baseURL: server!.url, apiKey: KEY, model: 'gpt-4o-mini', env: {}, stream });

/** One turn's request, as the runtime would make it, collecting what reaches `onText`. */
function turn(signal = new AbortController().signal) {
  const deltas: string[] = [];
  const request: ModelRequest = {
    taskId: 't',
    turn: 1,
    goal: 'say hello',
    principal: { userId: 'E17', tenantId: 'acme' },
    tools: [],
    observations: [],
    transcript: async () => [{ kind: 'goal', at: 0, text: 'say hello' }],
    signal,
    onText: (delta) => deltas.push(delta),
  };
  return { request, deltas };
}

describe('Chat Completions streaming', () => {
  it('assembles a recorded text stream into the answer, usage as the last chunk reports it', async () => {
    const srv = await serve(chatStream(CHAT_TEXT));
    const { request, deltas } = turn();
    const reply = await chat().decide(request);

    expect(srv.requests[0]!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(reply).toEqual({
      type: 'answer',
      text: 'Hello! How can I assist you today?',
      usage: { inputTokens: 19, outputTokens: 10 },
      modelVersion: 'gpt-4.1-nano-2025-04-14',
    });
    // Every content delta, in the order sent.
    const sent = events(CHAT_TEXT).flatMap((chunk: any) =>
      chunk.choices.flatMap((c: any) => (c.delta.content ? [c.delta.content] : [])),
    );
    expect(deltas).toEqual(sent);
    expect(deltas.join('')).toBe('Hello! How can I assist you today?');
  });

  it('assembles a recorded tool-call stream into the reply the same turn gives unstreamed; no argument reaches onText', async () => {
    await serve(chatStream(CHAT_CALL));
    const { request, deltas } = turn();
    const streamed = await chat().decide(request);

    // The same turn as a whole completion, as the API returns it unstreamed (same id, call, finish and usage).
    const whole = {
      id: 'chatcmpl-BQb0iSFzE1zz1OVhaqg3u2Yqn1Ezf',
      object: 'chat.completion',
      created: 1745678496,
      model: 'gpt-4.1-nano-2025-04-14',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: null,
            refusal: null,
            tool_calls: [
              {
                id: 'call_PieqNSej6kM9hgYbcQdbZSaC',
                type: 'function',
                function: { name: 'get_weather', arguments: '{"location": "Tokyo"}' },
              },
            ],
          },
          finish_reason: 'tool_calls',
          logprobs: null,
        },
      ],
      usage: { prompt_tokens: 67, completion_tokens: 31, total_tokens: 98 },
    };
    expect(streamed).toEqual(toModelReply(whole, { fallbackUsage: FALLBACK }));
    expect(streamed).toMatchObject({
      type: 'tool_calls',
      calls: [{ callId: 'call_PieqNSej6kM9hgYbcQdbZSaC', name: 'get_weather', arguments: '{"location": "Tokyo"}' }],
      usage: { inputTokens: 67, outputTokens: 31 },
    });
    expect(deltas).toEqual([]);
  });

  it.each([
    ['mid-way through the call’s arguments', { cutAfter: 4 }],
    ['after the finish chunk, before the usage chunk and [DONE]', { cutAfter: 8 }],
    ['cleanly, but before any finish reason', { events: events(CHAT_CALL).slice(0, 6), done: false }],
  ])('refuses a stream that ends %s: a transient failure, no call', async (_what, cut) => {
    await serve(chatStream(CHAT_CALL, cut));
    const failure = await chat()
      .decide(turn().request)
      .then(
        (reply) => reply,
        (error: unknown) => error,
      );
    expect(failure).toBeInstanceOf(TransientModelError);
    expect(String((failure as Error).message)).toMatch(/stream (broke|ended)/);
  });

  it('charges the reservation when a server that ignores include_usage ends its stream without usage', async () => {
    await serve(chatStream(CHAT_CALL, { events: events(CHAT_CALL).slice(0, 8) }));
    expect(await chat().decide(turn().request)).toMatchObject({ type: 'tool_calls', usage: FALLBACK });
  });

  it('keeps every streamed call whatever index the server numbers it with, in index order', async () => {
    // A call numbered -1 or 1.5 was silently dropped from the batch; one numbered 2^32 - 2 grew a sparse array the
    // assembly then walked slot by slot (minutes of blocked event loop). Each is kept, by its index, at once.
    const part = (index: number, id: string, name: string) => ({ index, id, function: { name, arguments: '{}' } });
    const chunks = [
      { id: 'x', choices: [{ index: 0, delta: { tool_calls: [part(0, 'a', 'find'), part(1.5, 'b', 'get')] } }] },
      {
        id: 'x',
        choices: [{ index: 0, delta: { tool_calls: [part(-1, 'c', 'put'), part(2 ** 32 - 2, 'd', 'end')] } }],
      },
      { id: 'x', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
    ];
    async function* stream() {
      yield* chunks;
    }
    const started = Date.now();
    const body = await readChatStream(stream(), {}, new AbortController().signal);
    expect(Date.now() - started).toBeLessThan(1_000);
    const reply = toModelReply(body, { fallbackUsage: FALLBACK });
    expect(reply).toMatchObject({ type: 'tool_calls' });
    expect((reply as Extract<ModelReply, { type: 'tool_calls' }>).calls.map((c) => c.callId)).toEqual([
      'c',
      'a',
      'b',
      'd',
    ]);
  });

  it('stops reading when the turn is aborted, with ModelAbortedError', async () => {
    const srv = await serve(chatStream(CHAT_TEXT, { hangAfter: 3 }));
    const controller = new AbortController();
    const { request, deltas } = turn(controller.signal);
    const pending = chat().decide(request);
    await expect.poll(() => deltas.length).toBe(2);
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(ModelAbortedError);
    await expect.poll(() => srv.requests[0]!.aborted).toBe(true);
  });
});

describe('Responses API streaming', () => {
  it('gives the recorded non-streamed reply of the same turn, from response.completed', async () => {
    await serve(responsesStream(RESPONSES_TEXT));
    const { request, deltas } = turn();
    const streamed = await responses().decide(request);

    // vercel/ai recorded this turn both ways (issue 20047): the same text, model and usage (12 + 2).
    expect(streamed).toEqual(
      toResponsesReply(recordedBody('openai-gpt-4o-mini-text.json'), { fallbackUsage: FALLBACK }),
    );
    expect(streamed).toEqual({
      type: 'answer',
      text: 'OK',
      usage: { inputTokens: 12, outputTokens: 2 },
      modelVersion: 'gpt-4o-mini-2024-07-18',
    });
    expect(deltas).toEqual(['OK']);
    expect(server!.requests[0]!.body).toMatchObject({ stream: true, store: false });
  });

  it('reads a recorded function-call stream (gpt-5.1) without passing its argument deltas on', async () => {
    await serve(responsesStream(RESPONSES_CALL));
    const { request, deltas } = turn();
    const streamed = await responses().decide(request);
    expect(streamed).toEqual({
      type: 'tool_calls',
      calls: [{ callId: 'call_2FQdm3Br7Qb35YUBSkDR7kue', name: 'get_weather', arguments: '{"city":"Beijing"}' }],
      text: null,
      usage: { inputTokens: 45, outputTokens: 25 },
      modelVersion: 'gpt-5.1-2025-11-13',
    });
    expect(deltas).toEqual([]);
  });

  it.each([
    ['mid-way through the arguments', { cutAfter: 6 }],
    ['after the call item is done but before response.completed', { cutAfter: 11 }],
    ['cleanly, before response.completed', { events: events(RESPONSES_CALL).slice(0, 11) }],
  ])('refuses a stream cut %s: a transient failure, no call', async (_what, cut) => {
    await serve(responsesStream(RESPONSES_CALL, cut));
    const { request } = turn();
    await expect(responses().decide(request)).rejects.toBeInstanceOf(TransientModelError);
  });

  it('treats an error event in the stream as transient', async () => {
    const error = { type: 'error', code: 'server_error', message: 'The server had an error', sequence_number: 3 };
    await serve(responsesStream(RESPONSES_TEXT, { events: [...events(RESPONSES_TEXT).slice(0, 3), error] }));
    await expect(responses().decide(turn().request)).rejects.toBeInstanceOf(TransientModelError);
  });
});

/** The recorded calls' tool, so the recorded calls pass the gates and run. */
const weather = (runs: string[]) =>
  defineTool({
    name: 'get_weather',
    description: 'Current weather of a place. Read-only.',
    effect: 'read',
    scopes: [],
    input: z.strictObject({ location: z.string() }),
    output: z.strictObject({ sky: z.string() }),
    timeoutMs: 2_000,
    async execute(args) {
      runs.push(args.location);
      return { ok: true, value: { sky: 'clear' } };
    },
  });

describe('a streamed task in the orchestrator', () => {
  it('retries a stream cut mid-call, runs the whole call once, and charges only what the provider reported', async () => {
    const srv = await serve(chatStream(CHAT_CALL, { cutAfter: 5 }), chatStream(CHAT_CALL), chatStream(CHAT_TEXT));
    const runs: string[] = [];
    const { orchestrator } = harness({ model: chat(), extraTools: [weather(runs)] });
    const status = await orchestrator.run({ principal: E17, goal: 'weather in Tokyo?', taskId: 'stream-cut' });

    expect(status.state).toBe('answered');
    expect(status.outcome?.answer).toBe('Hello! How can I assist you today?');
    expect(srv.requests).toHaveLength(3);
    expect(runs).toEqual(['Tokyo']);
    // Only the two whole turns are charged, as reported: 67 + 31 and 19 + 10.
    expect(status.budget.used.tokens).toBe(98 + 29);
    // Nothing of the cut stream is in the transcript: one call, with its whole arguments.
    const transcript = await orchestrator.transcript('stream-cut');
    const calls = transcript.flatMap((entry) => (entry.kind === 'proposal' ? entry.calls : []));
    expect(calls).toEqual([
      expect.objectContaining({ callId: 'call_PieqNSej6kM9hgYbcQdbZSaC', arguments: '{"location": "Tokyo"}' }),
    ]);
  });
});

/**
 * The AI SDK adapter's streaming over the SDK's mock model: provider stream parts in the AI SDK's model spec (v3),
 * carrying the recorded gpt-4.1-nano turns (their text deltas, call, finish and usage), against the same turns as
 * `doGenerate` results.
 */
describe('AI SDK streaming', () => {
  const v3Usage = (input: number, output: number) => ({
    inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: output, text: output, reasoning: undefined },
  });
  const recordedText = events(CHAT_TEXT).flatMap((chunk: any) =>
    chunk.choices.flatMap((c: any) => (c.delta.content ? [c.delta.content as string] : [])),
  );
  const head = [
    { type: 'stream-start', warnings: [] },
    { type: 'response-metadata', id: 'chatcmpl-BQadcZbvmcHdEiJlKyhlXR9mrGXaB', modelId: 'gpt-4.1-nano-2025-04-14' },
  ];
  const textParts = [
    ...head,
    { type: 'text-start', id: 't0' },
    ...recordedText.map((delta) => ({ type: 'text-delta', id: 't0', delta })),
    { type: 'text-end', id: 't0' },
    { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: v3Usage(19, 10) },
  ];
  const callParts = [
    ...head,
    { type: 'tool-input-start', id: 'call_PieqNSej6kM9hgYbcQdbZSaC', toolName: 'get_weather' },
    ...['{"lo', 'catio', 'n": "T', 'okyo', '"}'].map((delta) => ({
      type: 'tool-input-delta',
      id: 'call_PieqNSej6kM9hgYbcQdbZSaC',
      delta,
    })),
    { type: 'tool-input-end', id: 'call_PieqNSej6kM9hgYbcQdbZSaC' },
    {
      type: 'tool-call',
      toolCallId: 'call_PieqNSej6kM9hgYbcQdbZSaC',
      toolName: 'get_weather',
      input: '{"location": "Tokyo"}',
    },
    { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage: v3Usage(67, 31) },
  ];
  /** A provider stream of `parts`; with `breakAfter`, the stream errors after that many parts. */
  const providerStream = (parts: unknown[], breakAfter?: number) =>
    new ReadableStream({
      start(controller) {
        parts.forEach((part, i) => {
          if (i === breakAfter) controller.error(new TypeError('terminated'));
          else if (breakAfter === undefined || i < breakAfter) controller.enqueue(part);
        });
        if (breakAfter === undefined || breakAfter >= parts.length) {
          if (breakAfter !== undefined) controller.error(new TypeError('terminated'));
          else controller.close();
        }
      },
    });
  const streamingMock = (parts: unknown[], breakAfter?: number) =>
    new MockLanguageModelV3({
      provider: 'mock',
      modelId: 'gpt-4.1-nano',
      doStream: async () => ({ stream: providerStream(parts, breakAfter) as never }),
    });
  const generatingMock = (result: unknown) =>
    new MockLanguageModelV3({ provider: 'mock', modelId: 'gpt-4.1-nano', doGenerate: async () => result as never });
  const offered = [
    {
      name: 'get_weather',
      description: 'weather',
      effect: 'read' as const,
      parameters: {
        type: 'object',
        properties: { location: { type: 'string' } },
        required: ['location'],
        additionalProperties: false,
      },
    },
  ];

  it('assembles a streamed answer into the reply the same turn gives through doGenerate, deltas in order', async () => {
    const { request, deltas } = turn();
    const streamed = await createAiSdkModel({ model: streamingMock(textParts), stream: true }).decide(request);
    const whole = await createAiSdkModel({
      model: generatingMock({
        content: [{ type: 'text', text: recordedText.join('') }],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage: v3Usage(19, 10),
        warnings: [],
        response: { modelId: 'gpt-4.1-nano-2025-04-14' },
      }),
    }).decide(turn().request);
    expect(streamed).toEqual(whole);
    expect(streamed).toMatchObject({ type: 'answer', text: 'Hello! How can I assist you today?' });
    expect(deltas).toEqual(recordedText);
  });

  it('assembles a streamed tool call; its input deltas never reach onText', async () => {
    const { request, deltas } = turn();
    const streamed = await createAiSdkModel({ model: streamingMock(callParts), stream: true }).decide({
      ...request,
      tools: offered,
    });
    expect(streamed).toEqual({
      type: 'tool_calls',
      calls: [{ callId: 'call_PieqNSej6kM9hgYbcQdbZSaC', name: 'get_weather', arguments: '{"location": "Tokyo"}' }],
      text: null,
      usage: { inputTokens: 67, outputTokens: 31 },
      modelVersion: 'gpt-4.1-nano-2025-04-14',
    });
    expect(deltas).toEqual([]);
  });

  it.each([
    ['mid-way through the call’s input', 5],
    ['after the tool-call part, before finish', 9],
  ])('refuses a provider stream that breaks %s: transient, no call', async (_what, breakAfter) => {
    const model = createAiSdkModel({ model: streamingMock(callParts, breakAfter), stream: true });
    await expect(model.decide({ ...turn().request, tools: offered })).rejects.toBeInstanceOf(TransientModelError);
  });

  it('refuses a provider stream that ends without its finish part', async () => {
    const model = createAiSdkModel({ model: streamingMock(callParts.slice(0, -1)), stream: true });
    await expect(model.decide({ ...turn().request, tools: offered })).rejects.toBeInstanceOf(TransientModelError);
  });

  it('sorts a request the provider refused before streaming by the shared taxonomy (429: transient)', async () => {
    const model = new MockLanguageModelV3({
      provider: 'mock',
      modelId: 'gpt-4.1-nano',
      doStream: async () => {
        throw new APICallError({
          message: 'Rate limit reached',
          url: 'https://api.openai.com/v1/chat/completions',
          requestBodyValues: {},
          statusCode: 429,
          responseHeaders: { 'retry-after': '2' },
        });
      },
    });
    const failure = await createAiSdkModel({ model, stream: true })
      .decide(turn().request)
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TransientModelError);
    expect((failure as TransientModelError).retryAfterMs).toBe(2_000);
  });
});
