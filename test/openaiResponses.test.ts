/**
 * The Responses API adapter over HTTP: the real `openai` client (`responses.create`) against a local server that
 * replays recorded Responses API bodies (test/fixtures/wire/responses, see SOURCES.md), inside a real orchestrator.
 * Assertions are on the exact requests the server received and on what became of each task.
 */
import { TransientModelError } from '../src/model/agentModel.js';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { BOOKING_GOAL, BOOKING_SUCCESS, E17, MEETING } from '../examples/booking/scenarios.js';
import { createOpenAIModel } from '../src/model/openai/openaiModel.js';
import { isReasoningModel } from '../src/model/openai/responsesInput.js';
import { type OpenAIResponsesModelOptions, createOpenAIResponsesModel } from '../src/model/openai/responsesModel.js';
import { toResponsesReply } from '../src/model/openai/responsesReply.js';
import type { TranscriptEntry } from '../machines/journal.js';
import { defineTool, toolParametersSchema } from '../src/tool.js';
import {
  type FakeOpenAI,
  type FakeReply,
  type FakeRequest,
  type FakeStep,
  startFakeOpenAI,
} from './support/fakeOpenAI.js';
import { harness, reserveArgs } from './support/harness.js';

const KEY = 'sk-test-0123456789abcdefghij';

const fixture = (dir: 'responses' | 'errors', name: string) =>
  readFileSync(new URL(`./fixtures/wire/${dir}/${name}`, import.meta.url), 'utf8');
const recorded = (name: string) => JSON.parse(fixture('responses', name)) as Record<string, unknown>;
const replay = (name: string): FakeReply => ({ kind: 'json', body: recorded(name) });
const replayError = (status: number, dir: 'responses' | 'errors', name: string, headers: Record<string, string> = {}) =>
  ({ kind: 'text', status, text: fixture(dir, name), contentType: 'application/json', headers }) satisfies FakeReply;

