/**
 * A task stored by an older build, waiting for a confirmation, runs under the tool rules of this build once
 * confirmed: the amount a write moves and the approvers it needs are asked again, whatever the old envelope held
 * (an agent/3 task has an unbounded money budget and knew no approvers). Migration of the envelopes themselves is
 * fixtures.test.ts's.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../machines/context.js';
import { DEMO_NOW } from '../examples/booking/bookingService.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { refundScript } from '../examples/booking/scenarios.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { ManualClock } from '../src/testing/index.js';
import { rawRows } from './support/rawRows.js';
import { SUPPORT, harness } from './support/harness.js';

const M1: Principal = { userId: 'M1', tenantId: 'acme', scopes: ['refunds:approve'] };

/** A MemoryStore holding an agent/3 fixture exactly as an agent/3 build stored it. */
function agent3Store(name: string): { store: MemoryStore; taskId: string } {
  const fixture = JSON.parse(
    readFileSync(join(import.meta.dirname, 'fixtures', 'envelopes', 'agent-3', `${name}.json`), 'utf8'),
  );
  const store = new MemoryStore();
  rawRows(store).set(fixture.envelope.taskId, {
    envelope: JSON.stringify(fixture.envelope),
    revision: fixture.envelope.revision,
    summary: fixture.envelope.summary,
    audit: fixture.audit.map((e: unknown) => JSON.stringify(e)),
    transcript: fixture.transcript.map((e: unknown) => JSON.stringify(e)),
  });
  return { store, taskId: fixture.envelope.taskId };
}

describe('a pending confirmation of an agent/3 task', () => {
  it("runs no write whose amount is unknown, though the task's money budget is unbounded", async () => {
    const { store, taskId } = agent3Store('waiting-for-confirmation');
    const refunds = new RefundDesk();
    const h = harness({ store, refunds, script: refundScript(), clock: new ManualClock(DEMO_NOW) });
    Object.assign(
      h.tools.find((t) => t.name === 'refund_order')!,
      {
        amount: () => {
          throw new Error('amount service down');
        },
      },
    );
    const waiting = await h.orchestrator.status(taskId);
    await h.orchestrator.confirm(taskId, SUPPORT, waiting.pendingConfirmation!);
    await h.orchestrator.settled(taskId);
    // The refund's amount cannot be established: nothing moves, the unbounded budget notwithstanding.
    expect(refunds.refunds).toEqual([]);
  });

  it("asks for an approver when the tool now wants one; the requester's confirmation alone runs nothing", async () => {
    const { store, taskId } = agent3Store('waiting-for-confirmation');
    const refunds = new RefundDesk();
    const h = harness({
      store,
      refunds,
      script: refundScript(),
      clock: new ManualClock(DEMO_NOW),
      refundOptions: { approveAboveCents: 10_000 },
    });
    const waiting = await h.orchestrator.status(taskId);
    expect((await h.orchestrator.confirm(taskId, SUPPORT, waiting.pendingConfirmation!)).accepted).toBe(true);
    const next = await h.orchestrator.settled(taskId);
    expect(next.pendingConfirmation).toMatchObject({ approverScope: 'refunds:approve', request: 2 });
    expect(refunds.refunds).toEqual([]);
    expect((await h.orchestrator.confirm(taskId, SUPPORT, next.pendingConfirmation!)).code).toBe('self_approval');
    expect((await h.orchestrator.confirm(taskId, M1, next.pendingConfirmation!)).accepted).toBe(true);
    await h.orchestrator.settled(taskId);
    expect(refunds.refunds.map((r) => r.amountCents)).toEqual([99_900]);
  });
});
