/**
 * The tool calls a model is writing, for live views that ask for them (`watchModelText(..., { calls: true })`, the
 * `model_call` events of a task's event stream): each adapter's stream reader reports a call's id, name and argument
 * fragments as they arrive (the recorded streams of test/fixtures/wire/streams), and the runtime shows them as
 * unvetted proposals: redacted by the same boundary rule as text, withheld whole for a tool with sensitive fields,
 * voided with their attempt, never persisted, and never seen by a listener that did not ask. The chart still gets
 * one `model.*` event per turn, from the whole reply.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { MockLanguageModelV3 } from 'ai/test';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { E17 } from '../examples/booking/scenarios.js';
import { agentService } from '../src/http/index.js';
import { PROPOSED_LABEL } from '../src/http/sse.js';
import type { CallTextDelta, ModelRequest } from '../src/model/agentModel.js';
import { createAiSdkModel } from '../src/model/aisdk/aiSdkModel.js';
import { createOpenAIModel } from '../src/model/openai/openaiModel.js';
import { createOpenAIResponsesModel } from '../src/model/openai/responsesModel.js';
import { Privacy } from '../src/privacy/privacy.js';
import { ARGUMENTS_BOUNDARY, type ModelTextEvent, textRelay } from '../src/runtime/modelText.js';
import { LIVE_ARGUMENTS_WITHHELD } from '../src/runtime/sealing.js';
import { defineTool } from '../src/tool.js';
import { type FakeOpenAI, type FakeReply, type FakeStep, startFakeOpenAI } from './support/fakeOpenAI.js';
import { harness } from './support/harness.js';
import { openTaskEvents } from './support/sseClient.js';

const KEY = 'sk-test-0123456789abcdefghij';
const SECRET = 'sk-proj-Zq81Lm0PxWv3Rt6Yb2Nc4Hd7Kf9Js5';

const events = (name: string): Record<string, any>[] =>
  readFileSync(new URL(`./fixtures/wire/streams/${name}.jsonl`, import.meta.url), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, any>);

let server: FakeOpenAI | undefined;
let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
  await server?.close();
  server = undefined;
});
async function serve(...steps: FakeStep[]) {
  server = await startFakeOpenAI(steps);
  return server;
}
const chat = () =>
  createOpenAIModel({ baseURL: server!.url, apiKey: KEY, model: 'gpt-4.1-nano', env: {}, stream: true });
const responses = () =>
  createOpenAIResponsesModel({ baseURL: server!.url, apiKey: KEY, model: 'gpt-5.1', env: {}, stream: true });
const sse = (name: string, more: Partial<Extract<FakeReply, { kind: 'sse' }>> = {}): FakeReply => ({
  kind: 'sse',
  events: events(name),
  done: !name.startsWith('openai-responses'),
  ...more,
});

/** One turn's request collecting what reaches `onText` and `onCallText`. */
function turn() {
  const text: string[] = [];
  const calls: CallTextDelta[] = [];
  const request: ModelRequest = {
    taskId: 't',
    turn: 1,
    goal: 'weather',
    principal: { userId: 'E17', tenantId: 'acme' },
    tools: [],
    observations: [],
    transcript: async () => [{ kind: 'goal', at: 0, text: 'weather' }],
    signal: new AbortController().signal,
    onText: (delta) => text.push(delta),
    onCallText: (delta) => calls.push(delta),
  };
  /** Each call's pieces joined, by index. */
  const joined = () =>
    calls.reduce<Record<number, string>>((all, d) => ({ ...all, [d.index]: (all[d.index] ?? '') + d.arguments }), {});
  return { request, text, calls, joined };
}

