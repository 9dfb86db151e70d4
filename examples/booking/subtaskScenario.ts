/**
 * The sub-task trajectory: the support lead's task hands the refund to a child task (`delegate_refund`, a host-declared
 * sub-task tool). The child may only read the order and refund it, under a mandate no wider than the parent's (the same
 * order, at most what the call names) and with a share of the parent's budgets taken before it starts. The parent
 * waits, persisted, while the child reads the order and asks E17 to confirm its 199.00 refund; once the child is done,
 * its outcome (status, reason, its trusted evidence) comes back to the parent as the call's result, and the parent
 * ends `done` on it.
 */
import { z } from 'zod';
import { type ModelReply, type Orchestrator, type TaskStatus, defineSubtask } from '../../src/index.js';
import { type ScriptStep, type ScriptView, reply } from '../../src/testing/index.js';
import type { Order } from '../../tools/getOrder.js';
import { refundMandate } from '../../tools/mandates.js';
import type { Refund } from '../../tools/refundOrder.js';
import { refundDeskSetup } from './refundScenario.js';
import { E17_SUPPORT, REFUND_GOAL, REFUND_TERMS } from './requests.js';
import type { ScenarioEnv, ScenarioResult } from './scenario.js';

/** The child's goal starts with this, so one scripted model can play both tasks. */
export const SUBTASK_GOAL_PREFIX = 'Sub-task:';

/** The sub-task tool: a child that may only read the order and refund it, within the parent's refund mandate. */
export const delegateRefund = defineSubtask({
  name: 'delegate_refund',
  description:
    'Hands the refund of one order to a sub-task that may only read the order and refund it (at most amount_cents). Its result is the sub-task outcome.',
  input: z.strictObject({ order_id: z.string().min(1), amount_cents: z.number().int().positive() }),
  tools: ['get_order', 'refund_order'],
  goal: (args) =>
    `${SUBTASK_GOAL_PREFIX} refund ${(args.amount_cents / 100).toFixed(2)} on order ${args.order_id}: read the order, then refund exactly that.`,
  mandate: {
    kind: refundMandate,
    terms: (args) => ({ order_id: args.order_id, max_amount_cents: args.amount_cents }),
  },
  budget: { modelTurns: 4, toolCalls: 4, writes: 1, money: 19_900 },
  success: {
    tool: 'refund_order',
    match: { status: 'succeeded' },
    require: ['refund_id'],
    description: 'a succeeded refund with a refund id',
  },
  confirm: { never: 'starting the sub-task moves no money; its refund is confirmed on its own rule' },
});

/** The parent's success: the sub-task met its goal (its own trusted refund result). */
export const DELEGATED_SUCCESS = {
  tool: 'delegate_refund',
  match: { status: 'done' },
  description: 'the sub-task met its goal: a succeeded refund',
};

/** One script for both tasks: the parent delegates, the child reads the order and refunds 199.00. */
export function delegatedScript(turns = 6): ScriptStep[] {
  const step = (view: ScriptView): ModelReply => {
    if (view.goal.startsWith(SUBTASK_GOAL_PREFIX)) {
      const refund = view.data<Refund>('refund_order');
      if (refund) return reply.answer(`Refunded ${refund.order_id} (${refund.refund_id}).`);
      if (view.errorCode('refund_order') || view.errorCode('get_order')) return reply.answer('Not refunded.');
      const order = view.data<Order>('get_order');
      if (order)
        return reply.call('refund_order', {
          order_id: order.order_id,
          amount_cents: 19_900,
          reason: 'projector arrived broken',
        });
      return reply.call('get_order', { order_id: 'O-1001' });
    }
    const outcome = view.data<{ child_task_id: string; evidence: { fields: { refund_id?: string } }[] }>(
      'delegate_refund',
    );
    if (outcome)
      return reply.answer(
        `The sub-task ${outcome.child_task_id} refunded 199.00 on O-1001 (${outcome.evidence[0]?.fields.refund_id ?? '?'}).`,
      );
    if (view.errorCode('delegate_refund')) return reply.answer('The delegated refund was not made.');
    return reply.call('delegate_refund', { order_id: 'O-1001', amount_cents: 19_900 });
  };
  return Array.from({ length: turns }, () => step);
}

/** Waits until `taskId` is stored in a state `done` accepts (the parent is moved by its child's end, not by a call). */
export async function waitForState(
  orchestrator: Orchestrator,
  taskId: string,
  done: (status: TaskStatus) => boolean,
  timeoutMs = 10_000,
): Promise<TaskStatus> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const status = await orchestrator.settled(taskId);
    if (done(status) || Date.now() > until) return status;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export async function runDelegated(env: ScenarioEnv): Promise<ScenarioResult> {
  const { desk, orchestrator } = refundDeskSetup(env, delegatedScript(), { tools: [delegateRefund] });
  const steps: string[] = [];
  try {
    const parent = await orchestrator.run({
      principal: E17_SUPPORT,
      goal: REFUND_GOAL,
      success: DELEGATED_SUCCESS,
      mandate: refundMandate.of(REFUND_TERMS),
      limits: { money: 19_900 },
      taskId: 'delegated-1',
    });
    steps.push(`parent ${parent.taskId} ${parent.state}`);
    const childId = parent.children[0]?.childTaskId;
    if (childId) {
      let child = await waitForState(orchestrator, childId, (s) => s.state !== 'running');
      steps.push(`child ${childId} (tools ${parent.children[0]!.tools.join(', ')}) ${child.state}`);
      for (let asked = 0; child.pendingConfirmation && asked < 3; asked++) {
        const pending = child.pendingConfirmation;
        if (env.leaveWaiting) {
          steps.push(`left waiting for confirmation: ${pending.summary}`);
          break;
        }
        const ok = await orchestrator.confirm(childId, E17_SUPPORT, { id: pending.id, argsHash: pending.argsHash });
        steps.push(
          `E17 confirms the child's "${pending.summary}" → ${ok.accepted ? 'accepted' : `refused: ${ok.code}`}`,
        );
        child = await orchestrator.settled(childId);
      }
      steps.push(`child ${childId} ${child.state}`);
    }
    // Left waiting (for the step CLI), the parent waits for its child: nothing to wait for here.
    const status = env.leaveWaiting
      ? await orchestrator.status(parent.taskId)
      : await waitForState(orchestrator, parent.taskId, (s) => s.outcome !== null);
    return {
      name: 'delegated',
      title: 'A sub-task does the refund',
      expectation:
        "the parent delegates the refund to a child (get_order and refund_order only, mandate O-1001 up to 199.00, a share of the budgets); E17 confirms the child's refund; the child's outcome comes back and the parent ends done",
      status,
      audit: await orchestrator.audit(parent.taskId),
      steps,
      bookings: [],
      refunds: desk.refunds,
      reserveRequests: 0,
      transcript: await orchestrator.transcript(parent.taskId),
    };
  } finally {
    await orchestrator.close();
  }
}
