/**
 * Redis itself dies (SIGKILL) while tasks run and wait, and comes back on the same port from its append-only file
 * (fsync on every write). Whatever a save acknowledged must still be there, waiting tasks must still wait for the
 * same confirmation, and the running tasks must finish: the store's client reconnects, LiveTask retries its save.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { getOrder } from '../tools/getOrder.js';
import { refundOrder } from '../tools/refundOrder.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { reply } from '../src/testing/scriptedModel.js';
import { type Orchestrator, type TaskStatus, createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { defineTool } from '../src/tool.js';
import { DurableRedis, hasRedisServer } from './support/durableRedis.js';
import { SUPPORT, until } from './support/harness.js';
import { scaled } from './support/timeScale.js';

const SLOW_READS = 12;
const READ_MS = 60;

/** A read that takes READ_MS. */
const slowRead = defineTool({
  name: 'slow_read',
  description: 'a read that takes a while',
  effect: 'read',
  scopes: [],
  timeoutMs: 5_000,
  input: z.strictObject({ n: z.number().int() }),
  output: z.strictObject({ n: z.number().int() }),
  execute: ({ n }, { signal }) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve({ ok: true, value: { n } }), READ_MS);
      signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
    }),
});

/** Slow tasks read SLOW_READS times, then answer; refund tasks ask to refund 500.00 of their order (confirmation). */
const model: AgentModel = {
  name: 'restart-script',
  async decide({ goal, turn }) {
    const order = /^refund (\S+)$/.exec(goal)?.[1];
    const callId = `call_${turn}`;
    if (order)
      return turn === 1
        ? reply.call('refund_order', { order_id: order, amount_cents: 50_000, reason: 'broken' }, callId)
        : reply.answer('refunded');
    return turn <= SLOW_READS ? reply.call('slow_read', { n: turn }, callId) : reply.answer(`read ${SLOW_READS} times`);
  },
};

const ORDERS = ['O-1', 'O-2', 'O-3'];

describe.skipIf(!hasRedisServer && process.env.CI !== 'true')(
  'when Redis itself is killed and restarted mid-run',
  () => {
    let server: DurableRedis | null = null;
    let orchestrator: Orchestrator | null = null;
    let store: RedisStore | null = null;

    afterEach(async () => {
      await orchestrator?.close();
      await store?.close();
      await server?.destroy();
    });

    it(
      'keeps every acknowledged save, keeps waiting tasks waiting, and finishes the running ones',
      async () => {
        expect(hasRedisServer, 'CI=true needs redis-server on PATH').toBe(true);
        server = await DurableRedis.start();
        store = new RedisStore({ url: server.url, prefix: 'restart' });
        const desk = new RefundDesk(
          ORDERS.map((orderId) => ({
            orderId,
            tenantId: 'acme',
            totalCents: 100_000,
            refundedCents: 0,
            currency: 'CNY',
            customerNote: '',
          })),
        );
        orchestrator = createOrchestrator({
          tools: [slowRead, getOrder(desk), refundOrder(desk)],
          model,
          store,
          limits: { modelTurns: 30, toolCalls: 30, money: 10_000_000 },
          random: () => 0.5,
          expirySweepMs: 0,
          // Long enough that the outage cannot cost a lease; short enough that a lease a dead release left behind
          // would not keep recovery waiting long.
          lease: { ttlMs: 4_000, renewEveryMs: 1_000 },
        });
        const acked = new Map<string, number>();
        orchestrator.onSaved((s) => acked.set(s.taskId, Math.max(acked.get(s.taskId) ?? 0, s.revision)));

        const waiting: TaskStatus[] = [];
        for (const order of ORDERS) {
          waiting.push(
            await orchestrator.run({ principal: SUPPORT, goal: `refund ${order}`, taskId: `refund-${order}` }),
          );
        }
        expect(waiting.map((s) => s.state)).toEqual(ORDERS.map(() => 'waiting_for_confirmation'));
        const slow = ['slow-1', 'slow-2', 'slow-3'];
        for (const taskId of slow) await orchestrator.start({ principal: SUPPORT, goal: 'read slowly', taskId });
        await until(() => slow.every((id) => (acked.get(id) ?? 0) >= 4));

        await server.kill();
        const ackedAtKill = new Map(acked);
        expect(slow.map((id) => ackedAtKill.get(id)! < 3 * SLOW_READS)).toEqual([true, true, true]); // still mid-run
        await server.start();

        // Nothing acknowledged was lost: each stored revision is at least the last one acknowledged before the kill.
        for (const [taskId, revision] of ackedAtKill) {
          expect((await store.load(taskId))?.revision ?? 0, `${taskId} after the restart`).toBeGreaterThanOrEqual(
            revision,
          );
        }
        for (const before of waiting) {
          const now = await orchestrator.status(before.taskId);
          expect(now.state).toBe('waiting_for_confirmation');
          expect(now.pendingConfirmation).toEqual(before.pendingConfirmation);
        }

        // The running tasks finish in this process; one whose retries ran out during the outage is recovered here.
        const gaveUp: string[] = [];
        for (const taskId of slow) await orchestrator.settled(taskId).catch(() => gaveUp.push(taskId));
        if (gaveUp.length > 0) {
          await until(async () => (await orchestrator!.recover()).busy.length === 0, 10_000);
        }
        for (const taskId of slow) {
          expect(await orchestrator.settled(taskId)).toMatchObject({
            state: 'answered',
            outcome: { answer: `read ${SLOW_READS} times` },
          });
        }
        for (const before of waiting) {
          const result = await orchestrator.confirm(before.taskId, SUPPORT, before.pendingConfirmation!);
          expect(result.accepted).toBe(true);
          expect((await orchestrator.settled(before.taskId)).state).toBe('answered');
        }
        expect(desk.refunds.map((r) => r.orderId)).toEqual(ORDERS);
        for (const [taskId, revision] of acked) expect((await store.load(taskId))!.revision).toBe(revision);
        console.log(
          `redis restart: acknowledged at kill ${JSON.stringify(Object.fromEntries(ackedAtKill))}; ` +
            `tasks that gave up and were recovered: ${gaveUp.length ? gaveUp.join(', ') : 'none'}`,
        );
      },
      scaled(40_000),
    );
  },
);