/** The recorded gpt-4o-mini response (usage 12 + 2) with the scenario's own output items in place of its text. */
function scenarioReply(output: unknown[]): FakeReply {
  return { kind: 'json', body: { ...recorded('openai-gpt-4o-mini-text.json'), output } };
}
const functionCall = (callId: string, name: string, args: unknown) => ({
  id: `fc_${callId}`,
  type: 'function_call',
  status: 'completed',
  call_id: callId,
  name,
  arguments: typeof args === 'string' ? args : JSON.stringify(args),
});
const message = (text: string) => ({
  id: 'msg_scenario',
  type: 'message',
  status: 'completed',
  role: 'assistant',
  content: [{ type: 'output_text', annotations: [], logprobs: [], text }],
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
const responses = (options: OpenAIResponsesModelOptions = {}) =>
  createOpenAIResponsesModel({ baseURL: server!.url, apiKey: KEY, model: 'gpt-4o-mini', env: {}, ...options });

type Item = {
  type?: string;
  role?: string;
  content?: unknown;
  call_id?: string;
  name?: string;
  arguments?: string;
  output?: string;
  id?: string;
};
const inputOf = (request: FakeRequest) => request.body.input as Item[];
const kindsOf = (request: FakeRequest) =>
  inputOf(request).map((item) => (item.type === 'message' ? item.role : item.type));

/** A read tool with the recorded calls' names, so the recorded calls pass the gates and run. */
function readTool<T extends z.ZodRawShape>(name: string, input: T) {
  return defineTool({
    name,
    description: `Looks up ${name}. Read-only.`,
    effect: 'read',
    scopes: [],
    input: z.strictObject(input),
    output: z.strictObject({ found: z.string() }),
    timeoutMs: 2_000,
    async execute(args) {
      return { ok: true, value: { found: `${name}:${JSON.stringify(args)}` } };
    },
  });
}

describe('createOpenAIResponsesModel over HTTP', () => {
  it('books R7 as B204 through the gates, each request rebuilt from the transcript as paired input items', async () => {
    const rawFind = `{ "start_at": "${MEETING.start_at}",  "end_at": "${MEETING.end_at}", "attendees": 3, "needs_projector": true }`;
    const srv = await serve(
      scenarioReply([functionCall('call_find', 'find_available_rooms', rawFind)]),
      scenarioReply([functionCall('call_reserve', 'reserve_room', reserveArgs())]),
      scenarioReply([message('Booked R7 on 2026-09-28 14:00-15:00: booking B204.')]),
    );
    const { orchestrator, bookings, tools } = harness({ model: responses() });
    const status = await orchestrator.run({
      principal: E17,
      goal: BOOKING_GOAL,
      success: BOOKING_SUCCESS,
      taskId: 'book-r',
    });

    expect(status.state).toBe('done');
    expect(status.outcome?.reason.code).toBe('goal_met');
    expect(bookings.bookings.map((b) => `${b.bookingId} ${b.roomId} ${b.requesterId}`)).toEqual(['B204 R7 E17']);
    expect(srv.requests).toHaveLength(3);
    const [first, second, third] = srv.requests as [FakeRequest, FakeRequest, FakeRequest];

    expect(first.path).toBe('/v1/responses');
    expect(first.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(first.body).toMatchObject({
      model: 'gpt-4o-mini',
      store: false,
      max_output_tokens: 1024,
      parallel_tool_calls: false,
    });
    for (const field of [
      'previous_response_id',
      'stream',
      'temperature',
      'max_tokens',
      'messages',
      'instructions',
      'include',
    ])
      expect(first.body[field]).toBeUndefined();
    const search = tools.find((t) => t.name === 'find_available_rooms')!;
    expect(first.body.tools[0]).toEqual({
      type: 'function',
      name: 'find_available_rooms',
      description: search.description,
      parameters: toolParametersSchema(search),
      strict: true,
    });
    expect(kindsOf(first)).toEqual(['system', 'user']);
    expect(inputOf(first)[0]!.content).toContain('You act for user E17 in tenant acme');
    expect(inputOf(first)[1]).toEqual({ type: 'message', role: 'user', content: BOOKING_GOAL });

    expect(kindsOf(second)).toEqual(['system', 'user', 'function_call', 'function_call_output']);
    // The arguments go back exactly as the model sent them, without the API's item id.
    expect(inputOf(second)[2]).toEqual({
      type: 'function_call',
      call_id: 'call_find',
      name: 'find_available_rooms',
      arguments: rawFind,
    });
    expect(inputOf(second)[3]!.call_id).toBe('call_find');
    expect(JSON.parse(inputOf(second)[3]!.output!).rooms.map((r: { room_id: string }) => r.room_id)).toContain('R7');

    expect(kindsOf(third)).toEqual([
      'system',
      'user',
      'function_call',
      'function_call_output',
      'function_call',
      'function_call_output',
    ]);
    expect(inputOf(third).slice(0, 4)).toEqual(inputOf(second));
    expect(inputOf(third)[5]!.call_id).toBe('call_reserve');
    expect(JSON.parse(inputOf(third)[5]!.output!)).toMatchObject({ status: 'confirmed', booking_id: 'B204' });
    // Results travel only in function_call_output items; no item carries an API id.
    for (const request of srv.requests) {
      for (const item of inputOf(request)) {
        expect(item.id).toBeUndefined();
        if (item.type !== 'function_call_output') expect(JSON.stringify(item)).not.toMatch(/B204|observed_at|schedule/);
      }
    }
    // Usage from the recorded envelope (12 in, 2 out) settles the budget.
    expect(status.budget.used.tokens).toBe(3 * 14);
  });

  it('reads a call after a reasoning item (o3) and sends the call back after that reasoning item, whole', async () => {
    const srv = await serve(replay('openai-o3-reasoning-then-call.json'), replay('openai-gpt-4o-mini-text.json'));
    const scholar = readTool('semantic_scholar_search', {
      query: z.string(),
      limit: z.number().int(),
      offset: z.number().int(),
      year: z.number().int(),
    });
    const { orchestrator } = harness({ model: responses({ model: 'o3' }), extraTools: [scholar] });
    const status = await orchestrator.run({ principal: E17, goal: 'find papers on machine learning', taskId: 'o3' });

    expect(status.state).toBe('answered');
    expect(status.outcome?.answer).toBe('OK');
    expect(srv.requests[0]!.body.temperature).toBeUndefined();
    // store: false keeps nothing at OpenAI: the reasoning can go back only with its encrypted content.
    expect(srv.requests[0]!.body).toMatchObject({ store: false, include: ['reasoning.encrypted_content'] });
    const next = srv.requests[1]!;
    expect(kindsOf(next)).toEqual(['system', 'user', 'reasoning', 'function_call', 'function_call_output']);
    // As the API returned it (its encrypted content was masked "[redacted]" by the recording's source).
    expect(inputOf(next)[2]).toEqual({
      type: 'reasoning',
      id: 'rs_08c7eac45286fefb006a5f41bc7b8881a3a8cc432451e96393',
      summary: [],
      encrypted_content: '[redacted]',
    });
    // Kept out of the task's records: the blob is the provider's, unreadable and unredactable by the host.
    expect(JSON.stringify(await orchestrator.transcript('o3'))).not.toContain('rs_08c7');
    expect(JSON.stringify(await orchestrator.audit('o3'))).not.toContain('rs_08c7');
    const afterCall = inputOf(next).slice(1);
    expect(inputOf(next)[3]).toEqual({
      type: 'function_call',
      call_id: 'call_2mhz5FtwkZnzXQkTOMtYZpZH',
      name: 'semantic_scholar_search',
      arguments: '{"query":"machine learning","limit":10,"offset":0,"year":0}',
    });
    expect(JSON.parse(inputOf(next)[4]!.output!).found).toContain('machine learning');
    expect(afterCall).toHaveLength(4);
    expect(status.budget.used.tokens).toBe(114 + 88 + 14);
  });

  it('carries reasoning only within the adapter that saw it, for its own task and turn', async () => {
    const srv = await serve(
      replay('openai-o3-reasoning-then-call.json'),
      replay('openai-gpt-4o-mini-text.json'),
      replay('openai-gpt-4o-mini-text.json'),
      replay('openai-gpt-4o-mini-text.json'),
    );
    const first = responses({ model: 'o3' });
    const request = (taskId: string, turn: number, transcript: TranscriptEntry[]) => ({
      taskId,
      turn,
      goal: 'papers',
      principal: { userId: 'E17', tenantId: 'acme' },
      tools: [],
      observations: [],
      transcript: async () => transcript,
      signal: new AbortController().signal,
    });
    const goal: TranscriptEntry = { kind: 'goal', at: 0, text: 'papers' };
    await first.decide(request('x', 1, [goal]));
    const call = { callId: 'call_2mhz5FtwkZnzXQkTOMtYZpZH', tool: 'semantic_scholar_search', arguments: '{}' };
    const after: TranscriptEntry[] = [
      goal,
      { kind: 'proposal', at: 1, turn: 1, text: null, calls: [call] },
      {
        kind: 'result',
        at: 2,
        turn: 1,
        observation: { callId: call.callId, tool: call.tool, ok: true, data: {} } as never,
      },
    ];
    await first.decide(request('x', 2, after));
    await first.decide(request('y', 2, after));
    await responses({ model: 'o3' }).decide(request('x', 2, after));
    const reasoningIn = (i: number) => inputOf(srv.requests[i]!).filter((item) => item.type === 'reasoning').length;
    expect([reasoningIn(1), reasoningIn(2), reasoningIn(3)]).toEqual([1, 0, 0]);
  });

  it('pairs each of two parallel calls with its own output by call_id', async () => {
    const srv = await serve(replay('derived-parallel-calls.json'), replay('openai-gpt-4o-mini-text.json'));
    const { orchestrator } = harness({
      model: responses(),
      extraTools: [readTool('get_weather', { location: z.string() })],
    });
    const status = await orchestrator.run({ principal: E17, goal: 'weather in Paris and Bogotá', taskId: 'parallel' });

    expect(status.state).toBe('answered');
    const next = srv.requests[1]!;
    expect(kindsOf(next)).toEqual([
      'system',
      'user',
      'function_call',
      'function_call',
      'function_call_output',
      'function_call_output',
    ]);
    const outputs = Object.fromEntries(
      inputOf(next)
        .filter((item) => item.type === 'function_call_output')
        .map((item) => [item.call_id, JSON.parse(item.output!).found]),
    );
    expect(outputs).toEqual({
      call_12345xyz: 'get_weather:{"location":"Paris, France"}',
      call_67890abc: 'get_weather:{"location":"Bogotá, Colombia"}',
    });
  });

  it('ends the task model_refused on a refusal part', async () => {
    await serve(replay('derived-refusal.json'));
    const { orchestrator } = harness({ model: responses() });
    const status = await orchestrator.run({ principal: E17, goal: BOOKING_GOAL, taskId: 'refusal' });
    expect(status.outcome?.reason).toMatchObject({
      code: 'model_refused',
      message: "the model refused: I'm sorry, I cannot assist with that request.",
    });
  });

  it('ends the task model_refused when the output was withheld by the content filter', async () => {
    await serve(replay('derived-incomplete-content-filter.json'));
    const { orchestrator } = harness({ model: responses() });
    const status = await orchestrator.run({ principal: E17, goal: BOOKING_GOAL, taskId: 'filtered' });
    expect(status.outcome?.reason.code).toBe('model_refused');
    expect(status.outcome?.reason.message).toContain('content filter');
  });

  it('re-asks an output cut at max_output_tokens with a host note, charging what it used', async () => {
    const srv = await serve(
      replay('derived-incomplete-max-output-tokens.json'),
      replay('openai-gpt-4o-mini-text.json'),
    );
    const { orchestrator } = harness({ model: responses({ model: 'o3' }) });
    const status = await orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'cut' });

    expect(status.state).toBe('answered');
    expect(srv.requests).toHaveLength(2);
    expect(kindsOf(srv.requests[1]!)).toEqual(['system', 'user', 'user']);
    expect(inputOf(srv.requests[1]!)[2]!.content).toMatch(
      /^\[Host note, not from the user\] Your previous reply could not be used: the output was cut off at the token limit/,
    );
    expect(status.budget.used.tokens).toBe(114 + 200 + 14);
  });

  it('re-asks a tool call written as text instead of taking it as the final answer', async () => {
    const srv = await serve(
      scenarioReply([message('<tool_call>{"name": "find_available_rooms", "arguments": {}}</tool_call>')]),
      scenarioReply([message('I could not search for rooms.')]),
    );
    const { orchestrator } = harness({ model: responses() });
    await orchestrator.run({ principal: E17, goal: BOOKING_GOAL, taskId: 'written' });
    expect(srv.requests).toHaveLength(2);
    expect(inputOf(srv.requests[1]!).at(-1)!.content).toMatch(
      /a tool call was written as text \(marker "<tool_call>"\)/,
    );
  });

  describe('when the API refuses the request', () => {
    it.each<[string, number, 'responses' | 'errors', string, string, RegExp]>([
      [
        'an unsupported parameter',
        400,
        'responses',
        'openai-temperature-unsupported.json',
        'model_request_failed',
        /400 \(bad request\): Unsupported parameter: 'temperature'/,
      ],
      ['a bad key', 401, 'errors', 'openai-invalid-api-key.json', 'model_auth_failed', /401 \[invalid_api_key\]/],
    ])('fails at once on %s (%d), the provider saying why', async (_label, status, dir, name, code, said) => {
      const srv = await serve(replayError(status, dir, name));
      const { orchestrator } = harness({ model: responses(), policy: { modelOutageMs: 60_000 } });
      const result = await orchestrator.run({ principal: E17, goal: 'say ok', taskId: `refused-${status}` });

      expect(srv.requests).toHaveLength(1);
      expect(result.state).toBe('failed');
      expect(result.outcome?.reason.code).toBe(code);
      expect(result.outcome?.reason.message).toMatch(said);
      expect(result.outcome?.reason.message).not.toContain(KEY);
      expect(result.budget.used.retries).toBe(0);
      expect(result.budget.used.tokens).toBe(0);
    });

    it('waits out a 429 for its retry-after, then for the outage, holding no token reservation', async () => {
      const limited = replayError(429, 'errors', 'openai-rate-limit.json', { 'retry-after': '0.08' });
      const srv = await serve(limited, limited);
      const policy = { modelOutageMs: 60_000, modelWakeMs: { first: 60_000, longest: 60_000 } };
      const { orchestrator } = harness({ model: responses(), limits: { retries: 1 }, policy });
      const result = await orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'rate-limited' });

      expect(srv.requests).toHaveLength(2);
      expect(srv.requests[1]!.receivedAt - srv.requests[0]!.receivedAt).toBeGreaterThanOrEqual(75);
      expect(result.state).toBe('waiting_for_model');
      expect(result.outage?.lastError).toMatch(/429 \[rate_limit_exceeded\]: Rate limit reached/);
      expect(result.budget.used.tokens).toBe(0);
    });

    it('retries a 500, then fails model_unavailable once the retries and the outage policy are spent', async () => {
      const down = replayError(500, 'errors', 'openai-server-error.json');
      const srv = await serve(down, down);
      const { orchestrator } = harness({ model: responses(), limits: { retries: 1 }, policy: { modelOutageMs: 0 } });
      const result = await orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'server-error' });

      expect(srv.requests).toHaveLength(2);
      expect(result.outcome?.reason.code).toBe('model_unavailable');
      expect(result.outcome?.reason.message).toMatch(/500: The server had an error processing your request/);
      expect(result.budget.used.tokens).toBe(0);
    });
  });
});

