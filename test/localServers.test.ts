/**
 * Local OpenAI-compatible servers in the wire corpus: response bodies recorded from Ollama's `/v1` API
 * (test/fixtures/wire/local, see SOURCES.md there) replayed by a local HTTP server through both adapters, inside a
 * real orchestrator. Ollama sends the text it wrote beside its tool calls, an `index` on each call, its thinking as
 * `reasoning`, and reads only `max_tokens`. Its and llama.cpp's error bodies are in test/providerErrors.test.ts.
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