describe('the stream readers report a call as it is written', () => {
  it('Chat Completions (gpt-4.1-nano): id and name first, then each recorded argument fragment, in order', async () => {
    await serve(sse('openai-chat-gpt-4.1-nano-tool-call'));
    const { request, text, calls, joined } = turn();
    const reply = await chat().decide(request);
    const fragments = events('openai-chat-gpt-4.1-nano-tool-call').flatMap((c) =>
      (c.choices[0]?.delta?.tool_calls ?? []).map((t: any) => t.function.arguments as string),
    );
    expect(calls.map((d) => d.arguments)).toEqual(fragments);
    expect(calls.every((d) => d.index === 0 && d.name === 'get_weather')).toBe(true);
    expect(calls.every((d) => d.callId === 'call_PieqNSej6kM9hgYbcQdbZSaC')).toBe(true);
    expect(joined()).toEqual({ 0: '{"location": "Tokyo"}' });
    // The whole reply is unchanged; no argument is text.
    expect(reply).toMatchObject({ type: 'tool_calls', calls: [{ arguments: '{"location": "Tokyo"}' }] });
    expect(text).toEqual([]);
  });

  it('Chat Completions, two parallel calls each whole in one chunk (Ollama): by their index', async () => {
    await serve(sse('ollama-qwen2.5-coder-parallel-tool-calls', { done: true }));
    const { request, calls, joined } = turn();
    const reply = await chat().decide(request);
    expect(reply.type).toBe('tool_calls');
    const whole = (reply as Extract<typeof reply, { type: 'tool_calls' }>).calls;
    expect(new Set(calls.map((d) => d.index))).toEqual(new Set([0, 1]));
    expect(joined()).toEqual({ 0: whole[0]!.arguments, 1: whole[1]!.arguments });
    expect(calls.every((d) => d.name === 'run_command')).toBe(true);
  });

  it('Chat Completions, a call opened with empty arguments then 6 fragments (llama.cpp)', async () => {
    await serve(sse('llamacpp-qwen3coder-tool-call', { done: true }));
    const { request, calls, joined } = turn();
    await chat().decide(request);
    expect(calls[0]).toEqual({ index: 0, callId: 'v2dh...', name: 'run_command', arguments: '' });
    expect(joined()).toEqual({ 0: '{"command":"pwd"}' });
  });

  it('Responses (gpt-5.1): the function_call item as added, then its argument deltas by item id', async () => {
    await serve(sse('openai-responses-gpt-5.1-tool-call'));
    const { request, text, calls, joined } = turn();
    const reply = await responses().decide(request);
    expect(calls[0]).toEqual({ index: 0, callId: 'call_2FQdm3Br7Qb35YUBSkDR7kue', name: 'get_weather', arguments: '' });
    const deltas = events('openai-responses-gpt-5.1-tool-call')
      .filter((e) => e.type === 'response.function_call_arguments.delta')
      .map((e) => e.delta as string);
    expect(calls.slice(1).map((d) => d.arguments)).toEqual(deltas);
    expect(joined()).toEqual({ 0: '{"city":"Beijing"}' });
    expect(reply).toMatchObject({ type: 'tool_calls', calls: [{ arguments: '{"city":"Beijing"}' }] });
    expect(text).toEqual([]);
  });

  it('AI SDK: tool-input-start, then tool-input-delta parts', async () => {
    const id = 'call_PieqNSej6kM9hgYbcQdbZSaC';
    const fragments = ['{"lo', 'catio', 'n": "T', 'okyo', '"}'];
    const parts = [
      { type: 'stream-start', warnings: [] },
      { type: 'response-metadata', id: 'chatcmpl-1', modelId: 'gpt-4.1-nano-2025-04-14' },
      { type: 'tool-input-start', id, toolName: 'get_weather' },
      ...fragments.map((delta) => ({ type: 'tool-input-delta', id, delta })),
      { type: 'tool-input-end', id },
      { type: 'tool-call', toolCallId: id, toolName: 'get_weather', input: '{"location": "Tokyo"}' },
      {
        type: 'finish',
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage: {
          inputTokens: { total: 67, noCache: 67, cacheRead: undefined, cacheWrite: undefined },
          outputTokens: { total: 31, text: 31, reasoning: undefined },
        },
      },
    ];
    const model = new MockLanguageModelV3({
      provider: 'mock',
      modelId: 'gpt-4.1-nano',
      doStream: async () => ({
        stream: new ReadableStream({
          start(controller) {
            for (const part of parts) controller.enqueue(part);
            controller.close();
          },
        }) as never,
      }),
    });
    const { request, text, calls, joined } = turn();
    const reply = await createAiSdkModel({ model, stream: true }).decide({
      ...request,
      tools: [
        {
          name: 'get_weather',
          description: 'weather',
          effect: 'read',
          parameters: { type: 'object', properties: { location: { type: 'string' } }, additionalProperties: false },
        },
      ],
    });
    expect(calls[0]).toEqual({ index: 0, callId: id, name: 'get_weather', arguments: '' });
    expect(calls.slice(1).map((d) => d.arguments)).toEqual(fragments);
    expect(joined()).toEqual({ 0: '{"location": "Tokyo"}' });
    expect(reply).toMatchObject({ type: 'tool_calls', calls: [{ name: 'get_weather' }] });
    expect(text).toEqual([]);
  });
});

