/**
 * One provider error taxonomy for both adapters: real error bodies (test/fixtures/wire/errors, see SOURCES.md)
 * replayed with their statuses by a local HTTP server, to the OpenAI adapter (the `openai` client) and to the AI SDK
 * adapter (an OpenAI-compatible chat model on `@ai-sdk/provider-utils`, as `@ai-sdk/openai-compatible` builds it).
 * Each case checks the classification and what becomes of the task.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import OpenAI, { AzureOpenAI } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { E17 } from '../examples/booking/scenarios.js';
import { createAiSdkModel } from '../src/model/aisdk/aiSdkModel.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { createOpenAIModel } from '../src/model/openai/openaiModel.js';
import { type ProviderErrorKind, classifyProviderError } from '../src/model/providerErrors.js';
import { chatCompletionsModel } from './support/chatCompletionsModel.js';
import { type FakeOpenAI, type FakeReply, type FakeStep, fake, startFakeOpenAI } from './support/fakeOpenAI.js';
import { harness } from './support/harness.js';

const KEY = 'sk-test-0123456789abcdefghij';

const body = (name: string) => readFileSync(new URL(`./fixtures/wire/errors/${name}`, import.meta.url), 'utf8');
const replay = (status: number, name: string, headers: Record<string, string> = {}): FakeReply => ({
  kind: 'text',
  status,
  text: body(name),
  contentType: 'application/json',
  headers,
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

const ADAPTERS: [string, (url: string) => AgentModel][] = [
  ['openai', (url) => createOpenAIModel({ baseURL: url, apiKey: KEY, model: 'fake', env: {} })],
  ['ai-sdk', (url) => createAiSdkModel({ model: chatCompletionsModel(url, KEY), secrets: [KEY] })],
  // The host's own client: its error bodies are read the same way (the adapter wraps the client's fetch).
  [
    'openai with the host client',
    (url) =>
      createOpenAIModel({
        client: new OpenAI({ baseURL: url, apiKey: KEY, maxRetries: 0 }),
        apiKey: KEY,
        model: 'fake',
        env: {},
      }),
  ],
];

describe('classifyProviderError on recorded bodies', () => {
  const options = { secrets: [KEY], maxRetryAfterMs: 60_000 };
  it.each<[string, number, ProviderErrorKind, string | null]>([
    ['openai-context-length-exceeded.json', 400, 'context_too_long', 'context_length_exceeded'],
    ['deepseek-context-length.json', 400, 'context_too_long', 'invalid_request_error'],
    ['vllm-context-length.json', 400, 'context_too_long', null],
    ['anthropic-prompt-too-long.json', 400, 'context_too_long', null],
    ['openai-invalid-api-key.json', 401, 'auth_failed', 'invalid_api_key'],
    ['openai-unsupported-country.json', 403, 'auth_failed', 'unsupported_country_region_territory'],
    ['openai-model-not-found.json', 404, 'not_found', 'model_not_found'],
    ['openai-no-tool-call-found.json', 400, 'bad_request', null],
    ['mistral-extra-forbidden.json', 422, 'bad_request', null],
    ['groq-tool-use-failed.json', 400, 'model_output', 'tool_use_failed'],
    ['groq-tool-call-validation-failed.json', 400, 'model_output', 'tool_use_failed'],
    ['groq-failed-to-call-no-code.json', 400, 'model_output', null],
    ['openai-rate-limit.json', 429, 'rate_limited', 'rate_limit_exceeded'],
    ['openai-server-error.json', 500, 'server_error', null],
    ['llamacpp-exceed-context-400.json', 400, 'context_too_long', null],
    // llama.cpp sent its context overflow as a 500 before ggml-org/llama.cpp#16486: no retry can fix it.
    ['llamacpp-exceed-context-500.json', 500, 'context_too_long', null],
    ['ollama-model-not-found.json', 404, 'not_found', null],
  ])('%s (%d) → %s', (name, status, kind, code) => {
    const classified = classifyProviderError({ status, body: body(name) }, options);
    expect(classified).toMatchObject({ kind, providerCode: code, status });
    expect(classified.transient).toBe(kind === 'rate_limited' || kind === 'server_error');
    expect(classified.message.length).toBeLessThanOrEqual(201);
    expect(classified.message).not.toContain('\n');
  });

  it('reads a 5xx as a context overflow by its code only, never by words its message may echo', () => {
    const echoed = JSON.stringify({ error: { message: 'upstream failed on: "the prompt is too long, sorry"' } });
    expect(classifyProviderError({ status: 502, body: echoed }, options)).toMatchObject({ kind: 'server_error' });
    expect(classifyProviderError({ status: 400, body: echoed }, options)).toMatchObject({ kind: 'context_too_long' });
  });

  it('reads Retry-After, caps it, and treats no answer as unreachable', () => {
    const header = (name: string) => (name === 'retry-after' ? '3600' : undefined);
    expect(classifyProviderError({ status: 429, body: body('openai-rate-limit.json'), header }, options)).toMatchObject(
      { kind: 'rate_limited', retryAfterMs: 60_000 },
    );
    expect(classifyProviderError({ status: null, body: null }, options)).toMatchObject({
      kind: 'unreachable',
      transient: true,
    });
  });

  it('masks the key it was given and anything key-like', () => {
    const echoed = JSON.stringify({ error: { message: `bad key ${KEY} and sk-proj-abcdefgh12345678`, code: 'x' } });
    const { message } = classifyProviderError({ status: 401, body: echoed }, options);
    expect(message).toBe('bad key [key] and [key]');
  });
});

describe.each(ADAPTERS)('the %s adapter against recorded error bodies', (_name, adapter) => {
  it.each<[string, number, string, RegExp]>([
    [
      'openai-context-length-exceeded.json',
      400,
      'context_too_long',
      /400 \[context_length_exceeded\].*maximum context length is 4097/,
    ],
    ['deepseek-context-length.json', 400, 'context_too_long', /maximum context length is 131072 tokens/],
    ['vllm-context-length.json', 400, 'context_too_long', /maximum context length is 16384 tokens/],
    ['anthropic-prompt-too-long.json', 400, 'context_too_long', /prompt is too long: 201130 tokens/],
    [
      'openai-invalid-api-key.json',
      401,
      'model_auth_failed',
      /401 \[invalid_api_key\].*Incorrect API key provided: \[key\]/,
    ],
    ['openai-unsupported-country.json', 403, 'model_auth_failed', /403 \[unsupported_country_region_territory\]/],
    [
      'openai-model-not-found.json',
      404,
      'model_not_found',
      /404 \[model_not_found\].*The model `gpt-4o` does not exist/,
    ],
    [
      'openai-no-tool-call-found.json',
      400,
      'model_request_failed',
      /400 .*No tool call found for function call output/,
    ],
    ['mistral-extra-forbidden.json', 422, 'model_request_failed', /422 .*Extra inputs are not permitted/],
    ['llamacpp-exceed-context-400.json', 400, 'context_too_long', /exceeds the available context size/],
    ['llamacpp-exceed-context-500.json', 500, 'context_too_long', /exceeds the available context size/],
    ['ollama-model-not-found.json', 404, 'model_not_found', /model "ollama" not found, try pulling it first/],
  ])('%s (%d) fails the task at once with %s, the provider saying why', async (name, status, code, said) => {
    // A prompt too long is asked again once, compacted harder (test/compactionRetry.test.ts); refused again, it stops.
    const asked = code === 'context_too_long' ? 2 : 1;
    const srv = await serve(...Array.from({ length: asked }, () => replay(status, name)));
    const { orchestrator } = harness({ model: adapter(srv.url), policy: { modelOutageMs: 60_000 } });
    const result = await orchestrator.run({ principal: E17, goal: 'say ok', taskId: `refused-${status}` });

    expect(srv.requests).toHaveLength(asked);
    expect(result.state).toBe('failed');
    expect(result.outcome?.reason.code).toBe(code);
    expect(result.outcome?.reason.message).toMatch(said);
    expect(result.outcome?.reason.message).not.toMatch(/could not be reached|stayed unreachable/);
    expect(result.outcome?.reason.message).not.toContain('sk-VKMIs');
    expect(result.outcome?.reason.message).not.toContain(KEY);
    // Bounded: the provider's message is cut, and the chart's stop adds at most a short reason
    // ("...; nothing older was left to summarise").
    expect(result.outcome?.reason.message.length).toBeLessThan(480);
    // No retry, no outage wait, and the turn that got no reply is charged no tokens.
    expect(result.budget.used.retries).toBe(0);
    expect(result.outage).toBeNull();
    expect(result.budget.used.tokens).toBe(0);
    expect(result.budget.used.modelTurns).toBe(1);
  });

  it.each(['groq-tool-use-failed.json', 'groq-tool-call-validation-failed.json', 'groq-failed-to-call-no-code.json'])(
    're-asks after %s (the model’s own call was refused), charging nothing for it',
    async (name) => {
      const srv = await serve(
        replay(400, name),
        fake.text('ok', { usage: { prompt_tokens: 50, completion_tokens: 7 } }),
      );
      const { orchestrator } = harness({ model: adapter(srv.url) });
      const result = await orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'model-output' });

      expect(srv.requests).toHaveLength(2);
      expect(result.state).toBe('answered');
      expect(result.outcome?.answer).toBe('ok');
      expect(result.budget.used.tokens).toBe(57);
      expect(result.budget.used.retries).toBe(0);
      const invalid = (await orchestrator.transcript('model-output')).filter((e) => e.kind === 'invalid_output');
      expect(invalid).toEqual([
        expect.objectContaining({ detail: expect.stringContaining("the provider refused the model's output") }),
      ]);
    },
  );

  it('waits out a 429 for its retry-after-ms, then for the outage, holding no token reservation', async () => {
    const limited = replay(429, 'openai-rate-limit.json', { 'retry-after-ms': '80' });
    const srv = await serve(limited, limited);
    const policy = { modelOutageMs: 60_000, modelWakeMs: { first: 60_000, longest: 60_000 } };
    const { orchestrator } = harness({ model: adapter(srv.url), limits: { retries: 1 }, policy });
    const result = await orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'rate-limited' });

    expect(srv.requests).toHaveLength(2);
    expect(srv.requests[1]!.receivedAt - srv.requests[0]!.receivedAt).toBeGreaterThanOrEqual(75);
    expect(result.state).toBe('waiting_for_model');
    expect(result.outage?.lastError).toMatch(/429 \[rate_limit_exceeded\]: Rate limit reached for gpt-4/);
    expect(result.budget.used.retries).toBe(1);
    expect(result.budget.used.tokens).toBe(0);
  });

  it('fails a 5xx that outlasts the retries and the outage policy with model_unavailable, charging no tokens', async () => {
    const down = replay(500, 'openai-server-error.json');
    const srv = await serve(down, down);
    const { orchestrator } = harness({ model: adapter(srv.url), limits: { retries: 1 }, policy: { modelOutageMs: 0 } });
    const result = await orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'server-error' });

    expect(srv.requests).toHaveLength(2);
    expect(result.state).toBe('failed');
    expect(result.outcome?.reason.code).toBe('model_unavailable');
    expect(result.outcome?.reason.message).toMatch(/500: The server had an error processing your request/);
    expect(result.budget.used.tokens).toBe(0);
  });

  it('retries an unreachable server, then fails with model_unavailable, charging no tokens', async () => {
    const url = await closedPortUrl();
    const { orchestrator } = harness({ model: adapter(url), limits: { retries: 1 }, policy: { modelOutageMs: 0 } });
    const result = await orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'unreachable' });

    expect(result.state).toBe('failed');
    expect(result.outcome?.reason.code).toBe('model_unavailable');
    expect(result.outcome?.reason.message).toMatch(/could not be reached.*\(after 1 retries\)/);
    expect(result.budget.used.retries).toBe(1);
    expect(result.budget.used.tokens).toBe(0);
  });
});

/** A base URL on a port nothing listens on: connections are refused. */
async function closedPortUrl(): Promise<string> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return `http://127.0.0.1:${port}/v1`;
}

