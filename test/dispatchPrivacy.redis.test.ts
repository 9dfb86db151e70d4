/**
 * Personal data with dispatch on BullMQ: erasing a task that is still queued (its start and inbox go, a tombstone
 * stays, no worker creates it), erasing a user while a worker drives one of their tasks (reported as skipped), and
 * sensitive data, which needs a keyed sealer once a worker elsewhere must open what the API sealed.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { bullmqDispatch } from '../src/dispatch/bullmqDispatch.js';
import { HostRequestError, TaskNotFoundError } from '../src/errors.js';
import { cardNumbers } from '../src/privacy/redactors.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { reply } from '../src/testing/scriptedModel.js';
import { connectionOf, dispatchClusters, queueIdle, refundSuccess as success } from './support/dispatchCluster.js';
import { SUPPORT, harness, until } from './support/harness.js';
import { useTestRedis } from './support/redis.js';
import { slowRead } from './support/takeover.js';

const redis = await useTestRedis();

describe.skipIf(!redis)('personal data with dispatch', () => {
  const { cluster, closeAll } = dispatchClusters(redis!);
  afterEach(closeAll);
  afterAll(() => redis?.stop());

  it('erasing a queued task removes its start and leaves a tombstone: no worker creates it afterwards', async () => {
    const { node, prefix } = cluster({ queue: { replyTimeoutMs: 200 } });
    const api = node('api');
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'q-erase' });
    await api.orchestrator.answer('q-erase', SUPPORT, 'my secret answer').catch(() => {});
    await api.orchestrator
      .erase('q-erase', { reason: 'gdpr_erasure', at: Date.now() } as never)
      .catch((e: unknown) => e);
    // The answer recorded in its inbox goes with it.
    const client = new Redis(redis!.url);
    expect(await client.lrange(`{${prefix}}:inbox:q-erase`, 0, -1)).toEqual([]);
    client.disconnect();
    node('worker').orchestrator.createWorker({ concurrency: 2 });
    await queueIdle(api.dispatch);
    const after = await api.orchestrator.status('q-erase').catch((e: unknown) => e);
    expect(after).toBeInstanceOf(TaskNotFoundError);
  });

  it('refuses dispatch with sensitive data and a memory sealer: a worker could not open what the API sealed', async () => {
    const store = new RedisStore({ url: redis!.url, prefix: redis!.freshPrefix() });
    const dispatch = bullmqDispatch({ connection: connectionOf(redis!), queueName: `q-${redis!.freshPrefix()}` });
    try {
      expect(() => harness({ store, dispatch, privacy: { redactors: [cardNumbers()] } })).toThrow(HostRequestError);
      expect(() => harness({ store, dispatch, privacy: { redactors: [cardNumbers()] } })).toThrow(/keyedSealer/);
    } finally {
      await dispatch.close();
      await store.close();
    }
  });

  it('accepts dispatch with only the default redactors and a memory sealer: what they seal no tool opens', async () => {
    const store = new RedisStore({ url: redis!.url, prefix: redis!.freshPrefix() });
    const dispatch = bullmqDispatch({ connection: connectionOf(redis!), queueName: `q-${redis!.freshPrefix()}` });
    try {
      const h = harness({ store, dispatch });
      expect(h.orchestrator).toBeDefined();
      await h.orchestrator.close();
    } finally {
      await dispatch.close();
      await store.close();
    }
  });

  it('eraseUser reports a task a worker drives as skipped, and erases the rest of the user’s tasks', async () => {
    const blocked = slowRead('gate');
    const { node } = cluster({ script: () => [reply.call('slow_read', {}), reply.answer('done')] });
    const api = node('api', { tools: [blocked.tool('api')] });
    const worker = node('worker', { tools: [blocked.tool('worker')] });
    // One job at a time: the worker holds busy-1 (its read waits), and queued-1 waits in the queue.
    worker.orchestrator.createWorker({ concurrency: 1 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'held', taskId: 'busy-1' });
    await until(() => blocked.started.length === 1, 10_000);
    await api.orchestrator.start({ principal: SUPPORT, goal: 'queued', taskId: 'queued-1' });
    const report = await api.orchestrator.eraseUser(
      { tenantId: SUPPORT.tenantId, userId: SUPPORT.userId },
      { reason: 'gdpr_erasure' },
    );
    blocked.release();
    expect(report.erased.map((t) => t.taskId)).toContain('queued-1');
    expect(report.erased.map((t) => t.taskId)).not.toContain('busy-1');
    expect(report.skipped.map((t) => t.taskId)).toEqual(['busy-1']);
    expect(await api.orchestrator.tombstone('queued-1')).not.toBeNull();
  });
});
