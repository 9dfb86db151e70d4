import { describe, expect, it } from 'vitest';
import type { AuditEntry } from '../machines/journal.js';
import { scenarios } from '../examples/booking/scenarios.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';

const run = (name: keyof typeof scenarios) => scenarios[name]({ store: new MemoryStore() });

function kinds<K extends AuditEntry['kind']>(audit: AuditEntry[], kind: K) {
  return audit.filter((e): e is Extract<AuditEntry, { kind: K }> => e.kind === kind);
}

describe('demo trajectories', () => {
  it('1. normal: R7 booked as B204, exactly one booking, success from the trusted receipt', async () => {
    const r = await run('normal');
    expect(r.status.state).toBe('done');
    expect(r.status.outcome?.reason.code).toBe('goal_met');
    expect(r.bookings.map((b) => [b.bookingId, b.roomId, b.requesterId])).toEqual([['B204', 'R7', 'E17']]);
    expect(r.status.evidence).toEqual([
      expect.objectContaining({ tool: 'reserve_room', fields: { status: 'confirmed', booking_id: 'B204' } }),
    ]);
    const writes = kinds(r.audit, 'tool_started').filter((e) => e.effect === 'write');
    expect(writes).toHaveLength(1);
    // The key is the host's (task + intent), never the model's call id.
    expect(writes[0]!.idempotencyKey).toMatch(/^idem_[0-9a-f]{40}$/);
    expect(writes[0]!.idempotencyKey).toBe(r.bookings[0]!.idempotencyKey);
    expect(writes[0]!.idempotencyKey).not.toContain(writes[0]!.callId);
    expect(kinds(r.audit, 'task_stopped')).toEqual([expect.objectContaining({ status: 'done' })]);
  });

  it('2. conflict: R7 taken between read and write, re-query, R9 booked as B205', async () => {
    const r = await run('conflict');
    expect(r.status.state).toBe('done');
    expect(r.bookings.map((b) => `${b.bookingId} ${b.roomId} ${b.requesterId}`)).toEqual([
      'B204 R7 E42',
      'B205 R9 E17',
    ]);
    const finished = kinds(r.audit, 'tool_finished').map((e) => `${e.tool}:${e.code}`);
    expect(finished).toEqual([
      'find_available_rooms:ok',
      'reserve_room:conflict',
      'find_available_rooms:ok',
      'reserve_room:ok',
    ]);
    // The conflict was an observation the model re-planned from, not a retry of the same write.
    const writes = kinds(r.audit, 'tool_started').filter((e) => e.effect === 'write');
    expect(writes.map((w) => (w.args as { room_id: string }).room_id)).toEqual(['R7', 'R9']);
    expect(new Set(writes.map((w) => w.idempotencyKey)).size).toBe(2);
    expect(r.status.evidence.at(-1)?.fields.booking_id).toBe('B205');
  });

  it('3. search timeout: one bounded retry, then "could not verify", nothing written', async () => {
    const r = await run('searchTimeout');
    expect(r.status.state).toBe('failed');
    expect(r.status.outcome?.reason.code).toBe('could_not_verify');
    expect(r.status.outcome?.reason.message).toMatch(/could not verify/);
    expect(r.bookings).toEqual([]);
    expect(r.reserveRequests).toBe(0);
    const search = kinds(r.audit, 'tool_finished');
    expect(search).toEqual([expect.objectContaining({ tool: 'find_available_rooms', code: 'timeout', attempts: 2 })]);
    expect(r.status.budget.used.retries).toBe(1);
    expect(kinds(r.audit, 'tool_started').filter((e) => e.effect === 'write')).toEqual([]);
  });

  it('4. lost response: reconciled by idempotency key, B204 reported, exactly one booking', async () => {
    const r = await run('lostResponse');
    expect(r.status.state).toBe('done');
    expect(r.bookings.map((b) => b.bookingId)).toEqual(['B204']);
    expect(r.reserveRequests).toBe(1);
    const write = kinds(r.audit, 'tool_finished').find((e) => e.tool === 'reserve_room');
    expect(write?.code).toBe('timeout');
    const lookups = kinds(r.audit, 'write_lookup');
    expect(lookups).toEqual([
      expect.objectContaining({ result: 'found', idempotencyKey: r.bookings[0]!.idempotencyKey }),
    ]);
    expect(r.status.outcome?.answer).toContain('B204');
    expect(r.status.evidence.at(-1)?.fields.booking_id).toBe('B204');
  });

  it('5. refused: an unauthorized room and six people in a room for four refused by the host, nothing written', async () => {
    const r = await run('refused');
    expect(r.status.state).toBe('failed');
    expect(r.bookings).toEqual([]);
    expect(r.reserveRequests).toBe(0);
    const rejections = kinds(r.audit, 'gate').filter((g) => g.decision === 'reject');
    expect(rejections.map((g) => [g.gate, g.code])).toEqual([
      ['permission', 'permission_denied'],
      ['business', 'capacity_exceeded'],
    ]);
    expect(kinds(r.audit, 'tool_started')).toEqual([]);
  });

  it('6. wrongDate: a booking outside the mandate is refused before anything runs; proposed again, the task stops', async () => {
    const r = await run('wrongDate');
    expect(r.status).toMatchObject({ state: 'failed', outcome: { reason: { code: 'outside_mandate' } } });
    expect(r.status.mandate).toMatchObject({ kind: 'room_booking', terms: { start_at: '2026-09-28T14:00:00+08:00' } });
    expect(r.bookings).toEqual([]);
    expect(r.reserveRequests).toBe(0);
    const mandate = kinds(r.audit, 'gate').filter((g) => g.gate === 'mandate' && g.tool === 'reserve_room');
    expect(mandate.map((g) => [g.decision, g.code])).toEqual([
      ['reject', 'outside_mandate'],
      ['stop', 'outside_mandate'],
    ]);
    // The model is told why, in the rule's own words: the slot it asked for is not the user's.
    expect(mandate[0]!.summary).toMatch(
      /2026-10-05T14:00:00\+08:00.*is not the slot the user asked for \(2026-09-28T14:00:00\+08:00/,
    );
    // Nothing of the write ran, nor its business validation (the mandate comes first).
    expect(kinds(r.audit, 'check_started').filter((c) => c.tool === 'reserve_room')).toEqual([]);
    expect(kinds(r.audit, 'tool_started').filter((e) => e.effect === 'write')).toEqual([]);
  });

  it('refund: 999.00 is outside the mandate and never asked for; 199.00 runs after E17 (not E99) confirms it', async () => {
    const r = await run('refund');
    expect(r.status.state).toBe('done');
    expect(r.refunds.map((x) => [x.refundId, x.amountCents])).toEqual([['TX-9001', 19_900]]);
    const mandate = kinds(r.audit, 'gate').filter((g) => g.gate === 'mandate' && g.tool === 'refund_order');
    expect(mandate.map((g) => [g.decision, g.code])).toEqual([
      ['reject', 'outside_mandate'],
      ['pass', null],
    ]);
    expect(mandate[0]!.summary).toContain('999.00 is more than the 199.00 the user asked to refund');
    const confirmations = kinds(r.audit, 'confirmation').map((c) => `${c.action}:${c.code ?? ''}`);
    expect(confirmations).toEqual(['requested:', 'refused:wrong_user', 'granted:']);
    // The money budget was the 199.00 asked for, and the refund spent it.
    expect(r.status.budget.used.money).toBe(19_900);
    expect(r.status.budget.limits.money).toBe(19_900);
    const writes = kinds(r.audit, 'tool_started').filter((e) => e.effect === 'write');
    expect(writes).toHaveLength(1);
    expect((writes[0]!.args as { amount_cents: number }).amount_cents).toBe(19_900);
    // The write ran under the confirmation granted for exactly its arguments.
    const granted = kinds(r.audit, 'confirmation').find((c) => c.action === 'granted')!;
    expect(writes[0]!.confirmationId).toBe(granted.confirmationId);
    expect(writes[0]!.argsHash).toBe(granted.argsHash);
    expect(writes[0]!.money).toBe(19_900);
    expect(r.steps.join('\n')).toContain("E99 confirms on E17's behalf → refused: wrong_user");
  });
});

describe('the refund scenario with another model', () => {
  it('reports the confirmation flow it saw when the model proposes 199.00 at once', async () => {
    const direct = () =>
      scriptedModel([
        reply.call('get_order', { order_id: 'O-1001' }),
        reply.call('refund_order', { order_id: 'O-1001', amount_cents: 19_900, reason: 'projector arrived broken' }),
        reply.answer('Refunded 199.00.'),
      ]);
    const r = await scenarios.refund({ store: new MemoryStore(), model: direct });
    expect(r.status).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } } });
    expect(r.steps).toEqual([
      'waiting for confirmation: Refund 199.00 on order O-1001 (projector arrived broken)',
      "E99 confirms on E17's behalf → refused: wrong_user",
      'E17 confirms exactly that → accepted',
    ]);
    expect(r.refunds.map((x) => x.amountCents)).toEqual([19_900]);
  });

  it('rejects every other amount the mandate allows, and stops asking after a few rounds', async () => {
    const stubborn = () =>
      scriptedModel(
        Array.from({ length: 8 }, (_, i) =>
          i === 0
            ? reply.call('get_order', { order_id: 'O-1001' })
            : reply.call('refund_order', { order_id: 'O-1001', amount_cents: 10_100 + i, reason: 'per note' }),
        ),
      );
    const r = await scenarios.refund({ store: new MemoryStore(), model: stubborn });
    expect(r.refunds).toEqual([]);
    expect(r.steps.filter((s) => s.startsWith('E17 rejects'))).not.toHaveLength(0);
    expect(r.steps.some((s) => s.includes('confirms exactly that'))).toBe(false);
  });

  it('never asks anyone about amounts outside the mandate: the task stops when the model insists', async () => {
    const greedy = () =>
      scriptedModel([
        reply.call('get_order', { order_id: 'O-1001' }),
        ...Array.from({ length: 4 }, () =>
          reply.call('refund_order', { order_id: 'O-1001', amount_cents: 99_900, reason: 'per note' }),
        ),
      ]);
    const r = await scenarios.refund({ store: new MemoryStore(), model: greedy });
    expect(r.status).toMatchObject({ state: 'failed', outcome: { reason: { code: 'outside_mandate' } } });
    expect(r.steps).toEqual([]);
    expect(kinds(r.audit, 'confirmation')).toEqual([]);
  });
});
