/** A refund desk with the sub-task tool `delegate_refund` (the demo's), for the sub-task tests. */
import type { Principal } from '../../machines/context.js';
import { DELEGATED_SUCCESS, delegateRefund, delegatedScript } from '../../examples/booking/subtaskScenario.js';
import { E17_SUPPORT, REFUND_GOAL, REFUND_TERMS } from '../../examples/booking/requests.js';
import { RefundDesk } from '../../examples/booking/refundService.js';
import { createOrchestrator } from '../../src/orchestrator/orchestrator.js';
import { MemoryStore } from '../../src/store/memoryStore.js';
import type { TaskStore } from '../../src/store/taskStore.js';
import { type ScriptStep, type ScriptedModel, scriptedModel } from '../../src/testing/scriptedModel.js';
import { getOrder } from '../../tools/getOrder.js';
import { refundMandate } from '../../tools/mandates.js';
import { refundDeskAuthority, refundOrder } from '../../tools/refundOrder.js';
import { until } from './harness.js';

export function subtaskSetup(
  options: {
    store?: TaskStore;
    desk?: RefundDesk;
    script?: ScriptStep[];
    capacity?: Parameters<typeof createOrchestrator>[0]['capacity'];
  } = {},
) {
  const store = options.store ?? new MemoryStore();
  const desk = options.desk ?? new RefundDesk();
  const model: ScriptedModel = scriptedModel(options.script ?? delegatedScript());
  const orchestrator = createOrchestrator({
    tools: [getOrder(desk), refundOrder(desk, { confirmAboveCents: 10_000 }), delegateRefund],
    loosen: refundDeskAuthority,
    mandates: [refundMandate],
    model,
    store,
    expirySweepMs: 0,
    ...(options.capacity ? { capacity: options.capacity } : {}),
  });
  return { store, desk, model, orchestrator };
}

type Orch = ReturnType<typeof subtaskSetup>['orchestrator'];

export function startParent(
  orchestrator: Orch,
  taskId: string,
  overrides: { principal?: Principal; limits?: Record<string, number> } = {},
) {
  return orchestrator.start({
    principal: overrides.principal ?? E17_SUPPORT,
    goal: REFUND_GOAL,
    success: DELEGATED_SUCCESS,
    mandate: refundMandate.of(REFUND_TERMS),
    limits: { money: 19_900, ...overrides.limits },
    taskId,
  });
}

/** The child, once it waits for E17 to confirm its refund. */
export async function childWaiting(orchestrator: Orch, parentId: string) {
  await until(async () => (await orchestrator.status(parentId)).state === 'waiting_for_subtask');
  const childId = (await orchestrator.status(parentId)).children[0]!.childTaskId;
  await until(async () => (await orchestrator.status(childId)).state === 'waiting_for_confirmation');
  return orchestrator.status(childId);
}
