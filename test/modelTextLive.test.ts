/**
 * The model's text as it is written, from a streaming adapter to live views: `orchestrator.watchModelText` and the
 * `model_text` events of a task's event stream. The text must be redacted as the stored text is (never a secret the
 * stored text seals, even one that arrives in pieces), arrive in order, be voided when its attempt fails, and leave
 * no trace in the journals or the saves.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { E17 } from '../examples/booking/scenarios.js';
import { agentService } from '../src/http/index.js';
import { createOpenAIModel } from '../src/model/openai/openaiModel.js';
import { Privacy } from '../src/privacy/privacy.js';
import { type ModelTextEvent, textRelay } from '../src/runtime/modelText.js';
import { LIVE_TEXT_WITHHELD } from '../src/runtime/sealing.js';
import { defineTool } from '../src/tool.js';
import { z } from 'zod';
import { type FakeOpenAI, type FakeReply, type FakeStep, startFakeOpenAI } from './support/fakeOpenAI.js';
import { harness } from './support/harness.js';
import { openTaskEvents } from './support/sseClient.js';

const KEY = 'sk-test-0123456789abcdefghij';
/** An OpenAI-shaped key (the default `api-key` redactor seals it) that the model "writes" in its answer. */
const SECRET = 'sk-proj-Zq81Lm0PxWv3Rt6Yb2Nc4Hd7Kf9Js5';
const SCOPE = { taskId: 't', tenantId: 'acme', startedAt: 1_790_000_000_000 };

/**
 * The recorded gpt-4.1-nano text stream (see fixtures/wire/streams/SOURCES.md) with its content deltas replaced by
 * `pieces`: the envelope, order, finish chunk and usage chunk stay as recorded.
 */
function textStream(pieces: string[], more: Partial<Extract<FakeReply, { kind: 'sse' }>> = {}): FakeReply {
  const recorded = readFileSync(
    new URL('./fixtures/wire/streams/openai-chat-gpt-4.1-nano-text.jsonl', import.meta.url),
    'utf8',
  )
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { choices: { delta: Record<string, unknown> }[] });
  const [first, second, ...rest] = recorded;
  const tail = rest.slice(-2); // the finish chunk and the usage chunk
  const content = pieces.map((piece) => ({
    ...second,
    choices: [{ ...second!.choices[0], delta: { ...second!.choices[0]!.delta, content: piece } }],
  }));
  return { kind: 'sse', events: [first, ...content, ...tail], done: true, ...more };
}

/** Splits `text` into pieces of `size` characters, as a model streams tokens. */
const pieces = (text: string, size: number) => text.match(new RegExp(`[\\s\\S]{1,${size}}`, 'g'))!;

