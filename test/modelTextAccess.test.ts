/**
 * Who gets a task's live model text (`model_text` and `model_call` on its event stream): the text of the model's turns is its
 * transcript as it is written, and may quote what the tools returned, so it goes to those who may read the task's
 * history (its user, an operator of its tenant), not to an approver, who sees the confirmation they decide and its
 * outcome but not the history (`GET /api/tasks/:id/history` answers them 403).
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { agentService } from '../src/http/index.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { reply, scriptedModel } from '../src/testing/index.js';
import { REFUND_GOAL, REFUND_MANDATE, REFUND_SUCCESS, SUPPORT, harness } from './support/harness.js';
import { openTaskEvents } from './support/sseClient.js';

const M1 = { userId: 'M1', tenantId: 'acme', scopes: ['refunds:approve'] };
const refund = (cents: number) =>
  reply.call('refund_order', { order_id: 'O-1001', amount_cents: cents, reason: 'broken' });

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

describe('model_text and who may read the transcript', () => {
  it('reaches the task’s user, not an approver who decided (refused its history)', async () => {
    let bothWatching!: () => void;
    const watching = new Promise<void>((resolve) => (bothWatching = resolve));
    const script = scriptedModel([refund(15_000), refund(15_000), reply.answer('refunded')]);
    // The answer turn writes its text once both viewers are connected, as a streaming adapter would.
    const model: AgentModel = {
      name: script.name,
      async decide(request) {
        const produced = await script.decide(request);
        if (produced.type === 'answer') {
          await watching;
          request.onText?.('Refunded 150.00; the order notes say the customer is a reseller.\n');
          // A call piece as well (an adapter reports one while a call is written): the same access rule.
          request.onCallText?.({ index: 0, name: 'get_order', arguments: '{"order_id": "O-1001"}' });
        }
        return produced;
      },
    };
    const { orchestrator } = harness({ model, refundOptions: { approveAboveCents: 10_000 } });
    app = Fastify();
    const users: Record<string, typeof SUPPORT> = { E17: SUPPORT, M1 };
    await agentService(app, {
      orchestrator,
      authenticate: (request) => users[String(request.headers.authorization).replace('Bearer ', '')] ?? null,
      startRequest: () => {
        throw new Error('not used');
      },
      pages: false,
    });
    const origin = await app.listen({ port: 0, host: '127.0.0.1' });
    const status = await orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      success: REFUND_SUCCESS,
      mandate: REFUND_MANDATE,
      taskId: 'mt-a',
    });
    expect(status.state).toBe('waiting_for_confirmation');
    expect((await orchestrator.confirm('mt-a', M1, status.pendingConfirmation!)).accepted).toBe(true);

    const history = await app.inject({
      method: 'GET',
      url: '/api/tasks/mt-a/history',
      headers: { authorization: 'Bearer M1' },
    });
    expect(history.statusCode).toBe(403);

    const owner = openTaskEvents(origin, 'mt-a', { token: 'E17' });
    const approver = openTaskEvents(origin, 'mt-a', { token: 'M1' });
    await expect.poll(() => owner.events.length > 0 && approver.events.length > 0).toBe(true);
    bothWatching();
    await Promise.all([owner.done, approver.done]);

    const texts = (events: typeof owner.events) => events.filter((e) => e.event === 'model_text');
    expect(texts(owner.events)).toHaveLength(1);
    expect(texts(approver.events)).toEqual([]);
    const calls = (events: typeof owner.events) => events.filter((e) => e.event === 'model_call');
    expect(calls(owner.events).length).toBeGreaterThan(0);
    expect(calls(approver.events)).toEqual([]);
    // The approver still follows the task to its end.
    expect(approver.events.at(-1)?.event).toBe('end');
  });
});
