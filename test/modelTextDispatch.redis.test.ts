/**
 * The live model text across processes: with dispatch (BullMQ), a worker drives the model, and the API process,
 * which serves the event streams, hears the text through Redis pub/sub (`RedisStore.liveMessages`). An API node and
 * a worker node, each with its own store, queue connection and subscriber, as two processes would have. Only the
 * redacted events are published, only while some process watches (its mark), and nothing of it is persisted.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { E17 } from '../examples/booking/scenarios.js';
import { bullmqDispatch } from '../src/dispatch/bullmqDispatch.js';
import { agentService } from '../src/http/index.js';
import type { AgentModel, ModelReply } from '../src/model/agentModel.js';
import type { ModelTextEvent } from '../src/runtime/modelText.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { connectionOf } from './support/dispatchCluster.js';
import { harness } from './support/harness.js';
import { useTestRedis } from './support/redis.js';
import { openTaskEvents } from './support/sseClient.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();

/** An OpenAI-shaped key (the default `api-key` redactor seals it), written by the model in its answer. */
const SECRET = 'sk-proj-Zq81Lm0PxWv3Rt6Yb2Nc4Hd7Kf9Js5';
const ANSWER = `First line.\nYour key is ${SECRET} and it works.\nLast line.`;

/** A streaming model without a server: writes `text` in pieces of 4, `gapMs` apart, then answers it whole. */
function typingModel(text: string, gapMs = 15, gate?: Promise<void>): AgentModel & { turns: number } {
  const model = {
    name: 'typing',
    reservation: { tokens: 1_000, costMicros: 0 },
    turns: 0,
    async decide(request: Parameters<AgentModel['decide']>[0]): Promise<ModelReply> {
      model.turns += 1;
      await gate;
      for (const piece of text.match(/[\s\S]{1,4}/g)!) {
        await new Promise((resolve) => setTimeout(resolve, gapMs));
        request.onText?.(piece);
      }
      return { type: 'answer', text, usage: { inputTokens: 10, outputTokens: 10 } };
    },
  };
  return model;
}