describe('textRelay', () => {
  const privacy = new Privacy();
  const redact = (text: string) => privacy.text(SCOPE, text);
  const relay = () => {
    const sent: { text: string; replace: boolean }[] = [];
    const r = textRelay(redact, (text, replace) => sent.push({ text, replace }));
    const shown = () => sent.reduce((all, s) => (s.replace ? s.text : all + s.text), '');
    return { r, sent, shown };
  };
  const answer = `Your key is ${SECRET} and it works.\nKeep it safe. Done`;

  it.each([1, 2, 3, 5, 8])('never shows any part of a key that arrives in pieces of %i characters', (size) => {
    const { r, sent, shown } = relay();
    for (const piece of pieces(answer, size)) {
      r.push(piece);
      // At every moment, what was shown holds no 6-character run of the key.
      for (let i = 0; i + 6 <= SECRET.length; i += 1) expect(shown()).not.toContain(SECRET.slice(i, i + 6));
    }
    r.finish();
    expect(shown()).toBe(redact(answer));
    expect(shown()).toMatch(/^Your key is \[\[sealed:api-key:/);
    expect(sent.length).toBeGreaterThan(1);
  });

  it('shows text by line and sentence ends, in order, before the turn finishes', () => {
    const { r, sent } = relay();
    for (const piece of pieces('First line\nSecond sentence. Third is 3.14 long! End', 2)) r.push(piece);
    expect(sent.map((s) => s.text)).toEqual(['First line\n', 'Second sentence. ', 'Third is 3.14 long! ']);
    r.finish();
    expect(sent.at(-1)).toEqual({ text: 'End', replace: false });
  });

  it('sends the whole text again when a later part changes the redaction of what was shown (a PEM block)', () => {
    const { r, sent, shown } = relay();
    const pem = [
      'Here it is:',
      '-----BEGIN PRIVATE KEY-----',
      'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7',
      '-----END PRIVATE KEY-----',
      'Bye',
    ].join('\n');
    for (const piece of pieces(pem, 4)) {
      r.push(piece);
      expect(shown()).not.toContain('MIIEvQIBADAN');
    }
    r.finish();
    expect(shown()).toBe(redact(pem));
    expect(sent.some((s) => s.replace)).toBe(true);
  });

  it('is needed: redacting each delta alone would have shown the key', () => {
    const naive = pieces(answer, 5).map(redact).join('');
    expect(naive).toContain(SECRET);
  });
});

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
const streaming = (stream = true) =>
  createOpenAIModel({ baseURL: server!.url, apiKey: KEY, model: 'gpt-4.1-nano', env: {}, stream });

const ANSWER = `Done. Your new key is ${SECRET} and it is active.\nStore it somewhere safe.`;

describe('orchestrator.watchModelText', () => {
  it('shows a streamed answer redacted, in order, ending as the stored answer; nothing of it is saved per token', async () => {
    await serve(textStream(pieces(ANSWER, 3)));
    const { orchestrator } = harness({ model: streaming() });
    const events: ModelTextEvent[] = [];
    const stop = orchestrator.watchModelText('live-1', (event) => events.push(event));
    let saves = 0;
    orchestrator.onSaved((summary) => {
      if (summary.taskId === 'live-1') saves += 1;
    });
    const status = await orchestrator.run({ principal: E17, goal: 'rotate my key', taskId: 'live-1' });
    stop();

    expect(status.state).toBe('answered');
    const stored = status.outcome!.answer!;
    expect(stored).not.toContain(SECRET);
    expect(events.length).toBeGreaterThan(1);
    expect(events.every((e) => e.kind === 'text' && e.turn === 1 && e.attempt === 0 && !e.replace)).toBe(true);
    const shown = events.map((e) => (e.kind === 'text' ? e.text : '')).join('');
    expect(shown).toBe(stored);
    expect(JSON.stringify(events)).not.toContain(SECRET.slice(8, 20));

    // The same task unstreamed: the same saves and the same journal, so no delta was persisted.
    await server!.close();
    await serve({ kind: 'json', body: completionOf(ANSWER) });
    const plain = harness({ model: streaming(false) });
    let plainSaves = 0;
    plain.orchestrator.onSaved((summary) => {
      if (summary.taskId === 'live-1') plainSaves += 1;
    });
    await plain.orchestrator.run({ principal: E17, goal: 'rotate my key', taskId: 'live-1' });
    expect(saves).toBe(plainSaves);
    const kinds = async (o: typeof orchestrator) => (await o.audit('live-1')).map((e) => e.kind);
    expect(await kinds(orchestrator)).toEqual(await kinds(plain.orchestrator));
    expect(JSON.stringify(await orchestrator.transcript('live-1'))).not.toContain(SECRET);
  });

  it('voids the text of an attempt whose stream broke, then shows the retry', async () => {
    await serve(textStream(pieces('Partial line one.\nPartial line two', 4), { cutAfter: 8 }), textStream(['Whole.']));
    const { orchestrator } = harness({ model: streaming() });
    const events: ModelTextEvent[] = [];
    orchestrator.watchModelText('live-2', (event) => events.push(event));
    const status = await orchestrator.run({ principal: E17, goal: 'say something', taskId: 'live-2' });

    expect(status.outcome?.answer).toBe('Whole.');
    expect(events.map((e) => `${e.kind}:${e.attempt}:${e.kind === 'text' ? e.text : ''}`)).toEqual([
      'text:0:Partial line one.\n',
      'discarded:0:',
      'text:1:Whole.',
    ]);
  });
});

describe('a streamed text that names a sensitive argument field', () => {
  it('is withheld from live views, as the audit would withhold it were it an unusable output', async () => {
    const written = 'I will pay now.\n{"card_number": "4000056655665556", "amount": 1200}\nDone.';
    await serve(textStream(pieces(written, 3)));
    const pay = defineTool({
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
    const { orchestrator } = harness({ model: streaming(), extraTools: [pay] });
    const events: ModelTextEvent[] = [];
    orchestrator.watchModelText('live-5', (event) => events.push(event));
    await orchestrator.run({ principal: E17, goal: 'pay', taskId: 'live-5' });

    expect(JSON.stringify(events)).not.toContain('4000');
    expect(events.map((e) => (e.kind === 'text' ? [e.text, e.replace] : e.kind))).toEqual([
      ['I will pay now.\n', false],
      [LIVE_TEXT_WITHHELD, true],
    ]);
  });
});

describe('a streamed turn that outlives modelTimeoutMs', () => {
  it('is aborted mid-stream, its shown text voided, and asked again', async () => {
    const srv = await serve(
      textStream(pieces('Slow line one.\nnever finished', 4), { hangAfter: 6 }),
      textStream(['Fast.']),
    );
    const { orchestrator } = harness({ model: streaming(), modelTimeoutMs: 400 });
    const events: ModelTextEvent[] = [];
    orchestrator.watchModelText('live-4', (event) => events.push(event));
    const status = await orchestrator.run({ principal: E17, goal: 'say something', taskId: 'live-4' });

    expect(status.outcome?.answer).toBe('Fast.');
    // The hung request was given up (the client closed it), not left open.
    await expect.poll(() => srv.requests[0]!.aborted).toBe(true);
    expect(events.map((e) => `${e.kind}:${e.attempt}`)).toEqual(['text:0', 'discarded:0', 'text:1']);
  });
});

describe('model_text events on the task event stream', () => {
  it('reach an SSE client while the model writes, without ids, before the turn’s journal entry', async () => {
    let connected!: () => void;
    const watching = new Promise<void>((resolve) => (connected = resolve));
    await serve(async () => {
      await watching;
      return textStream(pieces('Line one.\nLine two.\nLine three.', 5), { gapMs: 5 });
    });
    const { orchestrator } = harness({ model: streaming() });
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
    await orchestrator.start({ principal: E17, goal: 'write three lines', taskId: 'live-3' });
    const stream = openTaskEvents(origin, 'live-3', { token: 'E17' });
    await expect.poll(() => stream.events.length).toBeGreaterThan(0);
    connected();
    await stream.done;

    const text = stream.events.filter((e) => e.event === 'model_text');
    expect(text.map((e) => (e.data as { text?: string }).text)).toEqual(['Line one.\n', 'Line two.\n', 'Line three.']);
    expect(text.every((e) => e.id === null)).toBe(true);
    // The text came before the journal entry of the turn that it belongs to.
    const firstText = stream.events.indexOf(text[0]!);
    const answered = stream.events.findIndex((e) => e.event === 'stop' || e.event === 'end');
    expect(firstText).toBeLessThan(answered);
  });
});

function completionOf(content: string) {
  return {
    id: 'chatcmpl-BQadcZbvmcHdEiJlKyhlXR9mrGXaB',
    object: 'chat.completion',
    created: 1745677064,
    model: 'gpt-4.1-nano-2025-04-14',
    choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 19, completion_tokens: 10, total_tokens: 29 },
  };
}
