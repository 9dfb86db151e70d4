/**
 * `TaskStore.changes` on Redis, and on a MemoryStore shared by two orchestrators. On a redis-server of its own (its
 * subscriber connections are killed, which a shared server's other clients must not see): a watch in one store
 * hears the saves another store makes, with the journal lengths each committed; once its subscriber connection is
 * killed the watch stops being live (its caller polls), and when the connection is back it is live again and a
 * `resync` says to read what may have been missed. `RedisStore.liveMessages` (the live model text between processes)
 * on the same kind of server: the mark of a watched task, its refresh and expiry, no echo, and listening again after
 * the subscriber connection broke.
 */
import { spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import type { TaskChange } from '../src/store/taskStore.js';
import { E17, until } from './support/harness.js';
import { pacedModel, pacedRead } from './support/livePaced.js';
import { type RedisServer, startRedisServer } from './support/redis.js';

const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;

describe.skipIf(!hasRedisServer && process.env.CI !== 'true')('RedisStore.changes', () => {
  let server: RedisServer | null = null;
  const closers: (() => Promise<unknown> | void)[] = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    await server?.stop();
  });

  it('announces every save to a watch in another store, and resyncs after its connection broke', async () => {
    server = await startRedisServer();
    const driver = new RedisStore({ url: server.url, prefix: 'changes' });
    const viewer = new RedisStore({ url: server.url, prefix: 'changes' });
    const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    const read = pacedRead();
    const orchestrator = createOrchestrator({
      tools: [read.tool],
      model: pacedModel(3),
      store: driver,
      expirySweepMs: 0,
      orphanSweepMs: 0,
    });
    closers.push(
      () => admin.quit(),
      () => driver.close(),
      () => viewer.close(),
      () => orchestrator.close(),
    );

    const changes: TaskChange[] = [];
    const watch = viewer.changes.watch('t1', (change) => changes.push(change));
    await until(() => watch.live);
    await until(() => changes.some((c) => c.kind === 'resync'));
    await orchestrator.start({ principal: E17, goal: 'read step by step', taskId: 't1' });
    read.step();
    await until(() => changes.filter((c) => c.kind === 'saved').length >= 2);
    const saved = changes.flatMap((c) => (c.kind === 'saved' ? [c] : []));
    // One word per save, in order, with the lengths that save committed.
    expect(saved.map((c) => c.revision)).toEqual(saved.map((_, i) => i + 1));
    for (let i = 1; i < saved.length; i++) expect(saved[i]!.audit).toBeGreaterThan(saved[i - 1]!.audit);
    const audit = await orchestrator.audit('t1');
    await until(() => {
      const last = changes.at(-1);
      return last?.kind === 'saved' && last.audit === audit.length;
    });

    // The subscriber's connection breaks: not live until it is back, then a resync.
    const before = changes.length;
    await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await until(() => !watch.live, 2_000);
    await until(() => watch.live, 5_000);
    await until(() => changes.slice(before).some((c) => c.kind === 'resync'), 2_000);
    // And the words flow again.
    read.step();
    await until(() => changes.slice(before).some((c) => c.kind === 'saved'), 5_000);

    watch.stop();
    expect(watch.live).toBe(false);
    const after = changes.length;
    read.step();
    await until(async () => (await orchestrator.status('t1')).state === 'answered', 5_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(changes.length).toBe(after);
  });
});

describe.skipIf(!hasRedisServer && process.env.CI !== 'true')('RedisStore.liveMessages', () => {
  let server: RedisServer | null = null;
  const closers: (() => Promise<unknown> | void)[] = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    await server?.stop();
  });

  it('marks a watched task, carries messages to other processes only, and listens again after a break', async () => {
    server = await startRedisServer();
    const timings = { markTtlMs: 1_500, checkMs: 20 };
    const driver = new RedisStore({ url: server.url, prefix: 'live', liveMessages: timings });
    const viewer = new RedisStore({ url: server.url, prefix: 'live', liveMessages: timings });
    const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    closers.push(
      () => admin.quit(),
      () => driver.close(),
      () => viewer.close(),
    );
    const mark = '{live}:textwatched:t1';
    const channel = '{live}:text:t1';
    const subscribers = async () => ((await admin.pubsub('NUMSUB', channel)) as [string, number])[1];

    // Nobody watches: the driver's check says so, and nothing is marked.
    driver.liveMessages.wanted('t1');
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(driver.liveMessages.wanted('t1')).toBe(false);
    expect(await admin.exists(mark)).toBe(0);

    const heard: unknown[] = [];
    const ownEcho: unknown[] = [];
    const stop = viewer.liveMessages.watch('t1', (message) => heard.push(message));
    // A process that both watches and publishes does not hear itself.
    const stopEcho = driver.liveMessages.watch('t1', (message) => ownEcho.push(message));
    await until(async () => (await subscribers()) === 2);
    const ttl = await admin.pttl(mark);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1_500);
    await until(() => driver.liveMessages.wanted('t1'), 2_000);
    driver.liveMessages.publish('t1', { n: 1 });
    await until(() => heard.length === 1);
    expect(heard).toEqual([{ n: 1 }]);
    // Refreshed while watched: still there after more than its TTL.
    await new Promise((resolve) => setTimeout(resolve, 1_700));
    expect(await admin.exists(mark)).toBe(1);

    // The subscriber connections break; once back, the channel is listened to again.
    await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await until(async () => (await subscribers()) === 2, 5_000);
    driver.liveMessages.publish('t1', { n: 2 });
    await until(() => heard.length === 2, 2_000);
    expect(ownEcho).toEqual([]);

    // Nobody watches any more: no subscriber, and the mark expires (it is not deleted: another process may watch).
    stop();
    stopEcho();
    await until(async () => (await subscribers()) === 0, 2_000);
    await until(async () => (await admin.exists(mark)) === 0, 3_000);
    await until(() => !driver.liveMessages.wanted('t1'), 2_000);
  });
});

describe('MemoryStore.changes', () => {
  it('tells a second orchestrator on the same store about the saves of the first', async () => {
    const store = new MemoryStore();
    const read = pacedRead();
    const driver = createOrchestrator({ tools: [read.tool], model: pacedModel(1), store, expirySweepMs: 0 });
    const viewer = createOrchestrator({ tools: [pacedRead().tool], model: pacedModel(1), store, expirySweepMs: 0 });
    const changes: TaskChange[] = [];
    const watch = viewer.watchTask('m1', (change) => changes.push(change));
    expect(watch.live).toBe(true);
    await driver.start({ principal: E17, goal: 'read once', taskId: 'm1' });
    read.step();
    await until(async () => (await driver.status('m1')).state === 'answered');
    const length = (await viewer.audit('m1')).length;
    const lastAudit = () => {
      const last = changes.at(-1);
      return last?.kind === 'saved' ? last.audit : -1;
    };
    await until(() => lastAudit() === length);
    expect(changes.every((c) => c.kind === 'saved')).toBe(true);
    watch.stop();
    await driver.close();
    await viewer.close();
  });
});