describe('createOpenAIResponsesModel options', () => {
  it('refuses temperature for a reasoning model when made, and sends reasoning.effort when asked', async () => {
    expect(() => createOpenAIResponsesModel({ model: 'o3', apiKey: KEY, env: {}, temperature: 0 })).toThrow(
      /o3 is a reasoning model, which refuses sampling parameters/,
    );
    expect(() => createOpenAIResponsesModel({ model: 'gpt-4o', apiKey: KEY, env: {}, reasoningEffort: 'low' })).toThrow(
      /reasoningEffort is only for reasoning models/,
    );
    const srv = await serve(replay('openai-gpt-4o-mini-text.json'), replay('openai-gpt-4o-mini-text.json'));
    const reasoning = responses({ model: 'gpt-5-mini', reasoningEffort: 'low' });
    await harness({ model: reasoning }).orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'effort' });
    expect(srv.requests[0]!.body).toMatchObject({ model: 'gpt-5-mini', reasoning: { effort: 'low' } });
    expect(srv.requests[0]!.body.temperature).toBeUndefined();
    await harness({ model: responses({ temperature: 0.2 }) }).orchestrator.run({
      principal: E17,
      goal: 'say ok',
      taskId: 't',
    });
    expect(srv.requests[1]!.body.temperature).toBe(0.2);
  });

  it('does not state parallel_tool_calls when no offered tool is strict', async () => {
    const srv = await serve(replay('openai-gpt-4o-mini-text.json'));
    await harness({ model: responses({ strictTools: false }) }).orchestrator.run({
      principal: E17,
      goal: BOOKING_GOAL,
      taskId: 'lax',
    });
    expect(srv.requests[0]!.body.parallel_tool_calls).toBeUndefined();
    expect(srv.requests[0]!.body.tools.every((t: { strict: boolean }) => t.strict === false)).toBe(true);
  });

  it.each([
    ['o3', true],
    ['o4-mini', true],
    ['gpt-5', true],
    ['gpt-5-mini', true],
    ['gpt-5-chat-latest', false],
    ['gpt-4.1', false],
    ['gpt-4o-mini', false],
  ])('takes %s as a reasoning model: %s', (model, expected) => {
    expect(isReasoningModel(model)).toBe(expected);
  });

  it('is not the Chat Completions adapter: its name says which API it speaks', () => {
    expect(createOpenAIResponsesModel({ model: 'gpt-4o', apiKey: KEY, env: {} }).name).toBe('openai-responses:gpt-4o');
    expect(createOpenAIModel({ model: 'gpt-4o', apiKey: KEY, env: {} }).name).toBe('openai:gpt-4o');
  });
});

