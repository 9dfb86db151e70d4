/**
 * The workflow trajectory, the refund of the design sources as a fixed flow: the program looks the order up, the
 * model extracts the order id, the program checks it is the customer's order (the mandate), the model judges whether
 * a human is needed, the program confirms and refunds. The model only decides where the flow asks it, within a schema
 * or a set of choices; every call is the program's and goes through every gate.
 */
import { z } from 'zod';
import { defineWorkflow, established } from '../../src/index.js';
import type { ModelReply } from '../../src/index.js';
import { type ScriptStep, type ScriptView, reply } from '../../src/testing/index.js';
import type { Order } from '../../tools/getOrder.js';
import { refundMandate } from '../../tools/mandates.js';
import { refundDeskSetup } from './refundScenario.js';
import { E17_SUPPORT, REFUND_GOAL, REFUND_SUCCESS, REFUND_TERMS } from './requests.js';
import type { ScenarioEnv, ScenarioResult } from './scenario.js';

/** The refund terms the host read off the request (the mandate): the order and the most it may refund. */
const termsOf = (mandate: { terms: unknown } | null) =>
  mandate?.terms as { order_id: string; max_amount_cents: number };

export const refundWorkflow = defineWorkflow({
  name: 'refund',
  start: 'extract',
  steps: {
    extract: {
      purpose: 'the model extracts the order id from the request',
      decide: {
        prompt: 'Which order does the customer ask to refund? Give its id.',
        output: z.strictObject({ order_id: z.string().regex(/^O-\d{4}$/) }),
      },
      // The program checks the order is the one the customer's request is about (the mandate), before reading it.
      next: (facts, task) =>
        established<{ order_id: string }>(facts.extract).order_id === termsOf(task.mandate).order_id ? 'lookup' : null,
    },
    lookup: {
      purpose: 'the program reads the order',
      call: {
        tool: 'get_order',
        args: (facts) => ({ order_id: established<{ order_id: string }>(facts.extract).order_id }),
      },
      next: (facts) => (facts.lookup?.ok ? 'judge' : null),
    },
    judge: {
      purpose: 'the model judges whether a human must handle it',
      decide: {
        prompt:
          'Read the order. Answer "refund" if refunding what the customer asked for is routine, "escalate" if a human must look at it.',
        choices: ['refund', 'escalate'],
      },
      next: (facts) => (established<{ choice: string }>(facts.judge).choice === 'refund' ? 'refund' : null),
    },
    refund: {
      purpose: 'the program refunds what the customer asked for (confirmed by the refund rule)',
      call: {
        tool: 'refund_order',
        args: (facts, task) => ({
          order_id: established<Order>(facts.lookup).order_id,
          amount_cents: termsOf(task.mandate).max_amount_cents,
          reason: 'customer request: projector arrived broken',
        }),
      },
    },
  },
});

/** The model's part: the order id, then a judgement (the customer note does not sway it: it only picks a choice). */
export function workflowScript(turns = 6): ScriptStep[] {
  const step = (view: ScriptView): ModelReply =>
    view.turn === 1 ? reply.decide({ order_id: 'O-1001' }) : reply.decide({ choice: 'refund' });
  return Array.from({ length: turns }, () => step);
}

export async function runWorkflow(env: ScenarioEnv): Promise<ScenarioResult> {
  const { desk, orchestrator } = refundDeskSetup(env, workflowScript(), { workflows: [refundWorkflow] });
  const steps: string[] = [];
  try {
    let status = await orchestrator.run({
      principal: E17_SUPPORT,
      goal: REFUND_GOAL,
      success: REFUND_SUCCESS,
      mandate: refundMandate.of(REFUND_TERMS),
      limits: { money: REFUND_TERMS.max_amount_cents },
      workflow: 'refund',
      taskId: 'workflow-1',
    });
    const pending = status.pendingConfirmation;
    if (pending && env.leaveWaiting) steps.push(`left waiting for confirmation: ${pending.summary}`);
    else if (pending) {
      const ok = await orchestrator.confirm(status.taskId, E17_SUPPORT, pending);
      steps.push(`E17 confirms "${pending.summary}" → ${ok.accepted ? 'accepted' : `refused: ${ok.code}`}`);
      status = await orchestrator.settled(status.taskId);
    }
    return {
      name: 'workflow',
      title: 'A fixed flow, the model deciding inside it',
      expectation:
        'the program looks the order up and refunds; the model only extracts the order id and judges refund vs escalate; 199.00 refunded after E17 confirms',
      status,
      audit: await orchestrator.audit(status.taskId),
      steps,
      bookings: [],
      refunds: desk.refunds,
      reserveRequests: 0,
      transcript: await orchestrator.transcript(status.taskId),
    };
  } finally {
    await orchestrator.close();
  }
}
