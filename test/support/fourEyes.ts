/** The demo's refund behind a four-eyes rule (an approver holding refunds:approve decides), for the service tests. */
import { RefundDesk } from '../../examples/booking/refundService.js';
import { refundScript } from '../../examples/booking/refundScenario.js';
import { MemoryStore, type OrchestratorOptions, createOrchestrator } from '../../src/index.js';
import { scriptedModel } from '../../src/testing/index.js';
import { getOrder } from '../../tools/getOrder.js';
import { refundMandate } from '../../tools/mandates.js';
import { refundDeskAuthority, refundOrder } from '../../tools/refundOrder.js';

export function fourEyesOrchestrator(options: { inspect?: OrchestratorOptions['inspect'] } = {}) {
  const desk = new RefundDesk();
  const orchestrator = createOrchestrator({
    tools: [getOrder(desk), refundOrder(desk, { confirmAboveCents: 10_000, approveAboveCents: 10_000 })],
    loosen: refundDeskAuthority,
    mandates: [refundMandate],
    model: scriptedModel(refundScript()),
    store: new MemoryStore(),
    expirySweepMs: 0,
    ...(options.inspect ? { inspect: options.inspect } : {}),
  });
  return { orchestrator, desk };
}
