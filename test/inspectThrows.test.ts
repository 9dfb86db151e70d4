/**
 * A host's inspection observer that throws (the `inspect` option, or one added later on the actor's system) is the
 * host's bug, not the task's: XState calls observers without a guard, so a throw there would escape from the middle
 * of a transition and leave the task's actor stuck. The task runs on as it would without the observer, and each
 * throw is reported to the logger.
 */
import { describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import { reply } from '../src/testing/scriptedModel.js';
import { REFUND_GOAL, REFUND_MANDATE, REFUND_SUCCESS, SUPPORT, harness } from './support/harness.js';

const script = [
  reply.call('get_order', { order_id: 'O-1001' }),
  reply.call('refund_order', { order_id: 'O-1001', amount_cents: 19_900, reason: 'projector arrived broken' }),
  reply.answer('Refunded 199.00.'),
];

async function refund(inspect?: (event: InspectionEvent) => void) {
  const warnings: Record<string, unknown>[] = [];
  const { orchestrator, refunds } = harness({
    script,
    inspect,
    logger: { warn: (fields) => warnings.push(fields as Record<string, unknown>), error() {} },
  });
  const task = { principal: SUPPORT, goal: REFUND_GOAL, success: REFUND_SUCCESS, mandate: REFUND_MANDATE };
  let status = await orchestrator.run({ ...task, taskId: 'inspected' });
  expect(status.state).toBe('waiting_for_confirmation');
  const pending = status.pendingConfirmation!;
  await orchestrator.confirm('inspected', SUPPORT, { id: pending.id, argsHash: pending.argsHash });
  status = await orchestrator.settled('inspected');
  const audit = (await orchestrator.audit('inspected')).map((entry) => entry.kind);
  await orchestrator.close();
  return { status, audit, refunds, warnings };
}

describe('an inspection observer that throws', () => {
  it('leaves the task as it is without one, and is reported', async () => {
    const plain = await refund();
    expect(plain.status.state).toBe('done');

    let seen = 0;
    const thrown = await refund(() => {
      seen += 1;
      throw new Error('inspector bug');
    });
    expect(seen).toBeGreaterThan(10);
    expect(thrown.status.state).toBe('done');
    expect(thrown.status.outcome).toEqual(plain.status.outcome);
    expect(thrown.status.evidence).toEqual(plain.status.evidence);
    expect(thrown.audit).toEqual(plain.audit);
    expect(thrown.refunds.refunds.length).toBe(1);
    expect(thrown.refunds.refunds.map((r) => r.amountCents)).toEqual(plain.refunds.refunds.map((r) => r.amountCents));
    expect(thrown.warnings.length).toBeGreaterThan(0);
    expect(String(thrown.warnings[0]!.err)).toContain('inspector bug');
  });

  it('also when it throws only now and then', async () => {
    const plain = await refund();
    let seen = 0;
    const thrown = await refund(() => {
      seen += 1;
      if (seen % 7 === 3) throw new TypeError('every seventh');
    });
    expect(thrown.status.state).toBe('done');
    expect(thrown.audit).toEqual(plain.audit);
  });
});
