/**
 * The dispatch queue's backlog as fleet metrics, on the shared Redis under a fresh BullMQ prefix: starts recorded
 * with no worker running wait in the queue (depth N, the oldest as old as the wait), a worker drains them (depth 0),
 * one read serves every caller for about a second, and a queue that cannot be read observes nothing rather than
 * throwing into the collection.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { FLEET_METRICS, otelMetrics } from '../src/otel.js';
import { dispatchClusters, refundSuccess as success } from './support/dispatchCluster.js';
import { SUPPORT, until } from './support/harness.js';
import { recordingMeter } from './support/recordingMeter.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const N = 5;

describe.skipIf(!redis)('queue metrics on BullMQ', () => {
  const { cluster, closeAll } = dispatchClusters(redis!);
  afterEach(closeAll);
  afterAll(() => redis?.stop());

  it('report the starts no worker took (depth N, the oldest as old as the wait), then 0 once a worker drained them', async () => {
    const { node } = cluster({ script: () => [] });
    const api = node('api');
    const { meter, instruments, collect } = recordingMeter();
    otelMetrics(meter, api.orchestrator);
    expect([...instruments.values()].map((i) => i.name).sort()).toEqual(Object.keys(FLEET_METRICS).sort());
    expect(await api.orchestrator.queueStats()).toEqual({
      waiting: 0,
      delayed: 0,
      prioritized: 0,
      oldestWaitingMs: null,
    });

    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'q-0' });
    const firstQueued = Date.now(); // the first job was added before this
    for (let i = 1; i < N; i += 1)
      await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: `q-${i}` });
    await sleep(1_200); // past the read's cache, and a wait to measure
    const waited = Date.now() - firstQueued;
    const backlog = await api.orchestrator.queueStats();
    expect(backlog).toMatchObject({ waiting: N, delayed: 0, prioritized: 0 });
    expect(backlog!.oldestWaitingMs).toBeGreaterThanOrEqual(waited);
    expect(backlog!.oldestWaitingMs).toBeLessThan(waited + 1_000);
    const points = await collect();
    expect(points).toMatchObject({
      'statechart_agent.queue.depth{waiting}': N,
      'statechart_agent.queue.depth{delayed}': 0,
      'statechart_agent.queue.depth{prioritized}': 0,
    });
    expect(points['statechart_agent.queue.oldest_waiting_ms']).toBeGreaterThanOrEqual(waited);

    // A worker elsewhere drains the queue: nothing waits any more.
    const worker = node('worker');
    worker.orchestrator.createWorker({ concurrency: 4 });
    await until(async () => (await worker.orchestrator.queueStats())?.waiting === 0, 15_000);
    await sleep(1_100); // the API's cached read ages out
    expect(await api.orchestrator.queueStats()).toEqual({
      waiting: 0,
      delayed: 0,
      prioritized: 0,
      oldestWaitingMs: null,
    });
    expect(await collect()).toMatchObject({
      'statechart_agent.queue.depth{waiting}': 0,
      'statechart_agent.queue.oldest_waiting_ms': 0,
    });
  });

  it('share one read for about a second, and age the oldest job per caller', async () => {
    const { node } = cluster({ script: () => [] });
    const api = node('api');
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'c-1' });
    const first = await api.orchestrator.queueStats();
    expect(first?.waiting).toBe(1);
    // A second start within the second is not seen yet: the read is reused, its age taken anew.
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'c-2' });
    await sleep(100);
    const reused = await api.orchestrator.queueStats();
    expect(reused?.waiting).toBe(1);
    expect(reused!.oldestWaitingMs!).toBeGreaterThan(first!.oldestWaitingMs!);
    await sleep(1_000);
    expect((await api.orchestrator.queueStats())?.waiting).toBe(2);
  });

  it('a queue that cannot be read observes nothing for it, and the rest as usual', async () => {
    const { node } = cluster({ script: () => [] });
    const api = node('api');
    const { meter, collect } = recordingMeter();
    otelMetrics(meter, api.orchestrator);
    await api.dispatch.close(); // its connection is gone: every read fails
    await expect(api.orchestrator.queueStats()).rejects.toThrow();
    const points = await collect();
    expect(points['statechart_agent.tasks.live']).toBe(0);
    expect(Object.keys(points).filter((name) => name.startsWith('statechart_agent.queue.'))).toEqual([]);
  });
});