describe('toResponsesReply on recorded bodies', () => {
  const options = { fallbackUsage: { inputTokens: 16_000, outputTokens: 1_024 } };
  it('maps the o3 reasoning-then-call response to one call, with usage and the model version', () => {
    expect(toResponsesReply(recorded('openai-o3-reasoning-then-call.json'), options)).toEqual({
      type: 'tool_calls',
      calls: [
        {
          callId: 'call_2mhz5FtwkZnzXQkTOMtYZpZH',
          name: 'semantic_scholar_search',
          arguments: '{"query":"machine learning","limit":10,"offset":0,"year":0}',
        },
      ],
      text: null,
      usage: { inputTokens: 114, outputTokens: 88 },
      modelVersion: 'o3-2025-04-16',
    });
  });

  it('maps a text answer, and charges the reservation when no usage is reported', () => {
    const text = recorded('openai-gpt-4o-mini-text.json');
    expect(toResponsesReply(text, options)).toMatchObject({
      type: 'answer',
      text: 'OK',
      modelVersion: 'gpt-4o-mini-2024-07-18',
    });
    const { usage: _usage, ...noUsage } = text;
    expect(toResponsesReply(noUsage, options).usage).toEqual({ inputTokens: 16_000, outputTokens: 1_024 });
  });

  it('refuses output items it did not offer (a hosted tool call) as unusable', () => {
    const body = {
      ...recorded('openai-gpt-4o-mini-text.json'),
      output: [{ type: 'web_search_call', id: 'ws_1', status: 'completed' }],
    };
    expect(toResponsesReply(body, options)).toMatchObject({
      type: 'invalid',
      detail: expect.stringContaining('"web_search_call"'),
    });
  });

  it('takes a failed response with a server error as a transient failure (retried), other failures as unusable', () => {
    const text = recorded('openai-gpt-4o-mini-text.json');
    const failed = (code: string) => ({ ...text, status: 'failed', output: [], error: { code, message: 'oops' } });
    expect(() => toResponsesReply(failed('server_error'), options)).toThrow(TransientModelError);
    expect(() => toResponsesReply(failed('rate_limit_exceeded'), options)).toThrow(TransientModelError);
    expect(toResponsesReply(failed('invalid_prompt'), options)).toMatchObject({
      type: 'invalid',
      detail: 'the response failed (invalid_prompt: oops)',
    });
  });
});