describe('the arguments relay', () => {
  const privacy = new Privacy();
  const scope = { taskId: 't', tenantId: 'acme', startedAt: 1_790_000_000_000 };
  it.each([1, 2, 3, 5, 8])('never shows a part of a key in arguments that arrive in pieces of %i', (size) => {
    const args = `{"note": "use ${SECRET} now", "room": "R7"}`;
    let shown = '';
    const relay = textRelay(
      (text) => privacy.text(scope, text),
      (text, replace) => (shown = replace ? text : shown + text),
      () => true,
      ARGUMENTS_BOUNDARY,
    );
    for (const piece of args.match(new RegExp(`[\\s\\S]{1,${size}}`, 'g'))!) {
      relay.push(piece);
      for (let i = 0; i + 6 <= SECRET.length; i += 1) expect(shown).not.toContain(SECRET.slice(i, i + 6));
    }
    relay.finish();
    expect(shown).toBe(privacy.text(scope, args));
  });
  it('shows arguments at the end of each JSON string, not only at line ends', () => {
    const sent: string[] = [];
    const relay = textRelay(
      (text) => text,
      (text) => sent.push(text),
      () => true,
      ARGUMENTS_BOUNDARY,
    );
    for (const piece of ['{"ci', 'ty":"Be', 'ijing","da', 'y":"mon', '"}']) relay.push(piece);
    expect(sent).toEqual(['{"city":', '"Beijing",', '"day":', '"mon"}']);
  });
});

/** The recorded Chat Completions tool-call stream with its call renamed and its argument fragments replaced. */
function callStream(name: string, fragments: string[], more: Partial<Extract<FakeReply, { kind: 'sse' }>> = {}) {
  const recorded = events('openai-chat-gpt-4.1-nano-tool-call');
  const opening = recorded.findIndex((c) => c.choices[0]?.delta?.tool_calls?.[0]?.id);
  const open = structuredClone(recorded[opening]!);
  open.choices[0].delta.tool_calls[0].function.name = name;
  const fragment = recorded[opening + 1]!;
  const pieces = fragments.map((args) => {
    const chunk = structuredClone(fragment);
    chunk.choices[0].delta.tool_calls[0].function.arguments = args;
    return chunk;
  });
  const tail = recorded.slice(-2); // the finish chunk and the usage chunk
  return {
    kind: 'sse' as const,
    events: [...recorded.slice(0, opening), open, ...pieces, ...tail],
    done: true,
    ...more,
  };
}
const answer = (text: string): FakeReply => {
  const recorded = events('openai-chat-gpt-4.1-nano-text');
  const [first, second] = recorded;
  const content = { ...second, choices: [{ ...second!.choices[0], delta: { content: text } }] };
  return { kind: 'sse', events: [first, content, ...recorded.slice(-2)], done: true };
};
const split = (text: string, size: number) => text.match(new RegExp(`[\\s\\S]{1,${size}}`, 'g'))!;
const calls = (events: ModelTextEvent[]) => events.filter((e) => e.kind === 'call');
const shownArgs = (events: ModelTextEvent[], attempt = 0) =>
  calls(events)
    .filter((e) => e.attempt === attempt)
    .reduce((all, e) => (e.replace ? e.text : all + e.text), '');

