/**
 * The plan-and-execute trajectory, the refund of the design sources: the model first proposes the whole plan (read
 * the order, then refund it), E17 approves the plan, then each step runs as its own call through every gate; the
 * refund of 199.00 is still confirmed by its own rule (a plan names tools, not amounts). Each step's status comes
 * from its tool's result, with the time it was observed.
 */
import type { ModelReply } from '../../src/index.js';
import { type ScriptStep, type ScriptView, reply } from '../../src/testing/index.js';
import type { Order } from '../../tools/getOrder.js';
import { refundMandate } from '../../tools/mandates.js';
import type { Refund } from '../../tools/refundOrder.js';
import { refundDeskSetup } from './refundScenario.js';
import { E17_SUPPORT, REFUND_GOAL, REFUND_SUCCESS, REFUND_TERMS } from './requests.js';
import type { ScenarioEnv, ScenarioResult } from './scenario.js';

/** The refund plan: read the order (and the refund it allows), then refund what the customer asked for. */
export const REFUND_PLAN = [
  { id: 'read_order', tool: 'get_order', purpose: 'read order O-1001: what was paid and what may be refunded' },
  {
    id: 'refund',
    tool: 'refund_order',
    purpose: 'refund 199.00 for the broken projector, as the customer asked',
    depends_on: ['read_order'],
  },
];

/** The planning refund assistant: proposes the plan, then runs its steps as they become ready, then reports. */
export function plannedRefundScript(turns = 8): ScriptStep[] {
  const step = (view: ScriptView): ModelReply => {
    const refund = view.data<Refund>('refund_order');
    if (refund)
      return reply.answer(
        `Refunded ${(refund.amount_cents / 100).toFixed(2)} on ${refund.order_id} (${refund.refund_id}), as planned.`,
      );
    const order = view.data<Order>('get_order');
    if (order)
      return reply.call('refund_order', {
        order_id: order.order_id,
        amount_cents: 19_900,
        reason: 'projector arrived broken',
      });
    if (view.turn === 1) return reply.plan(REFUND_PLAN);
    if (view.errorCode('refund_order') || view.errorCode('get_order')) return reply.answer('The refund was not made.');
    return reply.call('get_order', { order_id: 'O-1001' });
  };
  return Array.from({ length: turns }, () => step);
}

export async function runPlanned(env: ScenarioEnv): Promise<ScenarioResult> {
  // Plan first; a plan with a write is approved by the user before any of it runs (the default approval).
  const { desk, orchestrator } = refundDeskSetup(env, plannedRefundScript(), {
    policy: { planning: { mode: 'plan_first' } },
  });
  const steps: string[] = [];
  try {
    let status = await orchestrator.run({
      principal: E17_SUPPORT,
      goal: REFUND_GOAL,
      success: REFUND_SUCCESS,
      mandate: refundMandate.of(REFUND_TERMS),
      limits: { money: 19_900 },
      taskId: 'planned-1',
    });
    const taskId = status.taskId;
    for (let asked = 0; status.pendingConfirmation && asked < 3; asked++) {
      const pending = status.pendingConfirmation;
      if (env.leaveWaiting) {
        steps.push(`left waiting for confirmation: ${pending.summary}`);
        break;
      }
      const ok = await orchestrator.confirm(taskId, E17_SUPPORT, { id: pending.id, argsHash: pending.argsHash });
      steps.push(`E17 approves "${pending.summary}" → ${ok.accepted ? 'accepted' : `refused: ${ok.code}`}`);
      status = await orchestrator.settled(taskId);
    }
    return {
      name: 'planned',
      title: 'Plan, approve, then run',
      expectation:
        'the model proposes the refund plan first (read the order, then refund); E17 approves it; the steps run one by one, the refund of 199.00 confirmed on its own',
      status,
      audit: await orchestrator.audit(taskId),
      steps,
      bookings: [],
      refunds: desk.refunds,
      reserveRequests: 0,
      transcript: await orchestrator.transcript(taskId),
    };
  } finally {
    await orchestrator.close();
  }
}
