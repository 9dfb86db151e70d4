/**
 * Several orchestrators on one Redis and one BullMQ queue, in one test process: an API instance that only records
 * work and workers that drive tasks, each with its own store and queue connection, all under one fresh prefix. The
 * refund scenario (a 999.00 refund that waits for confirmation) is the default script. Everything a cluster opens is
 * closed, and its keys deleted, by `closeAll()` (call it after each test).
 */
import { bullmqDispatch, type BullmqDispatch } from '../../src/dispatch/bullmqDispatch.js';
import { RedisStore } from '../../src/store/redis/redisStore.js';
import { reply } from '../../src/testing/scriptedModel.js';
import type { Tool } from '../../src/tool.js';
import { RefundDesk } from '../../examples/booking/refundService.js';
import { harness, until, type HarnessOptions } from './harness.js';
import type { TestRedis } from './redis.js';
import { scaled } from './timeScale.js';

export const REFUND_999 = { order_id: 'O-1001', amount_cents: 99_900, reason: 'per note' };
/** The refund task's success criterion: a trusted refund result. */
export const refundSuccess = { tool: 'refund_order', match: { status: 'succeeded' }, require: ['refund_id'] };
/** Proposes the 999.00 refund, then answers by whether it ran. */
export const refundScript = () => [
  reply.call('refund_order', REFUND_999),
  (v: { data(tool: string): unknown }) =>
    v.data('refund_order') ? reply.answer('refunded') : reply.answer('not refunded'),
];

export interface ClusterOptions {
  queue?: Partial<Parameters<typeof bullmqDispatch>[0]>;
  script?: () => unknown[];
  refunds?: RefundDesk;
  policy?: HarnessOptions['policy'];
  /** The orchestrator's adminScope (operators); default none. */
  adminScope?: string;
}

export interface NodeOptions {
  tools?: Tool[];
  capacity?: HarnessOptions['capacity'];
  policy?: HarnessOptions['policy'];
}

/** Makes clusters on `redis` (read only once a cluster is made, so a skipped suite may call it with null); `closeAll()` closes every node of every cluster made since, newest first. */
export function dispatchClusters(redis: TestRedis) {
  const cleanups: (() => Promise<unknown>)[] = [];

  /** A store, a queue and a harness per role (`node(role)`), all on one fresh prefix. */
  function cluster(options: ClusterOptions = {}) {
    const prefix = redis.freshPrefix();
    const refunds = options.refunds ?? new RefundDesk();
    const connection = connectionOf(redis);
    const node = (role: string, extra: NodeOptions = {}) => {
      const store = new RedisStore({ url: redis.url, prefix });
      const dispatch: BullmqDispatch = bullmqDispatch({
        connection,
        queueName: `q-${prefix}`,
        // Scaled, as the lease below: a live worker must keep its job lock and its leases on a loaded machine too.
        lockDurationMs: scaled(2_000),
        stalledIntervalMs: 1_000,
        retryDelayMs: 100,
        ...options.queue,
      });
      const h = harness({
        store,
        dispatch,
        refunds,
        extraTools: extra.tools ?? [],
        capacity: extra.capacity,
        policy: extra.policy ?? options.policy,
        script: (options.script ?? refundScript)() as never,
        expirySweepMs: 0,
        lease: { ttlMs: scaled(1_000) },
        ...(options.adminScope ? { adminScope: options.adminScope } : {}),
      });
      cleanups.push(async () => {
        await h.orchestrator.close();
        await dispatch.close();
        await store.close();
      });
      return { ...h, dispatch, store, role };
    };
    cleanups.push(() => redis.deleteKeys(prefix));
    return { node, refunds, prefix };
  }

  async function closeAll(): Promise<void> {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
  }

  return { cluster, closeAll };
}

/** BullMQ's connection options for the test Redis. */
export function connectionOf(redis: TestRedis): { host: string; port: number } {
  const url = new URL(redis.url);
  return { host: url.hostname, port: Number(url.port || 6379) };
}

/** Waits until no job of the queue waits or runs (delayed ones, such as a wake-up at a deadline, may be left). */
export const queueIdle = (dispatch: BullmqDispatch) =>
  until(async () => {
    const depth = await dispatch.depth();
    return depth.waiting + depth.active === 0;
  }, 10_000);
