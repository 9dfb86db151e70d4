/**
 * Local OpenAI-compatible servers in the wire corpus: response bodies recorded from Ollama's `/v1` API
 * (test/fixtures/wire/local, see SOURCES.md there) replayed by a local HTTP server through both adapters, inside a
 * real orchestrator. Ollama sends the text it wrote beside its tool calls, an `index` on each call, its thinking as
 * `reasoning`, and reads only `max_tokens`. Streams recorded from Ollama and llama.cpp (test/fixtures/wire/streams)
 * go through the streaming OpenAI adapter. Their error bodies are in test/providerErrors.test.ts.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { E17 } from '../examples/booking/scenarios.js';
import { createAiSdkModel } from '../src/model/aisdk/aiSdkModel.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { createOpenAIModel } from '../src/model/openai/openaiModel.js';
import { defineTool } from '../src/tool.js';
import { chatCompletionsModel } from './support/chatCompletionsModel.js';
import type { ModelRequest } from '../src/model/agentModel.js';
import { type FakeOpenAI, type FakeReply, startFakeOpenAI } from './support/fakeOpenAI.js';
import { harness } from './support/harness.js';

const recorded = (name: string): FakeReply => ({
  kind: 'text',
  status: 200,
  text: readFileSync(new URL(`./fixtures/wire/local/${name}`, import.meta.url), 'utf8'),
  contentType: 'application/json',
});

let server: FakeOpenAI | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** The recorded call's tool: lists products matching a text query. */
function productsTool(seen: unknown[]) {
  return defineTool({
    name: 'get_products',
    description: 'List store products, optional text query',
    effect: 'read',
    scopes: [],
    timeoutMs: 2_000,
    input: z.strictObject({ query: z.string() }),
    output: z.strictObject({ products: z.array(z.string()) }),
    async execute(args) {
      seen.push(args);
      return { ok: true, value: { products: ['P-1 desk lamp'] } };
    },
  });
}

const ADAPTERS: [string, (url: string) => AgentModel][] = [
  ['openai', (url) => createOpenAIModel({ baseURL: url, apiKey: 'local', model: 'qwen3:8b-q8_0', env: {} })],
  ['ai-sdk', (url) => createAiSdkModel({ model: chatCompletionsModel(url, 'local') })],
];

describe.each(ADAPTERS)('Ollama through the %s adapter', (name, adapter) => {
  it('runs the recorded call, pairs its result by Ollama’s call id, and ends on the recorded answer', async () => {
    server = await startFakeOpenAI([
      recorded('ollama-qwen3-tool-call.json'),
      recorded('ollama-qwen35-reasoning-answer.json'),
    ]);
    const seen: unknown[] = [];
    const { orchestrator } = harness({ model: adapter(server.url), extraTools: [productsTool(seen)] });
    const result = await orchestrator.run({ principal: E17, goal: 'What products do you have?', taskId: 'ollama' });

    expect(result.state).toBe('answered');
    // The answer is the content; the model's `reasoning` is not part of it.
    expect(result.outcome?.answer).toBe('- Title: Telegram chat screenshot.');
    expect(seen).toEqual([{ query: '' }]);
    // Charged as Ollama reported both turns.
    expect(result.budget.used.tokens).toBe(164 + 188 + 6_863 + 1_676);
    // The request shapes below are the openai client's; the AI SDK's are made by the provider package.
    if (name !== 'openai') return;
    const [first, second] = server.requests;
    // No tokens field Ollama ignores: it reads only max_tokens.
    expect(first!.body.max_tokens).toBeGreaterThan(0);
    expect(first!.body).not.toHaveProperty('max_completion_tokens');
    // The second request carries the call under Ollama's id, and its result paired with it.
    const messages = second!.body.messages as { role: string; tool_call_id?: string; tool_calls?: { id: string }[] }[];
    expect(messages.find((m) => m.role === 'assistant')?.tool_calls?.map((c) => c.id)).toEqual(['call_ws2damtb']);
    expect(messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id)).toEqual(['call_ws2damtb']);
  });
});

const streamed = (name: string): FakeReply => ({
  kind: 'sse',
  events: readFileSync(new URL(`./fixtures/wire/streams/${name}.jsonl`, import.meta.url), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>),
  done: true,
});

/** One turn's request, collecting what reaches `onText`. */
function turn() {
  const deltas: string[] = [];
  const request: ModelRequest = {
    taskId: 't',
    turn: 1,
    goal: 'list the files',
    principal: { userId: 'E17', tenantId: 'acme' },
    tools: [],
    observations: [],
    transcript: async () => [{ kind: 'goal', at: 0, text: 'list the files' }],
    signal: new AbortController().signal,
    onText: (delta) => deltas.push(delta),
  };
  return { request, deltas };
}

describe('recorded streams of local servers through the streaming OpenAI adapter', () => {
  const streaming = () =>
    createOpenAIModel({ baseURL: server!.url, apiKey: 'local', model: 'local', env: {}, stream: true });

  it('Ollama: two whole calls in two chunks, told apart by index; no usage, so the reservation is charged', async () => {
    server = await startFakeOpenAI([streamed('ollama-qwen2.5-coder-parallel-tool-calls')]);
    const { request, deltas } = turn();
    const reply = await streaming().decide(request);
    expect(reply).toMatchObject({
      type: 'tool_calls',
      calls: [
        { callId: 'call_wteop8bt', name: 'run_command', arguments: '{"command":"ls"}' },
        { callId: 'call_rk2xye1l', name: 'run_command', arguments: '{"command":"ls -l"}' },
      ],
    });
    // Ollama sends "" beside its calls: nothing to show.
    expect(deltas).toEqual([]);
    // No usage chunk (none was asked of Ollama's stream here): charged the turn's whole reservation.
    expect(reply.usage).toEqual({ inputTokens: 16_000, outputTokens: 1_024 });
  });

  it('llama.cpp: a call opened empty and its arguments in fragments; charged its own timings, not the reservation', async () => {
    server = await startFakeOpenAI([streamed('llamacpp-qwen3coder-tool-call')]);
    const { request, deltas } = turn();
    const reply = await streaming().decide(request);
    expect(reply).toMatchObject({
      type: 'tool_calls',
      calls: [{ callId: 'v2dh...', name: 'run_command', arguments: '{"command":"pwd"}' }],
      // timings: 0 cached + 463 evaluated, 20 predicted.
      usage: { inputTokens: 463, outputTokens: 20 },
    });
    expect(deltas).toEqual([]);
  });

  it('llama.cpp with timings_per_token: charged the last chunk’s timings, not the first partial count', async () => {
    // With `timings_per_token` (a request option; ik_llama.cpp's default) every chunk carries the running timings:
    // predicted_n counts up to the turn's total. The first of them says 1 token was predicted.
    const recordedEvents = (streamed('llamacpp-qwen3coder-tool-call') as { events: Record<string, unknown>[] }).events;
    const events = recordedEvents.map((event, i) => ({
      ...event,
      timings: { cache_n: 0, prompt_n: 463, predicted_n: i === recordedEvents.length - 1 ? 20 : i + 1 },
    }));
    server = await startFakeOpenAI([{ kind: 'sse', events, done: true }]);
    const { request } = turn();
    const reply = await streaming().decide(request);
    expect(reply.usage).toEqual({ inputTokens: 463, outputTokens: 20 });
  });
});
