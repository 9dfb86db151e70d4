/**
 * Events for a task dispatched on BullMQ that meet it at an awkward moment: while it is still queued, behind a
 * malformed inbox entry, while the job that drove it is ending, in a burst beyond the inbox's limit, when their own
 * job could not be enqueued, and after the deadline they were recorded before. Each is recorded in the task's inbox
 * and applied exactly once, and its caller hears what became of it.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { EventPendingError, QueueFullError, TaskNotFoundError } from '../src/errors.js';
import { TransientModelError } from '../src/model/agentModel.js';
import { reply } from '../src/testing/index.js';
import { dispatchClusters, queueIdle, refundSuccess as success } from './support/dispatchCluster.js';
import { SUPPORT, until } from './support/harness.js';
import { useTestRedis } from './support/redis.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!redis)('events for a dispatched task', () => {
  const { cluster, closeAll } = dispatchClusters(redis!);
  afterEach(closeAll);
  afterAll(() => redis?.stop());

  it('a cancel of a queued task is recorded and applied once the task exists; the caller is not told it does not exist', async () => {
    const { node } = cluster({ queue: { replyTimeoutMs: 300 } });
    const api = node('api');
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'q-cancel' });
    const result = await api.orchestrator.cancel('q-cancel', SUPPORT, 'never mind').catch((e: unknown) => e);
    node('worker').orchestrator.createWorker({ concurrency: 2 });
    const final = await api.orchestrator.settled('q-cancel', { timeoutMs: scaled(10_000) });
    // Applied once a worker created the task; the caller was not told that the task does not exist.
    expect(final.state).toBe('cancelled');
    expect(result).not.toBeInstanceOf(TaskNotFoundError);
  });

  it("an operator's early model retry goes through the inbox, refused to the task user; a fork is queued", async () => {
    const outage = { on: true };
    const step = () => {
      if (outage.on) throw new TransientModelError('503 service unavailable');
      return reply.answer('ok');
    };
    const { node } = cluster({
      queue: { replyTimeoutMs: scaled(5_000) },
      adminScope: 'tasks:admin',
      // The model fails (every transport retry too) until the outage ends: the task waits it out.
      script: () => Array.from({ length: 20 }, () => step),
      policy: { modelOutageMs: 3_600_000, modelWakeMs: { first: 600_000, longest: 600_000 } },
    });
    const api = node('api');
    node('worker').orchestrator.createWorker({ concurrency: 2 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'say ok', taskId: 'd-retry' });
    const waiting = await api.orchestrator.settled('d-retry', { timeoutMs: scaled(10_000) });
    expect(waiting.state).toBe('waiting_for_model');
    const refused = await api.orchestrator.retryModelNow('d-retry', SUPPORT);
    expect(refused).toMatchObject({ accepted: false, code: 'operator_only' });
    outage.on = false;
    const operator = { userId: 'ops-1', tenantId: SUPPORT.tenantId, scopes: ['tasks:admin'] };
    const taken = await api.orchestrator.retryModelNow('d-retry', operator);
    expect(taken.accepted).toBe(true);
    const final = await api.orchestrator.settled('d-retry', { timeoutMs: scaled(10_000) });
    expect(final.state).toBe('answered');
    const audit = await api.orchestrator.audit('d-retry');
    expect(audit.filter((e) => e.kind === 'model_outage').at(-1)).toMatchObject({
      action: 'retrying',
      by: 'acme:ops-1',
    });
    // A fork is a start like any other: queued, created by a worker, marked as a copy.
    const copy = await api.orchestrator.fork('d-retry', operator, { step: 1, taskId: 'd-copy' });
    expect(copy.forkedFrom).toEqual({ taskId: 'd-retry', step: 1 });
    const copied = await api.orchestrator.settled('d-copy', { timeoutMs: scaled(10_000) });
    expect(copied).toMatchObject({ state: 'answered', forkedFrom: { taskId: 'd-retry', step: 1 } });
  });

  it('skips a malformed inbox entry with a reply; the worker holds neither the task nor its lease afterwards', async () => {
    const { node, prefix } = cluster({ queue: { replyTimeoutMs: 500, attempts: 3 } });
    const api = node('api');
    const worker = node('worker');
    worker.orchestrator.createWorker({ concurrency: 2 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'bad-inbox' });
    const waiting = await api.orchestrator.settled('bad-inbox', { timeoutMs: scaled(10_000) });
    await until(async () => (await worker.dispatch.depth()).active === 0);
    expect(worker.orchestrator.inFlight()).toEqual({ live: 0, leases: 0 });
    const client = new Redis(redis!.url);
    const key = `{${prefix}}:inbox:bad-inbox`;
    await client.rpush(key, 'garbage-without-seq');
    client.disconnect();
    await api.orchestrator.confirm('bad-inbox', SUPPORT, waiting.pendingConfirmation!).catch((e: unknown) => e);
    // The event's job skips the malformed entry and applies the confirmation: the task ends, and so does the job.
    await until(async () => (await api.orchestrator.status('bad-inbox')).state === 'done', 10_000).catch(() => {});
    await queueIdle(worker.dispatch);
    expect(worker.orchestrator.inFlight()).toEqual({ live: 0, leases: 0 });
  });

  it('applies an event whose job reached the process while the driving job ended', async () => {
    // A limit on the reply the test expects (scaled): the worker answers once the window below has closed.
    const { node } = cluster({ queue: { replyTimeoutMs: scaled(3_000) } });
    const api = node('api');
    const worker = node('worker');
    // Widen the window: the worker's inbox read answers 600 ms after Redis did (a slow network / busy event loop).
    const inbox = worker.store.inbox as { after: (taskId: string, seq: number) => Promise<unknown[]> };
    const original = inbox.after.bind(inbox);
    let calls = 0;
    let inWindow!: () => void;
    const windowOpen = new Promise<void>((r) => (inWindow = r));
    inbox.after = async (taskId, seq) => {
      const result = await original(taskId, seq);
      calls += 1;
      if (calls === 2) {
        // The second read of the start job: the one after the lease was given up.
        inWindow();
        await sleep(600);
      }
      return result;
    };
    worker.orchestrator.createWorker({ concurrency: 4 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'race-1' });
    await windowOpen;
    const status = await api.orchestrator.status('race-1');
    expect(status.state).toBe('waiting_for_confirmation');
    const result = await api.orchestrator
      .confirm('race-1', SUPPORT, status.pendingConfirmation!)
      .catch((e: unknown) => e);
    // Applied, the refund runs and the model answers: wait for done (the limit only reports a hang), then check.
    await until(async () => (await api.orchestrator.status('race-1')).state === 'done', 10_000).catch(() => {});
    const later = await api.orchestrator.status('race-1');
    expect(result).not.toBeInstanceOf(EventPendingError);
    expect(later.state).toBe('done');
  });

  it('applies one of an approval and a rejection recorded at once through two API processes; the other is refused', async () => {
    const { node, refunds } = cluster({ queue: { replyTimeoutMs: scaled(10_000) } });
    const apiA = node('api-a');
    const apiB = node('api-b');
    const first = node('worker-1');
    first.orchestrator.createWorker({ concurrency: 2 });
    await apiA.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'both' });
    const waiting = await apiA.orchestrator.settled('both', { timeoutMs: scaled(10_000) });
    const pending = waiting.pendingConfirmation!;
    // No worker takes jobs while both decisions are recorded: each API process checked them against the same stored
    // state (the task waiting for this confirmation), so both are recorded, in this order.
    await first.orchestrator.drain({ timeoutMs: scaled(5_000) });
    const inbox = apiA.store.inbox;
    const confirming = apiA.orchestrator.confirm('both', SUPPORT, pending);
    await until(async () => (await inbox.after('both', 0)).length === 1);
    const rejecting = apiB.orchestrator.reject('both', SUPPORT, { id: pending.id, reason: 'changed my mind' });
    await until(async () => (await inbox.after('both', 0)).length === 2);
    node('worker-2').orchestrator.createWorker({ concurrency: 2 });

    const [confirmed, rejected] = await Promise.all([confirming, rejecting]);
    expect(confirmed).toMatchObject({ accepted: true, code: null });
    expect(rejected).toMatchObject({ accepted: false, code: 'not_waiting_for_confirmation' });
    expect((await apiB.orchestrator.settled('both', { timeoutMs: scaled(10_000) })).state).toBe('done');
    expect(refunds.refunds).toHaveLength(1);
    const audit = await apiB.orchestrator.audit('both');
    expect(audit.filter((entry) => entry.kind === 'tool_started' && entry.tool === 'refund_order')).toHaveLength(1);
  });

  it('gives every caller of a burst of events its own reply; beyond the inbox limit events are refused before they are recorded', async () => {
    const { node } = cluster({ queue: { replyTimeoutMs: 20_000 } });
    const api = node('api');
    node('worker').orchestrator.createWorker({ concurrency: 4 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'burst' });
    const waiting = await api.orchestrator.settled('burst', { timeoutMs: scaled(10_000) });
    const forged = { id: waiting.pendingConfirmation!.id, argsHash: 'sha256:0000' };
    const settled = await Promise.allSettled(
      Array.from({ length: 60 }, () => api.orchestrator.confirm('burst', SUPPORT, forged)),
    );
    // Beyond the inbox's limit (the replies a task keeps) an event is refused before it is recorded.
    const refused = settled.filter((r) => r.status === 'rejected');
    for (const r of refused) expect((r as PromiseRejectedResult).reason).toBeInstanceOf(QueueFullError);
    const results = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const lost = results.filter((r) => r.code === null && /no longer kept/.test(r.message ?? ''));
    expect(results.length).toBeGreaterThanOrEqual(32);
    expect(lost).toHaveLength(0);
    for (const r of results) expect(r.accepted).toBe(false);
  });

  it('announces again an event whose job could not be recorded (recover, the sweep); the caller hears EventPendingError', async () => {
    const { node } = cluster({ queue: { replyTimeoutMs: 500 } });
    const api = node('api');
    node('worker').orchestrator.createWorker({ concurrency: 2 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'enq-fail' });
    const waiting = await api.orchestrator.settled('enq-fail', { timeoutMs: scaled(10_000) });
    // The start job has ended (its post-release read is done): the task is at rest with no job.
    await until(async () => (await api.dispatch.depth()).active === 0);
    await sleep(200);
    const original = api.dispatch.enqueue.bind(api.dispatch);
    let failOnce = true;
    api.dispatch.enqueue = async (job, options) => {
      if (job.kind === 'event' && failOnce) {
        failOnce = false;
        throw new Error('simulated: BullMQ connection reset');
      }
      return original(job, options);
    };
    const first = await api.orchestrator
      .confirm('enq-fail', SUPPORT, waiting.pendingConfirmation!)
      .catch((e: unknown) => e);
    // Recorded, not announced: the caller is told it is pending, and the sweep of old unapplied inboxes announces it.
    expect(first).toBeInstanceOf(EventPendingError);
    await sleep(600);
    await api.orchestrator.recover();
    const settled = await api.orchestrator.settled('enq-fail', { timeoutMs: scaled(5_000) }).catch((e: unknown) => e);
    expect(settled).not.toBeInstanceOf(Error);
    expect((settled as { state: string }).state).toBe('done');
  });

  it('applies a confirmation recorded before its deadline even when it is applied after it', async () => {
    const late = cluster({ queue: { replyTimeoutMs: 200 } });
    // Scaled: the confirmation must be recorded before its deadline (after a worker's close), also on a loaded machine.
    const policy = { confirmationTtlMs: scaled(1_500) };
    const api = late.node('api', { policy });
    const first = late.node('worker-1', { policy });
    const w1 = first.orchestrator.createWorker({ concurrency: 2 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'late' });
    const waiting = await api.orchestrator.settled('late', { timeoutMs: scaled(10_000) });
    await w1.close();
    const expiresAt = (waiting as unknown as { pendingConfirmation: { expiresAt: number } }).pendingConfirmation
      .expiresAt;
    await api.orchestrator.confirm('late', SUPPORT, waiting.pendingConfirmation!).catch((e: unknown) => e);
    await sleep(Math.max(0, expiresAt - Date.now()) + 300);
    late.node('worker-2', { policy }).orchestrator.createWorker({ concurrency: 2 });
    const done = await api.orchestrator.settled('late', { timeoutMs: scaled(10_000) });
    expect(done.state).toBe('done');
  });
});
