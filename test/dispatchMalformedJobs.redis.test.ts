/**
 * Jobs in the dispatch queue that no API process wrote (a hand-edited queue, another version's payload, a bug): each
 * malformed job fails for good at once, with a message naming the job and what is wrong with it, and every other
 * task, the queue's readers (eraseUser) and the worker keep working.
 */
import { Queue } from 'bullmq';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { connectionOf, dispatchClusters } from './support/dispatchCluster.js';
import { SUPPORT, until } from './support/harness.js';
import { useTestRedis } from './support/redis.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();

describe.skipIf(!redis)('malformed dispatch jobs', () => {
  const { cluster, closeAll } = dispatchClusters(redis!);
  afterEach(closeAll);
  afterAll(() => redis?.stop());

  it('fail at once with a specific reason; other tasks run and eraseUser still reads the queue', async () => {
    const errors: { error: Error; job: unknown }[] = [];
    const { node, prefix } = cluster({ queue: { onError: (error, job) => errors.push({ error, job }) } });
    const api = node('api');
    node('worker').orchestrator.createWorker({ concurrency: 2 });
    const raw = new Queue(`q-${prefix}`, { connection: connectionOf(redis!) });
    const kept = { removeOnFail: false, attempts: 30 };
    const jobs: [string, unknown, RegExp][] = [
      ['m1', { kind: 'start', taskId: 'm-null', input: null }, /start job's input is not an object/],
      ['m2', { kind: 'start', taskId: 'm-1', input: { taskId: 'm-2' } }, /input is for task "m-2", not "m-1"/],
      ['m3', { kind: 'wake', at: 1 }, /no task id/],
      ['m4', { kind: 'event', taskId: 'm-3', seq: 'one' }, /event job's seq is not a whole number/],
      ['m5', { kind: 'later', taskId: 'm-4' }, /unknown kind "later"/],
      ['m6', 42, /not an object/],
      ['m7', { kind: 'start', taskId: 'm-5', input: { taskId: 'm-5' } }, /input has no principal/],
    ];
    try {
      for (const [id, data, _] of jobs) await raw.add('start', data as never, { jobId: id, ...kept });
      await until(async () => (await raw.getFailedCount()) === jobs.length, scaled(10_000));
      for (const [id, , reason] of jobs) {
        const job = (await raw.getJob(id))!;
        expect(job.failedReason).toMatch(/^malformed dispatch job m\d: /);
        expect(job.failedReason).toMatch(reason);
        // Failed for good on its first try: retrying cannot mend it.
        expect(job.attemptsMade).toBe(1);
      }
      expect(errors.map((e) => e.error.message).sort()).toEqual(
        jobs.map(([id]) => expect.stringContaining(`malformed dispatch job ${id}: `)),
      );

      await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', taskId: 'ok-1' });
      expect((await api.orchestrator.settled('ok-1', { timeoutMs: scaled(10_000) })).state).toBe(
        'waiting_for_confirmation',
      );
      // The failed start jobs are kept (their status says why), so eraseUser reads past them.
      const report = await api.orchestrator.eraseUser(
        { tenantId: SUPPORT.tenantId, userId: SUPPORT.userId },
        { reason: 'gdpr_erasure' },
      );
      expect(report.erased.map((t) => t.taskId)).toContain('ok-1');
    } finally {
      await raw.close();
    }
  });
});
