/**
 * Dispatch on BullMQ, in one test process with several orchestrators on one Redis: an API instance that only
 * records work, and workers that drive tasks. What the API gets back (queued status, replies to events, refusals
 * answered at once), events reaching a task that runs in another process, deadlines as delayed jobs, the bounded
 * recovery sweep, backpressure, and draining; starts of one id racing, and a start put back for capacity. Events
 * that meet a queued task, a racing job or a lost job are dispatchInbox.redis.test.ts's.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  EventPendingError,
  MandateUsedError,
  QueueFullError,
  TaskExistsError,
  TaskNotFoundError,
} from '../src/errors.js';
import { reply } from '../src/testing/scriptedModel.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { refundMandate } from '../tools/mandates.js';
import { dispatchClusters, refundSuccess as success } from './support/dispatchCluster.js';
import { SUPPORT, until } from './support/harness.js';
import { useTestRedis } from './support/redis.js';
import { slowRead } from './support/takeover.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();

const REFUND_50 = { order_id: 'O-1001', amount_cents: 5_000, reason: 'small' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!redis)('dispatch on BullMQ', () => {
  const { cluster, closeAll } = dispatchClusters(redis!);
  afterEach(closeAll);
  afterAll(() => redis?.stop());

  it('an API instance records the start; a worker elsewhere drives it; the confirmation goes through the inbox', async () => {
    const { node, refunds } = cluster();
    const api = node('api');
    const worker = node('worker');
    const queued = await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'd-1' });
    expect(queued).toMatchObject({ taskId: 'd-1', state: 'running', stateValue: 'queued', revision: 0 });
    // Nothing drives it until a worker runs: the API process holds nothing.
    expect(await api.orchestrator.status('d-1')).toMatchObject({ stateValue: 'queued', revision: 0 });
    worker.orchestrator.createWorker({ concurrency: 4 });
    const waiting = await api.orchestrator.settled('d-1', { timeoutMs: scaled(10_000) });
    expect(waiting.state).toBe('waiting_for_confirmation');
    expect(api.orchestrator.inFlight()).toEqual({ live: 0, leases: 0 });
    // The reply is the chart's, applied by the worker and saved with the snapshot that applied it.
    const result = await api.orchestrator.confirm('d-1', SUPPORT, waiting.pendingConfirmation!);
    expect(result).toMatchObject({ accepted: true, code: null });
    const done = await api.orchestrator.settled('d-1', { timeoutMs: scaled(10_000) });
    expect(done.state).toBe('done');
    expect(refunds.refunds.map((r) => r.amountCents)).toEqual([99_900]);
    // The job ended with the task: the worker holds no lease, no task; the queue is empty.
    await until(async () => (await worker.dispatch.depth()).active === 0);
    expect(worker.orchestrator.inFlight()).toEqual({ live: 0, leases: 0 });
    const audit = await api.orchestrator.audit('d-1');
    expect(audit.filter((e) => e.kind === 'confirmation').length).toBeGreaterThan(0);
  });

  it('answers at once what needs no worker: a wrong tenant, a forged confirmation is applied and refused by the chart', async () => {
    const { node } = cluster();
    const api = node('api');
    node('worker').orchestrator.createWorker({ concurrency: 2 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'd-2' });
    const waiting = await api.orchestrator.settled('d-2', { timeoutMs: scaled(10_000) });
    const other = { ...SUPPORT, tenantId: 'globex' };
    expect(await api.orchestrator.confirm('d-2', other, waiting.pendingConfirmation!)).toMatchObject({
      accepted: false,
      code: 'wrong_tenant',
    });
    const forged = await api.orchestrator.confirm('d-2', SUPPORT, {
      id: waiting.pendingConfirmation!.id,
      argsHash: 'sha256:0000',
    });
    expect(forged.accepted).toBe(false);
    expect(forged.code).toBe('arguments_changed');
    expect((await api.orchestrator.status('d-2')).state).toBe('waiting_for_confirmation');
    await expect(api.orchestrator.start({ principal: SUPPORT, goal: 'again', taskId: 'd-2' })).rejects.toBeInstanceOf(
      TaskExistsError,
    );
    await expect(api.orchestrator.status('nope')).rejects.toBeInstanceOf(TaskNotFoundError);
  });

  it('says a task never created does not exist, also while a lease of its id is held; its wake job ends instead of waiting for the lease', async () => {
    const { node } = cluster({ queue: { replyTimeoutMs: 300 } });
    const api = node('api');
    const worker = node('worker');
    // A process died while it loaded the unknown id: its lease stays until it expires.
    expect(await api.store.leases!.acquire('ghost', 60_000)).not.toBeNull();
    await expect(api.orchestrator.resume('ghost')).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(api.orchestrator.answer('ghost', SUPPORT, 'yes')).rejects.toBeInstanceOf(TaskNotFoundError);
    await expect(api.orchestrator.erase('ghost', { reason: 'gdpr_erasure' })).rejects.toBeInstanceOf(TaskNotFoundError);
    worker.orchestrator.createWorker({ concurrency: 2 });
    await api.dispatch.enqueue({ kind: 'wake', taskId: 'ghost', at: Date.now() });
    await until(async () => {
      const depth = await api.dispatch.depth();
      return depth.waiting + depth.active + depth.delayed + depth.failed === 0;
    }, 5_000);
  });

  it('claims a start’s mandate when the start is recorded: a second start with it is refused at once, and the worker creates the first under it', async () => {
    const { node } = cluster();
    const api = node('api');
    const terms = { order_id: 'O-1001', max_amount_cents: 99_900 };
    const mandate = refundMandate.of(terms);
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, mandate, taskId: 'md-1' });
    await expect(
      api.orchestrator.start({ principal: SUPPORT, goal: 'refund again', success, mandate, taskId: 'md-2' }),
    ).rejects.toBeInstanceOf(MandateUsedError);
    expect(await api.dispatch.pendingStart('md-2')).toBeNull();
    await expect(api.orchestrator.status('md-2')).rejects.toBeInstanceOf(TaskNotFoundError);
    // A start refused for its id gives its mandate back.
    const other = refundMandate.of(terms);
    await expect(
      api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, mandate: other, taskId: 'md-1' }),
    ).rejects.toBeInstanceOf(TaskExistsError);
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, mandate: other, taskId: 'md-3' });
    // Erasing the queued task gives its mandate back.
    await api.orchestrator.erase('md-3', { reason: 'gdpr_erasure' });
    expect(await api.store.claimMandate!(other.id!, 'md-4')).toBe('claimed');
    // The worker's create is not refused by the claim the API process made for the same task.
    node('worker').orchestrator.createWorker({ concurrency: 2 });
    const waiting = await api.orchestrator.settled('md-1', { timeoutMs: scaled(10_000) });
    expect(waiting).toMatchObject({ state: 'waiting_for_confirmation', mandate });
  });

  it('a cancel reaches a task running in another process within a second', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow = { ...REFUND_50 };
    const { node } = cluster({
      script: () => [
        reply.call('get_order', { order_id: 'O-1001' }),
        reply.call('refund_order', slow),
        reply.answer('ok'),
      ],
    });
    const api = node('api');
    const worker = node('worker');
    // The order lookup hangs until released: the task is running, its lease held by the worker.
    const refunds = worker.refunds as RefundDesk & { getOrder: RefundDesk['getOrder'] };
    const original = refunds.getOrder.bind(refunds);
    refunds.getOrder = async (...args: Parameters<RefundDesk['getOrder']>) => {
      await gate;
      return original(...args);
    };
    worker.orchestrator.createWorker({ concurrency: 2 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'd-3' });
    await until(
      async () => (await api.orchestrator.status('d-3')).revision > 0 && worker.orchestrator.inFlight().live === 1,
      10_000,
    );
    const asked = Date.now();
    const result = await api.orchestrator.cancel('d-3', SUPPORT, 'changed my mind');
    const took = Date.now() - asked;
    release();
    expect(result.accepted).toBe(true);
    // Answered while the refund is still held, well before the 10 s reply timeout.
    expect(took).toBeLessThan(scaled(1_000));
    const final = await api.orchestrator.settled('d-3', { timeoutMs: scaled(10_000) });
    expect(final.state).toBe('cancelled');
    expect(worker.refunds.refunds).toEqual([]);
  });

  it('without a worker, an event is recorded and EventPendingError says so; a worker started later applies it once', async () => {
    const { node, refunds } = cluster({ queue: { replyTimeoutMs: 300 } });
    const api = node('api');
    const first = node('worker-1');
    const w1 = first.orchestrator.createWorker({ concurrency: 2 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'd-4' });
    const waiting = await api.orchestrator.settled('d-4', { timeoutMs: scaled(10_000) });
    await w1.close();
    const pending = await api.orchestrator
      .confirm('d-4', SUPPORT, waiting.pendingConfirmation!)
      .catch((error: unknown) => error);
    expect(pending).toBeInstanceOf(EventPendingError);
    expect((await api.orchestrator.status('d-4')).state).toBe('waiting_for_confirmation');
    node('worker-2').orchestrator.createWorker({ concurrency: 2 });
    const done = await api.orchestrator.settled('d-4', { timeoutMs: scaled(10_000) });
    expect(done.state).toBe('done');
    expect(refunds.refunds).toHaveLength(1);
  });

  it('a confirmation deadline is a delayed job: the task expires with no sweep running', async () => {
    const { node } = cluster({ policy: { confirmationTtlMs: 700 } });
    const api = node('api');
    const worker = node('worker');
    worker.orchestrator.createWorker({ concurrency: 2 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'refund', success, taskId: 'd-5' });
    const waiting = await api.orchestrator.settled('d-5', { timeoutMs: scaled(10_000) });
    expect(waiting.state).toBe('waiting_for_confirmation');
    const expired = await api.orchestrator.settled('d-5', { timeoutMs: scaled(10_000) }).then(async () => {
      await until(async () => (await api.orchestrator.status('d-5')).state !== 'waiting_for_confirmation', 10_000);
      return api.orchestrator.status('d-5');
    });
    expect(expired.state).not.toBe('waiting_for_confirmation');
    expect(worker.refunds.refunds).toEqual([]);
  });

  it('refuses a start beyond maxQueueDepth with QueueFullError, before anything is recorded', async () => {
    const { node } = cluster({ queue: { maxQueueDepth: 2 } });
    const api = node('api');
    await api.orchestrator.start({ principal: SUPPORT, goal: 'one', taskId: 'q-1' });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'two', taskId: 'q-2' });
    await expect(api.orchestrator.start({ principal: SUPPORT, goal: 'three', taskId: 'q-3' })).rejects.toBeInstanceOf(
      QueueFullError,
    );
    expect((await api.dispatch.depth()).waiting).toBe(2);
    await expect(api.orchestrator.status('q-3')).rejects.toBeInstanceOf(TaskNotFoundError);
  });

  it('drain hands a running task back to the queue; another worker finishes it, the read run again, nothing lost', async () => {
    const { node } = cluster({
      script: () => [
        reply.call('slow_read', {}),
        (v: { data(tool: string): unknown }) => reply.answer(`read by ${(v.data('slow_read') as { by: string }).by}`),
      ],
    });
    const blocked = slowRead('gate');
    const quick = slowRead({ ms: 1 });
    const api = node('api', { tools: [quick.tool('api')] });
    const first = node('first', { tools: [blocked.tool('first')] });
    first.orchestrator.createWorker({ concurrency: 2 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'read slowly', taskId: 'd-6' });
    await until(() => blocked.started.length === 1, 10_000);
    const { handedBack } = await first.orchestrator.drain({ timeoutMs: 100 });
    expect(handedBack).toEqual(['d-6']);
    expect((await api.orchestrator.status('d-6')).state).toBe('running');
    node('second', { tools: [quick.tool('second')] }).orchestrator.createWorker({ concurrency: 2 });
    const done = await api.orchestrator.settled('d-6', { timeoutMs: scaled(15_000) });
    expect(done.state).toBe('answered');
    expect(done.outcome?.answer).toBe('read by second');
    expect(quick.started).toEqual(['second']);
  });

  it('accepts exactly one of two concurrent starts with one task id', async () => {
    const { node } = cluster();
    const api = node('api');
    const results = await Promise.allSettled([
      api.orchestrator.start({ principal: SUPPORT, goal: 'first caller', taskId: 'dup-1' }),
      api.orchestrator.start({ principal: { ...SUPPORT, userId: 'OTHER' }, goal: 'second caller', taskId: 'dup-1' }),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'rejected' && r.reason instanceof TaskExistsError)).toHaveLength(1);
  });

  it('puts a start refused for capacity back for later, without using up its tries', async () => {
    const blocked = slowRead('gate');
    const { node } = cluster({
      queue: { attempts: 3, retryDelayMs: 100 },
      script: () => [reply.call('slow_read', {}), reply.answer('done')],
    });
    const api = node('api', { tools: [blocked.tool('api')] });
    const worker = node('worker', { tools: [blocked.tool('worker')], capacity: { maxRunningPerTenant: 1 } });
    worker.orchestrator.createWorker({ concurrency: 4 });
    await api.orchestrator.start({ principal: SUPPORT, goal: 'first', taskId: 'cap-1' });
    await until(() => blocked.started.length === 1, 10_000);
    await api.orchestrator.start({ principal: SUPPORT, goal: 'second', taskId: 'cap-2' });
    // Long enough for its three tries 100 ms apart; a loaded machine gets a longer look.
    await sleep(scaled(1_500));
    const later = await api.orchestrator.status('cap-2').catch((e: unknown) => e);
    blocked.release();
    expect(later).not.toBeInstanceOf(TaskNotFoundError);
  });

  it('refuses a start over the tenant cap at the API process, and tells a retried start the task exists', async () => {
    const blocked = slowRead('gate');
    const { node } = cluster({ script: () => [reply.call('slow_read', {}), reply.answer('done')] });
    const api = node('api', { tools: [blocked.tool('api')], capacity: { tenantCap: 2 } });
    const worker = node('worker', { tools: [blocked.tool('worker')], capacity: { tenantCap: 2 } });
    worker.orchestrator.createWorker({ concurrency: 4 });
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) =>
        api.orchestrator.start({ principal: SUPPORT, goal: 'read', taskId: `tc-${i}` }),
      ),
    );
    const accepted = results.flatMap((r, i) => (r.status === 'fulfilled' ? [`tc-${i}`] : []));
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
    // Refused at once, before anything is queued: not a 201 followed by a job that waits for a slot.
    expect(accepted).toHaveLength(2);
    expect(refused).toHaveLength(3);
    for (const error of refused) expect(error).toMatchObject({ code: 'tenant_at_capacity', limitName: 'tenantCap' });
    expect(api.orchestrator.stats().refused.tenantCap).toBe(3);
    for (let i = 0; i < 5; i++)
      if (!accepted.includes(`tc-${i}`)) expect(await api.dispatch.pendingStart(`tc-${i}`)).toBeNull();
    // The worker creates both under the slots the API process took for them.
    await until(() => blocked.started.length === 2, scaled(10_000));
    expect(await api.store.tenantSlots.count(SUPPORT.tenantId)).toBe(2);
    // A retried start of an accepted task, at the cap, is told the task exists.
    await expect(
      api.orchestrator.start({ principal: SUPPORT, goal: 'read', taskId: accepted[0]! }),
    ).rejects.toBeInstanceOf(TaskExistsError);
    blocked.release();
    for (const taskId of accepted)
      expect((await api.orchestrator.settled(taskId, { timeoutMs: scaled(10_000) })).state).toBe('answered');
    await until(async () => (await api.store.tenantSlots.count(SUPPORT.tenantId)) === 0, scaled(10_000));
    // A refused id was never taken: it starts once the tenant has room.
    const again = [0, 1, 2, 3, 4].map((i) => `tc-${i}`).find((id) => !accepted.includes(id))!;
    await expect(api.orchestrator.start({ principal: SUPPORT, goal: 'read', taskId: again })).resolves.toMatchObject({
      taskId: again,
    });
  });
});
