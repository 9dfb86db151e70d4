/**
 * The live model text from a real worker process: an API orchestrator in this process (RedisStore, BullMQ dispatch,
 * no worker) and a worker process (`support/dispatchWorker.ts`, `node --import tsx`) whose model streams its answer.
 * A listener in this process hears the worker's text, redacted, as it is written; a task nobody watches publishes
 * nothing (the tap on every text channel of the prefix hears nothing, and the worker counts no message).
 */
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { bullmqDispatch } from '../src/dispatch/bullmqDispatch.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import type { ModelTextEvent } from '../src/runtime/modelText.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { connectionOf } from './support/dispatchCluster.js';
import { type DispatchWorkerConfig, workloadModel, workloadTools } from './support/dispatchWorker.js';
import { useTestRedis } from './support/redis.js';
import { scaled } from './support/timeScale.js';
import { ChildPool } from './support/workers.js';

const WORKER = fileURLToPath(new URL('./support/dispatchWorker.ts', import.meta.url));
const redis = await useTestRedis();
const principal = { userId: 'u1', tenantId: 't1', scopes: [] };
const SECRET = 'sk-proj-Zq81Lm0PxWv3Rt6Yb2Nc4Hd7Kf9Js5';
const ANSWER = `Checked.\nThe key ${SECRET} is active.\nDone.`;

describe.skipIf(!redis)('live model text from a worker process', () => {
  const pool = new ChildPool();
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    await pool.killAll();
    for (const close of closers.splice(0).reverse()) await close().catch(() => {});
  });
  afterAll(() => redis?.stop());

  it(
    'reaches a listener in the API process, redacted, line by line; nothing is published for an unwatched task',
    async () => {
      const prefix = redis!.freshPrefix();
      const config: DispatchWorkerConfig = {
        redisUrl: redis!.url,
        prefix,
        queueName: `q-${prefix}`,
        concurrency: 4,
        // Scaled: a busy worker must keep its leases and job locks on a loaded machine too.
        leaseTtlMs: scaled(2_000),
        lockDurationMs: scaled(2_000),
        stalledIntervalMs: 1_000,
        streamAnswer: ANSWER,
        streamGapMs: 15,
      };
      const store = new RedisStore({ url: redis!.url, prefix });
      const dispatch = bullmqDispatch({ connection: connectionOf(redis!), queueName: config.queueName });
      const client = redis!.connect();
      const api = createOrchestrator({
        tools: workloadTools(client, prefix).tools,
        model: workloadModel(),
        store,
        dispatch,
        expirySweepMs: 0,
      });
      closers.push(async () => {
        await api.close();
        await dispatch.close();
        await store.close();
      });
      closers.push(() => redis!.deleteKeys(prefix));
      const tap: Redis = redis!.connect();
      const heard: string[] = [];
      await tap.psubscribe(`{${prefix}}:text:*`);
      tap.on('pmessage', (_p: string, channel: string, message: string) => heard.push(`${channel} ${message}`));
      closers.push(async () => tap.disconnect());

      const worker = pool.spawnTs('worker', WORKER, [JSON.stringify(config)]);
      await worker.waitFor('READY', scaled(30_000));

      // Nobody watches: the task runs, nothing is published.
      await api.start({ principal, goal: 'quiet', taskId: 'quiet' });
      expect((await api.settled('quiet', { timeoutMs: scaled(15_000) })).state).toBe('answered');
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(heard).toEqual([]);

      // Watched from this process: the worker's text arrives here as it is written.
      const seen: { at: number; event: ModelTextEvent }[] = [];
      const stop = api.watchModelText('watched', (event) => seen.push({ at: Date.now(), event }));
      await expect
        .poll(async () => ((await client.pubsub('NUMSUB', `{${prefix}}:text:watched`)) as [string, number])[1])
        .toBeGreaterThan(0);
      await api.start({ principal, goal: 'watched', taskId: 'watched' });
      const done = await api.settled('watched', { timeoutMs: scaled(15_000) });
      const settledAt = Date.now();
      expect(done.state).toBe('answered');
      await expect.poll(() => seen.length).toBeGreaterThanOrEqual(3);
      stop();
      const shown = seen.reduce(
        (all, { event: e }) => (e.kind === 'text' ? (e.replace ? e.text : all + e.text) : all),
        '',
      );
      expect(shown).toBe(done.outcome!.answer);
      expect(shown).not.toContain(SECRET);
      expect(seen.map(({ event }) => (event.kind === 'text' ? event.text : event.kind))).toEqual(
        shown.split(/(?<=\n)/),
      );
      // The first line came before the task settled: live, not replayed.
      expect(seen[0]!.at).toBeLessThan(settledAt);
      // Only the redacted events crossed Redis, on the watched task's channel.
      expect(heard.length).toBe(seen.length);
      expect(heard.every((line) => line.startsWith(`{${prefix}}:text:watched `))).toBe(true);
      expect(heard.join('\n')).not.toContain(SECRET.slice(8, 20));

      worker.signal('SIGTERM');
      const stats = JSON.parse((await worker.waitFor('STATS', scaled(20_000))).slice('STATS '.length)) as {
        live: { checks: number; published: number };
      };
      console.log(`worker process: live text counts ${JSON.stringify(stats.live)}`);
      expect(stats.live.published).toBe(seen.length);
      await worker.ended(scaled(20_000));
    },
    scaled(90_000),
  );
});