describe('orchestrator.watchModelText with calls', () => {
  const ARGS = `{"order_id": "O-1001", "note": "key ${SECRET} here"}`;

  it('shows a call being written, redacted and labelled, only to listeners that asked; nothing of it is saved', async () => {
    await serve(callStream('get_order', split(ARGS, 4)), answer('Done.'));
    const { orchestrator } = harness({ model: chat() });
    const withCalls: ModelTextEvent[] = [];
    const textOnly: ModelTextEvent[] = [];
    orchestrator.watchModelText('call-1', (e) => withCalls.push(e), { calls: true });
    orchestrator.watchModelText('call-1', (e) => textOnly.push(e));
    await orchestrator.run({ principal: E17, goal: 'look at my order', taskId: 'call-1' });
    expect(calls(textOnly)).toEqual([]);
    const proposed = calls(withCalls);
    expect(proposed.length).toBeGreaterThan(2);
    expect(proposed.every((e) => e.kind === 'call' && e.proposed && e.name === 'get_order' && e.index === 0)).toBe(
      true,
    );
    expect(JSON.stringify(withCalls)).not.toContain(SECRET.slice(8, 20));
    // What was shown ends as the arguments the chart got (sealed the same way).
    const audit = await orchestrator.audit('call-1');
    const stored = JSON.stringify(audit);
    expect(stored).not.toContain(SECRET);
    expect(shownArgs(withCalls)).toMatch(/^\{"order_id": "O-1001", "note": "key \[\[sealed:api-key:/);
    // The journal holds no trace of the deltas: one proposal, from the whole reply.
    expect(audit.filter((e) => JSON.stringify(e).includes('get_order')).length).toBeGreaterThan(0);
    expect(stored).not.toContain('proposed');
  });

  it('withholds the arguments of a tool that takes sensitive values', async () => {
    const card = defineTool({
      name: 'read_card',
      description: 'Reads a card. Read-only.',
      effect: 'read',
      scopes: [],
      input: z.strictObject({ card_number: z.string() }),
      output: z.strictObject({ ok: z.boolean() }),
      sensitive: { args: ['card_number'] },
      timeoutMs: 1_000,
      async execute() {
        return { ok: true, value: { ok: true } };
      },
    });
    await serve(callStream('read_card', split('{"card_number": "4000056655665556"}', 3)), answer('Done.'));
    const { orchestrator } = harness({ model: chat(), extraTools: [card] });
    const seen: ModelTextEvent[] = [];
    orchestrator.watchModelText('call-2', (e) => seen.push(e), { calls: true });
    await orchestrator.run({ principal: E17, goal: 'check my card', taskId: 'call-2' });
    expect(JSON.stringify(seen)).not.toContain('4000');
    expect(shownArgs(seen)).toBe(LIVE_ARGUMENTS_WITHHELD);
  });

  it('voids a call whose stream was cut mid-way; the retry is shown and the chart gets one proposal', async () => {
    await serve(
      callStream('get_order', split('{"order_id": "O-1001", "reason": "late"}', 5), { cutAfter: 6 }),
      callStream('get_order', ['{"order_id": "O-1001"}']),
      answer('Done.'),
    );
    const { orchestrator } = harness({ model: chat() });
    const seen: ModelTextEvent[] = [];
    orchestrator.watchModelText('call-3', (e) => seen.push(e), { calls: true });
    await orchestrator.run({ principal: E17, goal: 'look at my order', taskId: 'call-3' });
    const order = seen.map((e) => `${e.kind}:${e.attempt}`);
    expect(order).toContain('discarded:0');
    expect(order.indexOf('discarded:0')).toBeGreaterThan(order.indexOf('call:0'));
    expect(shownArgs(seen, 1)).toBe('{"order_id": "O-1001"}');
    // One model output per turn (the call, then the answer): the cut attempt left none.
    const outputs = (await orchestrator.audit('call-3')).filter((e) => e.kind === 'model_output');
    expect(outputs.length).toBe(2);
    expect(outputs[0]).toMatchObject({ output: 'model.toolsProposed', calls: 1 });
    expect(server!.requests.length).toBe(3);
  });
});

describe('model_call events on the task event stream', () => {
  it('reach the owner, labelled as proposed and not yet checked, without ids', async () => {
    let connected!: () => void;
    const watching = new Promise<void>((resolve) => (connected = resolve));
    await serve(async () => {
      await watching;
      return callStream('get_order', split('{"order_id": "O-1001"}', 4), { gapMs: 5 });
    }, answer('Done.'));
    const { orchestrator } = harness({ model: chat() });
    app = Fastify();
    await agentService(app, {
      orchestrator,
      authenticate: (request) => (request.headers.authorization === 'Bearer E17' ? E17 : null),
      startRequest: () => {
        throw new Error('not used');
      },
      pages: false,
    });
    const origin = await app.listen({ port: 0, host: '127.0.0.1' });
    await orchestrator.start({ principal: E17, goal: 'look at my order', taskId: 'call-4' });
    const stream = openTaskEvents(origin, 'call-4', { token: 'E17' });
    await expect.poll(() => stream.events.length).toBeGreaterThan(0);
    connected();
    await stream.done;
    const proposed = stream.events.filter((e) => e.event === 'model_call');
    expect(proposed.length).toBeGreaterThan(0);
    expect(proposed.every((e) => e.id === null)).toBe(true);
    expect(proposed.every((e) => (e.data as { label?: string }).label === PROPOSED_LABEL)).toBe(true);
    expect(proposed.map((e) => (e.data as { text: string }).text).join('')).toBe('{"order_id": "O-1001"}');
  });
});