describe.skipIf(!redis)('live model text across processes (dispatch)', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
  });
  afterAll(() => redis?.stop());

  /** An API node (no worker) and a worker node on one fresh prefix and queue; a raw client that hears every text channel. */
  async function deployment(options: { gate?: Promise<void>; checkMs?: number; model?: AgentModel } = {}) {
    const prefix = redis!.freshPrefix();
    const node = (model: AgentModel) => {
      const store = new RedisStore({ url: redis!.url, prefix, liveMessages: { checkMs: options.checkMs } });
      const dispatch = bullmqDispatch({
        connection: connectionOf(redis!),
        queueName: `q-${prefix}`,
        lockDurationMs: scaled(2_000),
        stalledIntervalMs: 1_000,
      });
      const h = harness({ store, dispatch, model, expirySweepMs: 0, lease: { ttlMs: scaled(1_000) } });
      cleanups.push(async () => {
        await h.orchestrator.close();
        await dispatch.close();
        await store.close();
      });
      return { ...h, store };
    };
    const api = node(typingModel('unused'));
    const model = typingModel(ANSWER, 15, options.gate);
    const worker = node(options.model ?? model);
    // Every message published on any task's text channel of this prefix, as Redis carries it.
    const tap: Redis = redis!.connect();
    const heard: string[] = [];
    await tap.psubscribe(`{${prefix}}:text:*`);
    tap.on('pmessage', (_pattern: string, _channel: string, message: string) => heard.push(message));
    cleanups.push(async () => tap.disconnect());
    cleanups.push(() => redis!.deleteKeys(prefix));
    const probe: Redis = redis!.connect();
    const subscribed = (taskId: string) =>
      expect
        .poll(async () => ((await probe.pubsub('NUMSUB', `{${prefix}}:text:${taskId}`)) as [string, number])[1])
        .toBeGreaterThan(0);
    return { prefix, api, worker, model, heard, subscribed };
  }

  it('a listener in the API process hears the text a worker writes, redacted, in order; nothing is persisted', async () => {
    const { api, worker, heard, subscribed } = await deployment();
    const seen: ModelTextEvent[] = [];
    const stop = api.orchestrator.watchModelText('x-1', (event) => seen.push(event));
    await subscribed('x-1');
    await api.orchestrator.start({ principal: E17, goal: 'write it', taskId: 'x-1' });
    worker.orchestrator.createWorker({ concurrency: 2 });
    const done = await api.orchestrator.settled('x-1', { timeoutMs: scaled(10_000) });
    expect(done.state).toBe('answered');
    await expect.poll(() => seen.some((e) => e.kind === 'text' && e.text.includes('Last line.'))).toBe(true);
    stop();
    const stored = done.outcome!.answer!;
    expect(stored).not.toContain(SECRET);
    expect(seen.every((e) => e.kind === 'text' && e.taskId === 'x-1' && e.turn === 1 && e.attempt === 0)).toBe(true);
    const shown = seen.reduce((all, e) => (e.kind === 'text' ? (e.replace ? e.text : all + e.text) : all), '');
    expect(shown).toBe(stored);
    // Shown line by line as the worker wrote it, not all at the end.
    expect(seen.length).toBeGreaterThanOrEqual(3);
    // What crossed Redis is the redacted events, nothing else: no piece of the key, no raw delta.
    expect(heard.length).toBe(seen.length);
    expect(heard.join('')).not.toContain(SECRET.slice(8, 20));
    // Persisted state holds no partial output: the journals name the turn once, with the whole sealed answer.
    const audit = JSON.stringify(await api.orchestrator.audit('x-1'));
    expect(audit).not.toContain(SECRET);
    expect(audit).not.toContain('model_text');
  });

  it('reaches an SSE client of the API process that connects while the worker writes', async () => {
    let release!: () => void;
    // The worker checks for watchers every 50 ms (default 1 s), so that a viewer who comes mid-turn is heard at once.
    const { api, worker, model, subscribed } = await deployment({
      gate: new Promise<void>((resolve) => (release = resolve)),
      checkMs: 50,
    });
    app = Fastify();
    await agentService(app, {
      orchestrator: api.orchestrator,
      authenticate: (request) => (request.headers.authorization === 'Bearer E17' ? E17 : null),
      startRequest: () => {
        throw new Error('not used');
      },
      pages: false,
    });
    const origin = await app.listen({ port: 0, host: '127.0.0.1' });
    await api.orchestrator.start({ principal: E17, goal: 'write it', taskId: 'x-2' });
    worker.orchestrator.createWorker({ concurrency: 2 });
    // The worker asked the model (and whether anyone watched: nobody yet); then the viewer connects.
    await expect.poll(() => model.turns, { timeout: scaled(10_000) }).toBe(1);
    const stream = openTaskEvents(origin, 'x-2', { token: 'E17' });
    await subscribed('x-2');
    release();
    await stream.done;
    const text = stream.events.filter((e) => e.event === 'model_text');
    expect(text.length).toBeGreaterThanOrEqual(2);
    const shown = text.reduce((all, e) => {
      const data = e.data as { text: string; replace: boolean };
      return data.replace ? data.text : all + data.text;
    }, '');
    expect(shown).toBe((await api.orchestrator.status('x-2')).outcome!.answer);
    expect(text.every((e) => e.id === null)).toBe(true);
    // The text came before the end of the task's stream.
    expect(stream.events.indexOf(text[0]!)).toBeLessThan(stream.events.findIndex((e) => e.event === 'end'));
  });

  it('a process that both drives and watches a task sees its text once', async () => {
    const { worker, heard, subscribed } = await deployment();
    const seen: ModelTextEvent[] = [];
    worker.orchestrator.watchModelText('x-4', (event) => seen.push(event));
    await subscribed('x-4');
    await worker.orchestrator.start({ principal: E17, goal: 'write it', taskId: 'x-4' });
    worker.orchestrator.createWorker({ concurrency: 2 });
    const done = await worker.orchestrator.settled('x-4', { timeoutMs: scaled(10_000) });
    // Every piece published reaches the tap (Redis delivers in order); then a while for an echo to show up here.
    await expect.poll(() => heard.length >= seen.length && seen.length > 0).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const shown = seen.reduce((all, e) => (e.kind === 'text' ? (e.replace ? e.text : all + e.text) : all), '');
    expect(shown).toBe(done.outcome!.answer);
    // Published for the watchers of other processes (it cannot know there are none), and not heard back here.
    expect(heard.length).toBe(seen.length);
  });

  it('publishes nothing while nobody watches: one check per attempt, no message', async () => {
    const { api, worker, heard, model } = await deployment();
    await api.orchestrator.start({ principal: E17, goal: 'write it', taskId: 'x-3' });
    worker.orchestrator.createWorker({ concurrency: 2 });
    const done = await api.orchestrator.settled('x-3', { timeoutMs: scaled(10_000) });
    expect(done.state).toBe('answered');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard).toEqual([]);
    const counts = worker.store.liveMessages.counts;
    expect(counts.published).toBe(0);
    expect(model.turns).toBe(1);
    // The turn streamed for ~13 pieces x 15 ms: one check with its first piece, at most one more per second of writing.
    expect(counts.checks).toBeGreaterThanOrEqual(1);
    expect(counts.checks).toBeLessThanOrEqual(2);
    expect(api.store.liveMessages.counts.marks).toBe(0);
  });

  it('costs nothing for a model that does not stream: no check, no message', async () => {
    const { api, worker, heard } = await deployment({ model: scriptedModel([reply.answer('whole at once')]) });
    await api.orchestrator.start({ principal: E17, goal: 'answer', taskId: 'x-5' });
    worker.orchestrator.createWorker({ concurrency: 2 });
    expect((await api.orchestrator.settled('x-5', { timeoutMs: scaled(10_000) })).state).toBe('answered');
    expect(worker.store.liveMessages.counts).toMatchObject({ checks: 0, published: 0 });
    expect(heard).toEqual([]);
  });
});
