/**
 * A decision that meets a take-over, on Redis, through the HTTP API of two services on one prefix (no dispatch): M1
 * confirms the four-eyes refund at service A, and while A saves that confirmation, service B takes the task's lease
 * (A's lease lapsed: its key is removed here, as an expiry would) and applies E17's rejection. A's save is then
 * refused by its stale fence. Exactly one decision takes effect (the rejection, which B saved), and M1 hears a clear
 * refusal from the chart, never a 500; no refund is made. The interleaving is pinned by holding A's save on a gate.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { APPROVAL_REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { redisKeys } from '../src/store/redis/redisKeys.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { useTestRedis } from './support/redis.js';
import { withMembers } from './support/takeover.js';

const redis = await useTestRedis();

function post(service: DemoService, user: string, url: string, payload: object) {
  return service.app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${user}` }, payload });
}

/** `store` whose next save, once `hold()` is called, waits until the returned function opens it. */
function heldSaves(store: RedisStore) {
  let gate: { reached: () => void; open: Promise<void> } | null = null;
  const wrapped = withMembers(store, {
    async save(request) {
      const held = gate;
      gate = null;
      if (held) {
        held.reached();
        await held.open;
      }
      return store.save(request);
    },
  } satisfies Partial<TaskStore>);
  return {
    store: wrapped,
    /** Holds the next save: resolves `reached` when it is held; call `release` to let it go to the store. */
    hold() {
      let reached!: () => void;
      let release!: () => void;
      const reachedP = new Promise<void>((resolve) => (reached = resolve));
      const open = new Promise<void>((resolve) => (release = resolve));
      gate = { reached, open };
      return { reached: reachedP, release };
    },
  };
}

describe.skipIf(!redis)('a decision whose save meets a take-over by another service', () => {
  afterAll(() => redis?.stop());

  it('gives the approver the chart’s refusal, not a 500, when the requester’s rejection won at the other service', async () => {
    const prefix = redis!.freshPrefix();
    const admin = redis!.connect();
    const rawA = new RedisStore({ url: redis!.url, prefix });
    const rawB = new RedisStore({ url: redis!.url, prefix });
    const held = heldSaves(rawA);
    const a = await createDemoService({ store: held.store, expirySweepMs: 0, rateLimit: false });
    const b = await createDemoService({ store: rawB, expirySweepMs: 0, rateLimit: false });
    try {
      const started = await post(a, 'E17', '/api/tasks', APPROVAL_REFUND_START_BODY);
      const taskId = started.json().status.taskId as string;
      const waiting = await a.orchestrator.settled(taskId);
      expect(waiting.state).toBe('waiting_for_confirmation');
      const pending = waiting.pendingConfirmation!;

      const save = held.hold();
      const confirming = post(a, 'M1', `/api/tasks/${taskId}/confirm`, {
        confirmationId: pending.id,
        argsHash: pending.argsHash,
      });
      await save.reached;
      // A's lease lapses while its save is on the way (a stall), and B takes the task for E17's rejection.
      await admin.del(redisKeys(prefix).lease(taskId));
      const rejected = await post(b, 'E17', `/api/tasks/${taskId}/reject`, {
        confirmationId: pending.id,
        reason: 'the customer withdrew',
      });
      expect([rejected.statusCode, rejected.json().code]).toEqual([200, null]);
      save.release();
      const confirmed = await confirming;

      // The chart's answer once B let the task go, or (B still driving it after the lease wait) task_busy: retry later.
      expect([
        [409, 'not_waiting_for_confirmation'],
        [409, 'task_finished'],
        [503, 'task_busy'],
      ]).toContainEqual([confirmed.statusCode, confirmed.json().code]);
      const final = await b.orchestrator.settled(taskId);
      expect(final.state).not.toBe('waiting_for_confirmation');
      expect([...(await a.rows()), ...(await b.rows())].filter((row) => row.startsWith('refund'))).toEqual([]);
      const audit = await b.orchestrator.audit(taskId);
      const decisions = audit.filter((entry) => entry.kind === 'confirmation');
      expect(decisions.map((entry) => (entry as { decision?: string }).decision)).not.toContain('confirmed');
      expect(audit.filter((entry) => entry.kind === 'tool_started' && entry.tool === 'refund_order')).toEqual([]);
    } finally {
      await a.close();
      await b.close();
      await rawA.close();
      await rawB.close();
      await redis!.deleteKeys(prefix);
    }
  });
});
