/**
 * Writes: one business intent, one write. A write is never sent twice with one idempotency key without a lookup in
 * between, never after the task was cancelled, and never again once its intent succeeded in the task.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { reply } from '../src/testing/scriptedModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { SaveRequest } from '../src/store/taskStore.js';
import { defineTool } from '../src/tool.js';
import { E17, byKind, harness, reserveArgs, until } from './support/harness.js';

describe('a write that timed out', () => {
  function payment(sent: string[], options: { hangFirst?: boolean; sameKeyRetrySafe?: boolean } = {}) {
    return defineTool({
      name: 'send_payment',
      description: 'Sends a payment.',
      effect: 'write',
      scopes: [],
      timeoutMs: 50,
      sameKeyRetrySafe: options.sameKeyRetrySafe ?? false,
      input: z.strictObject({ amount: z.number() }),
      output: z.strictObject({ status: z.literal('sent') }),
      execute: async (_args, ctx) => {
        sent.push(ctx.idempotencyKey);
        if (options.hangFirst && sent.length === 1) {
          return new Promise<never>((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
        }
        return { ok: true, value: { status: 'sent' as const } };
      },
      lookup: async () => ({ found: false as const }),
    });
  }

  it('a write not declared sameKeyRetrySafe is never sent twice with one key without a lookup', async () => {
    const sent: string[] = [];
    const h = harness({
      extraTools: [payment(sent)],
      script: [reply.call('send_payment', { amount: 5 }), reply.call('send_payment', { amount: 5 }), reply.answer('paid')],
    });
    await h.orchestrator.run({ principal: E17, goal: 'pay', taskId: 'dup' });
    const lookups = byKind(await h.orchestrator.audit('dup'), 'write_lookup');
    // Today: sent twice with the same key, and no lookup in between.
    expect(sent.length === 1 || lookups.length > 0).toBe(true);
  });

  it('no write is sent after the task was cancelled', async () => {
    const sent: string[] = [];
    const h = harness({ extraTools: [payment(sent, { hangFirst: true, sameKeyRetrySafe: true })], script: [reply.call('send_payment', { amount: 5 })] });
    await h.orchestrator.start({ principal: E17, goal: 'pay', taskId: 'cx' });
    await until(() => sent.length === 1);
    await h.orchestrator.cancel('cx', E17, 'stop');
    expect((await h.orchestrator.settled('cx')).state).toBe('cancelled');
    // Today: the timed-out write is looked up, not found, and sent again with the same key after the cancel.
    expect(sent).toHaveLength(1);
  });
});

describe('one business intent, one write', () => {
  it('refuses a second proposal of a write that already succeeded, even for a retry-safe tool', async () => {
    const h = harness({ script: [reply.call('reserve_room', reserveArgs()), reply.call('reserve_room', reserveArgs()), reply.answer('booked')] });
    const status = await h.orchestrator.run({ principal: E17, goal: 'book', taskId: 'twice' });
    expect(h.bookings.reserveRequests).toHaveLength(1);
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'duplicate_write', gate: 'loop' });
    expect(status.state).toBe('done');
  });

  it('runs the same arguments again after a business failure (nothing was written)', async () => {
    const h = harness({
      script: [reply.call('reserve_room', reserveArgs({ expected_version: 16 })), reply.call('reserve_room', reserveArgs({ expected_version: 16 })), reply.answer('x')],
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