describe("the OpenAI adapter with a host's AzureOpenAI client", () => {
  it('takes the client as it is configured (api version, deployment) and sends through its fetch', async () => {
    const seen: string[] = [];
    const client = new AzureOpenAI({
      apiKey: KEY,
      apiVersion: '2024-10-21',
      endpoint: 'https://example-resource.openai.azure.com',
      deployment: 'prod-gpt4o',
      maxRetries: 0,
      fetch: async (url) => {
        seen.push(String(url));
        return new Response(body('openai-context-length-exceeded.json'), {
          status: 400,
          headers: { 'content-type': 'application/json' },
        });
      },
    });
    const saved = process.env.OPENAI_API_VERSION;
    delete process.env.OPENAI_API_VERSION;
    try {
      // withOptions would rebuild the client from its base options: the api version and the deployment are lost.
      const model = createOpenAIModel({ client, apiKey: KEY, model: 'gpt-4o', env: {} });
      await expect(model.decide(turnRequest())).rejects.toMatchObject({ code: 'context_too_long' });
    } finally {
      if (saved !== undefined) process.env.OPENAI_API_VERSION = saved;
    }
    expect(seen).toHaveLength(1);
    expect(seen[0]).toContain('/openai/deployments/prod-gpt4o/chat/completions?api-version=2024-10-21');
  });
});

function turnRequest(): Parameters<AgentModel['decide']>[0] {
  return {
    taskId: 't',
    turn: 1,
    goal: 'hello',
    principal: { userId: 'E17', tenantId: 'acme' },
    tools: [],
    observations: [],
    transcript: async () => [{ kind: 'goal', at: 0, text: 'hello' }],
    signal: new AbortController().signal,
  };
}
