/**
 * Catalog binding under BullMQ dispatch: the tools come from the process that takes the job, so a worker built
 * without a task's tools must not drive it (before, every call was `unknown_tool` and the task still ended done).
 * Several orchestrators on one Redis store and queue: the API with the tools, a worker without one of them, and a
 * worker with all of them. The in-process cases: catalogBinding.test.ts.
 */
import { Queue } from 'bullmq';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { bullmqDispatch, type BullmqDispatch } from '../src/dispatch/bullmqDispatch.js';
import { EventPendingError } from '../src/errors.js';
import { jobIdOf } from '../src/orchestrator/dispatch.js';
import type { Logger } from '../src/orchestrator/hooks.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { reply } from '../src/testing/scriptedModel.js';
import type { Tool } from '../src/tool.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { SUPPORT, harness, until } from './support/harness.js';
import { useTestRedis } from './support/redis.js';
import { slowRead } from './support/takeover.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();

describe.skipIf(!redis)('catalog binding under BullMQ dispatch', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
  });
  afterAll(() => redis?.stop());

  function cluster(script: () => unknown[]) {
    const prefix = redis!.freshPrefix();
    const queueName = `q-${prefix}`;
    const refunds = new RefundDesk();
    const url = new URL(redis!.url);
    const connection = { host: url.hostname, port: Number(url.port || 6379) };
    const node = (extraTools: Tool[], queue: Partial<Parameters<typeof bullmqDispatch>[0]> = {}) => {
      const warnings: Record<string, unknown>[] = [];
      const logger: Logger = { warn: (fields) => warnings.push(fields as Record<string, unknown>), error() {} };
      const store = new RedisStore({ url: redis!.url, prefix });
      const dispatch: BullmqDispatch = bullmqDispatch({
        connection,
        queueName,
        lockDurationMs: scaled(2_000),
        stalledIntervalMs: 1_000,
        retryDelayMs: 100,
        ...queue,
      });
      const h = harness({
        store,
        dispatch,
        refunds,
        extraTools,
        logger,
        script: script() as never,
        expirySweepMs: 0,
        lease: { ttlMs: scaled(1_000) },
      });
      cleanups.push(async () => {
        await h.orchestrator.close();
        await dispatch.close();
        await store.close();
      });
      return { ...h, dispatch, warnings };
    };
    const jobLogs = async (taskId: string) => {
      const queue = new Queue(queueName, { connection });
      try {
        return (await queue.getJobLogs(jobIdOf({ kind: 'start', taskId } as never))).logs;
      } finally {
        await queue.close();
      }
    };
    cleanups.push(() => redis!.deleteKeys(prefix));
    return { node, refunds, jobLogs };
  }

  it('a worker without a tool of the task never creates it: the start job waits, logged and not failed, for a worker with the tools', async () => {
    const read = slowRead({ ms: 1 });
    const { node, jobLogs } = cluster(() => [
      reply.call('slow_read', {}),
      (v: { data(tool: string): unknown }) => reply.answer(`read by ${(v.data('slow_read') as { by: string }).by}`),
    ]);
    const api = node([read.tool('api')]);
    const without = node([], { attempts: 2 });
    without.orchestrator.createWorker({ concurrency: 2 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'read', taskId: 'cat-1' });

    // Taken and put back more often than its tries allow: it waits, it does not fail.
    await until(() => without.warnings.length >= 3, 10_000);
    expect(without.warnings[0]).toMatchObject({
      taskId: 'cat-1',
      code: 'catalog_mismatch',
      tools: ['slow_read: missing'],
    });
    expect(await api.orchestrator.status('cat-1')).toMatchObject({
      state: 'running',
      stateValue: 'queued',
      revision: 0,
    });
    expect(await api.store.load('cat-1')).toBeNull();
    expect((await api.dispatch.depth()).failed).toBe(0);
    expect(read.started).toEqual([]);
    const logs = await jobLogs('cat-1');
    expect(logs.length).toBeGreaterThanOrEqual(1);
    expect(logs[0]).toContain(
      'catalog_mismatch: Task "cat-1" was started with tools this process does not have as they were (slow_read is not installed)',
    );

    node([read.tool('with')]).orchestrator.createWorker({ concurrency: 2 });
    const done = await api.orchestrator.settled('cat-1', { timeoutMs: scaled(15_000) });
    expect(done).toMatchObject({ state: 'answered', outcome: { answer: 'read by with' } });
    expect(read.started).toEqual(['with']);
  });

  it('an event for a waiting task is not applied by a worker without its tools; a worker with them applies it', async () => {
    const read = slowRead({ ms: 1 });
    const refund = { order_id: 'O-1001', amount_cents: 99_900, reason: 'per note' };
    const { node, refunds } = cluster(() => [
      reply.call('refund_order', refund),
      (v: { data(tool: string): unknown }) =>
        v.data('refund_order') ? reply.answer('refunded') : reply.answer('not refunded'),
    ]);
    const api = node([read.tool('api')], { replyTimeoutMs: 800 });
    const first = node([read.tool('first')]);
    const w1 = first.orchestrator.createWorker({ concurrency: 2 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', taskId: 'cat-2' });
    const waiting = await api.orchestrator.settled('cat-2', { timeoutMs: scaled(10_000) });
    expect(waiting.state).toBe('waiting_for_confirmation');
    await w1.close();

    const without = node([]);
    without.orchestrator.createWorker({ concurrency: 2 });
    const pending = await api.orchestrator
      .confirm('cat-2', SUPPORT, waiting.pendingConfirmation!)
      .catch((e: unknown) => e);
    expect(pending).toBeInstanceOf(EventPendingError);
    expect(without.warnings.length).toBeGreaterThanOrEqual(1);
    expect(await api.orchestrator.status('cat-2')).toMatchObject({
      state: 'waiting_for_confirmation',
      revision: waiting.revision,
    });
    expect(refunds.refunds).toEqual([]);

    node([read.tool('second')]).orchestrator.createWorker({ concurrency: 2 });
    const done = await api.orchestrator.settled('cat-2', { timeoutMs: scaled(15_000) });
    expect(done).toMatchObject({ state: 'answered', outcome: { answer: 'refunded' } });
    expect(refunds.refunds).toHaveLength(1);
  });
});
