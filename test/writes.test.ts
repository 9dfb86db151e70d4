/**
 * Writes: one business intent, one write. A write is never sent twice with one idempotency key without a lookup in
 * between, never after the task was cancelled, and never again once its intent succeeded in the task.
 */
import { describe, expect, it } from 'vitest';
import { reply } from '../src/testing/scriptedModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { SaveRequest } from '../src/store/taskStore.js';
import { E17, byKind, harness, reserveArgs, until } from './support/harness.js';
import { paymentTool } from './support/paymentTool.js';

describe('a write that timed out', () => {
  it('a write not declared sameKeyRetrySafe is never sent twice with one key without a lookup', async () => {
    const sent: string[] = [];
    const h = harness({
      extraTools: [paymentTool({ sent, timeoutMs: 50 })],
      script: [
        reply.call('send_payment', { amount: 5 }),
        reply.call('send_payment', { amount: 5 }),
        reply.answer('paid'),
      ],
    });
    const status = await h.orchestrator.run({ principal: E17, goal: 'pay', taskId: 'dup' });
    // The second proposal is the same business intent (same key): refused, not sent, and nothing to look up.
    expect(sent).toHaveLength(1);
    expect(byKind(await h.orchestrator.audit('dup'), 'write_lookup')).toEqual([]);
    expect(status.observations).toEqual([expect.objectContaining({ ok: false, code: 'duplicate_write' })]);
  });

  it('no write is sent after the task was cancelled', async () => {
    const sent: string[] = [];
    const payment = paymentTool({ sent, timeoutMs: 50, hang: (n) => n === 1, sameKeyRetrySafe: true });
    const h = harness({ extraTools: [payment], script: [reply.call('send_payment', { amount: 5 })] });
    await h.orchestrator.start({ principal: E17, goal: 'pay', taskId: 'cx' });
    await until(() => sent.length === 1);
    await h.orchestrator.cancel('cx', E17, 'stop');
    expect((await h.orchestrator.settled('cx')).state).toBe('cancelled');
    // The timed-out write is looked up and not found; after the cancel it is not sent again with the same key.
    expect(sent).toHaveLength(1);
  });
});

describe('one business intent, one write', () => {
  it('refuses a second proposal of a write that already succeeded, even for a retry-safe tool', async () => {
    const h = harness({
      script: [
        reply.call('reserve_room', reserveArgs()),
        reply.call('reserve_room', reserveArgs()),
        reply.answer('booked'),
      ],
    });
    const status = await h.orchestrator.run({ principal: E17, goal: 'book', taskId: 'twice' });
    expect(h.bookings.reserveRequests).toHaveLength(1);
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'duplicate_write', gate: 'loop' });
    // No success criterion: answered, listing the one booking as its evidence.
    expect(status.state).toBe('answered');
    expect(status.outcome?.evidence).toEqual([
      expect.objectContaining({ tool: 'reserve_room', fields: expect.objectContaining({ booking_id: 'B204' }) }),
    ]);
  });

  it('runs the same arguments again after a business failure (nothing was written)', async () => {
    const h = harness({
      script: [
        reply.call('reserve_room', reserveArgs({ expected_version: 16 })),
        reply.call('reserve_room', reserveArgs({ expected_version: 16 })),
        reply.answer('x'),
      ],
    });
    await h.orchestrator.run({ principal: E17, goal: 'book', taskId: 'conflicted' });
    expect(h.bookings.reserveRequests).toHaveLength(2);
    expect(h.bookings.bookings).toEqual([]);
  });
});

describe('cancel while a write waits for its intent to be saved', () => {
  it('does not send the write', async () => {
    class SlowWrites extends MemoryStore {
      gate: Promise<void> | null = null;
      release!: () => void;
      override async save(request: SaveRequest) {
        if (request.envelope.summary.stateValue === 'executing.writing' && !this.gate) {
          this.gate = new Promise((resolve) => (this.release = resolve));
          await this.gate;
        }
        return super.save(request);
      }
    }
    const store = new SlowWrites();
    const h = harness({ store, script: [reply.call('reserve_room', reserveArgs()), reply.answer('x')] });
    await h.orchestrator.start({ principal: E17, goal: 'book', taskId: 'cancel-early' });
    await until(() => store.gate !== null);
    const cancelled = h.orchestrator.cancel('cancel-early', E17, 'changed my mind');
    await new Promise((resolve) => setTimeout(resolve, 20));
    store.release();
    expect((await cancelled).accepted).toBe(true);
    const status = await h.orchestrator.settled('cancel-early');
    expect(status.state).toBe('cancelled');
    expect(h.bookings.reserveRequests).toEqual([]);
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'cancelled' });
  });
});
