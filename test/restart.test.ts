import { AGENT_MACHINE_VERSION } from '../machines/agentMachine.js';
import { describe, expect, it } from 'vitest';
import type { Booking, ReserveRoomInput } from '../tools/reserveRoom.js';
import { BookingService } from '../examples/booking/bookingService.js';
import { StoreUnavailableError, TaskQuarantinedError } from '../src/errors.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { SaveRequest, TaskStore } from '../src/store/taskStore.js';
import { BOOKING_SUCCESS, E17, byKind, harness, reserveArgs, until } from './support/harness.js';
import { paymentTool } from './support/paymentTool.js';
import { rawRows } from './support/rawRows.js';

const goal = 'book R7';
const bookScript = () => [
  reply.call('reserve_room', reserveArgs()),
  (v: { data: (t: string) => unknown }) =>
    reply.answer(`booked ${(v.data('reserve_room') as Booking | undefined)?.booking_id}`),
];

/** A booking service whose reservations never reach the real one until released: a crash before the effect. */
class StalledBookings extends BookingService {
  override async reserve(
    _request: ReserveRoomInput & { requesterId: string; idempotencyKey: string },
    signal: AbortSignal,
  ): Promise<never> {
    this.reserveRequests.push({ idempotencyKey: 'stalled', roomId: 'stalled' });
    return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
  }
}

describe('restart in the middle of a write', () => {
  it('reconciles by idempotency key instead of writing again when the effect already happened', async () => {
    const store = new MemoryStore();
    const bookings = new BookingService();
    bookings.faults.loseNextReserveResponse = true;
    const first = harness({ store, bookings, script: bookScript(), timeouts: { reserve: 60_000 } });
    await first.orchestrator.start({ principal: E17, goal, success: BOOKING_SUCCESS, taskId: 't1' });
    await until(() => bookings.bookings.length === 1);
    expect((await store.load('t1'))?.summary.stateValue).toBe('executing.writing');
    await first.orchestrator.close(); // the process dies with the write in flight

    const second = harness({ store, bookings, script: bookScript() });
    await second.orchestrator.resume('t1');
    const status = await second.orchestrator.settled('t1');
    expect(status.state).toBe('done');
    expect(status.outcome?.answer).toBe('booked B204');
    expect(bookings.bookings.map((b) => b.bookingId)).toEqual(['B204']);
    expect(bookings.reserveRequests).toHaveLength(1);
    const audit = await second.orchestrator.audit('t1');
    expect(byKind(audit, 'tool_finished').map((e) => e.code)).toEqual(['interrupted']);
    expect(byKind(audit, 'write_lookup').map((e) => e.result)).toEqual(['found']);
    expect(byKind(audit, 'tool_started')).toHaveLength(1);
  });

  it('retries with the same key only after a lookup shows the write never happened', async () => {
    const store = new MemoryStore();
    const real = new BookingService();
    const stalled = new StalledBookings();
    const first = harness({ store, bookings: stalled, script: bookScript(), timeouts: { reserve: 60_000 } });
    await first.orchestrator.start({ principal: E17, goal, success: BOOKING_SUCCESS, taskId: 't2' });
    await until(() => stalled.reserveRequests.length === 1);
    const intent = (await store.load('t2'))!.snapshot.context.batch!.calls[0]!;
    expect(intent).toMatchObject({ phase: 'writing', idempotencyKey: expect.stringMatching(/^idem_/) });
    await first.orchestrator.close();

    const second = harness({ store, bookings: real, script: bookScript() });
    await second.orchestrator.resume('t2');
    const status = await second.orchestrator.settled('t2');
    expect(status.state).toBe('done');
    expect(real.bookings).toHaveLength(1);
    expect(real.reserveRequests.map((r) => r.idempotencyKey)).toEqual([intent.idempotencyKey]);
    const audit = await second.orchestrator.audit('t2');
    expect(byKind(audit, 'write_lookup').map((e) => e.result)).toEqual(['not_found']);
    expect(byKind(audit, 'tool_started').map((e) => [e.attempt, e.idempotencyKey])).toEqual([
      [1, intent.idempotencyKey],
      [2, intent.idempotencyKey],
    ]);
  });

  it('waits for a reviewer when the write is not found and same-key retry is not declared safe', async () => {
    const sent: string[] = [];
    const unsafe = paymentTool({ sent, timeoutMs: 60_000, hang: () => true, sameKeyRetrySafe: false });
    const store = new MemoryStore();
    const script = [
      reply.calls(
        { name: 'send_payment', args: { amount: 5 }, callId: 'p' },
        {
          name: 'find_available_rooms',
          args: {
            start_at: '2026-09-28T14:00:00+08:00',
            end_at: '2026-09-28T15:00:00+08:00',
            attendees: 1,
            needs_projector: false,
          },
          callId: 'q',
        },
      ),
    ];
    const first = harness({ store, script, extraTools: [unsafe] });
    await first.orchestrator.start({ principal: E17, goal: 'pay', taskId: 't3' });
    await until(() => sent.length === 1);
    await first.orchestrator.close();
    const second = harness({ store, script, extraTools: [unsafe] });
    await second.orchestrator.resume('t3');
    const status = await second.orchestrator.settled('t3');
    expect(status.state).toBe('review_required');
    expect(status.outcome).toBeNull();
    expect(status.review).toMatchObject({
      callId: 'p',
      tool: 'send_payment',
      reason: 'write_outcome_unknown',
      idempotencyKey: sent[0],
    });
    expect(sent).toHaveLength(1);
    // Nothing of the batch went on: the held write has no result yet, and the read after it has not run.
    expect(status.observations).toEqual([]);
    expect((await second.orchestrator.list({ states: ['review_required'] })).map((t) => t.taskId)).toEqual(['t3']);
  });

  it('re-asks the model for a turn that was in flight (its response was never persisted)', async () => {
    const store = new MemoryStore();
    let calls = 0;
    const stuck: AgentModel = {
      name: 'stuck',
      decide: ({ signal }) =>
        new Promise((_, reject) => {
          calls += 1;
          signal.addEventListener('abort', () => reject(signal.reason), { once: true });
        }),
    };
    const first = harness({ store, model: stuck });
    await first.orchestrator.start({ principal: E17, goal: 'hello', taskId: 't4' });
    await until(() => calls === 1);
    await first.orchestrator.close();
    const model = scriptedModel([reply.answer('hi')]);
    const second = harness({ store, model });
    await second.orchestrator.resume('t4');
    const status = await second.orchestrator.settled('t4');
    expect(status.state).toBe('answered');
    expect(model.requests.map((r) => r.turn)).toEqual([1]);
    // The turn was debited once, before the first call; the restart did not debit it again.
    expect(status.budget.used.modelTurns).toBe(1);
  });
});

describe('stored tasks that cannot be restored', () => {
  async function storedTask(store: MemoryStore, taskId: string) {
    const h = harness({
      store,
      script: [reply.call('refund_order', { order_id: 'O-1001', amount_cents: 99_900, reason: 'x' })],
    });
    await h.orchestrator.run({
      principal: { userId: 'E17', tenantId: 'acme', scopes: ['refunds:write'] },
      goal: 'refund',
      taskId,
    });
    await h.orchestrator.close();
  }

  it.each([
    ['corrupted JSON', (text: string) => text.slice(0, text.length / 2), /not JSON/],
    ['a wrong type', (text: string) => text.replace('"turn":1', '"turn":"one"'), /context\.turn/],
    [
      'a state that no longer exists',
      (text: string) => text.replace('"awaitingConfirmation"', '"awaitingApproval"'),
      /does not exist/,
    ],
    [
      'an unknown machine version',
      (text: string) => text.replace(`"${AGENT_MACHINE_VERSION}"`, '"agent/99"'),
      /machine version "agent\/99" is not supported/,
    ],
    ['another task’s envelope', (text: string) => text.replaceAll('"bad"', '"other"'), /belongs to task "other"/],
  ])(
    'quarantines a task with %s, with a clear reason, and leaves other tasks alone',
    async (_label, corrupt, reason) => {
      const store = new MemoryStore();
      await storedTask(store, 'bad');
      await storedTask(store, 'good');
      const row = rawRows(store).get('bad')!;
      row.envelope = corrupt(row.envelope);
      const h = harness({ store });
      await expect(h.orchestrator.resume('bad')).rejects.toThrow(TaskQuarantinedError);
      await expect(h.orchestrator.resume('bad')).rejects.toThrow(reason);
      expect(await store.quarantined('bad')).toMatch(reason);
      const good = await h.orchestrator.resume('good');
      expect(good.state).toBe('waiting_for_confirmation');
    },
  );
});

/** A store whose saves fail while `down` is set. */
class FlakyStore implements TaskStore {
  readonly kind = 'flaky';
  down = false;
  failures = 0;
  constructor(private readonly inner: MemoryStore) {}
  async save(request: SaveRequest) {
    if (this.down) {
      this.failures += 1;
      throw new StoreUnavailableError('connection refused');
    }
    return this.inner.save(request);
  }
  load = (id: string) => this.inner.load(id);
  list = (q?: Parameters<MemoryStore['list']>[0]) => this.inner.list(q);
  readJournal = (...a: Parameters<MemoryStore['readJournal']>) => this.inner.readJournal(...a);
  quarantine = (id: string, r: string) => this.inner.quarantine(id, r);
  quarantined = (id: string) => this.inner.quarantined(id);
  close = () => this.inner.close();
}

describe('when the store goes away', () => {
  it('starts no write until the intent is saved, and loses nothing acknowledged', async () => {
    const inner = new MemoryStore();
    const store = new FlakyStore(inner);
    const search = {
      start_at: '2026-09-28T14:00:00+08:00',
      end_at: '2026-09-28T15:00:00+08:00',
      attendees: 3,
      needs_projector: true,
    };
    const h = harness({
      store,
      saveRetries: 2,
      script: [
        reply.call('find_available_rooms', search),
        () => reply.call('reserve_room', reserveArgs()),
        reply.answer('booked'),
      ],
    });
    const started = await h.orchestrator.start({ principal: E17, goal, taskId: 't5' });
    expect(started.revision).toBe(1);
    store.down = true;
    await expect(h.orchestrator.settled('t5')).rejects.toThrow(/unavailable/);
    expect(store.failures).toBeGreaterThan(1);
    expect(h.bookings.reserveRequests).toEqual([]);
    // Whatever was acknowledged is intact; a new process resumes from it once the store is back.
    store.down = false;
    const stored = await inner.load('t5');
    expect(stored?.revision).toBeGreaterThanOrEqual(1);
    const again = harness({
      store: inner,
      bookings: h.bookings,
      script: [
        reply.call('find_available_rooms', {
          start_at: '2026-09-28T14:00:00+08:00',
          end_at: '2026-09-28T15:00:00+08:00',
          attendees: 3,
          needs_projector: true,
        }),
        () => reply.call('reserve_room', reserveArgs()),
        reply.answer('booked'),
      ],
    });
    await again.orchestrator.resume('t5');
    const status = await again.orchestrator.settled('t5');
    expect(status.state).toBe('answered');
    expect(h.bookings.bookings).toHaveLength(1);
  });
});

describe('cancel', () => {
  it('lets a write in flight settle (reconciled) before the task ends as cancelled', async () => {
    const bookings = new BookingService();
    bookings.faults.loseNextReserveResponse = true;
    const h = harness({ bookings, script: bookScript(), timeouts: { reserve: 100 } });
    await h.orchestrator.start({ principal: E17, goal, taskId: 't6' });
    await until(() => bookings.bookings.length === 1);
    const result = await h.orchestrator.cancel('t6', E17, 'changed my mind');
    expect(result).toMatchObject({ accepted: true, message: expect.stringContaining('once the write in flight') });
    const status = await h.orchestrator.settled('t6');
    expect(status.state).toBe('cancelled');
    // The booking exists and the trajectory says so: cancelling did not pretend it away.
    expect(status.observations[0]).toMatchObject({ ok: true, data: expect.objectContaining({ booking_id: 'B204' }) });
    const audit = await h.orchestrator.audit('t6');
    expect(byKind(audit, 'write_lookup').map((e) => e.result)).toEqual(['found']);
  });

  it('refuses a cancel from another user of the tenant', async () => {
    const h = harness({ script: [reply.ask('which room?')] });
    const status = await h.orchestrator.run({ principal: E17, goal });
    const result = await h.orchestrator.cancel(status.taskId, { ...E17, userId: 'E99' });
    expect(result).toMatchObject({ accepted: false, code: 'wrong_user' });
  });
});

describe('model failures', () => {
  it('fails with model_unavailable when the scripted model runs out of script', async () => {
    const h = harness({
      script: [
        reply.call('find_available_rooms', {
          start_at: '2026-09-28T14:00:00+08:00',
          end_at: '2026-09-28T15:00:00+08:00',
          attendees: 3,
          needs_projector: true,
        }),
      ],
    });
    const status = await h.orchestrator.run({ principal: E17, goal });
    expect(status.state).toBe('failed');
    expect(status.outcome?.reason).toMatchObject({
      code: 'model_unavailable',
      message: expect.stringContaining('turn 2'),
    });
  });

  it('asks the user and continues with the answer', async () => {
    const model = scriptedModel([reply.ask('How many people?'), reply.answer('noted')]);
    const h = harness({ model });
    const waiting = await h.orchestrator.run({ principal: E17, goal: 'book' });
    expect(waiting).toMatchObject({ state: 'waiting_for_user', question: 'How many people?' });
    const wrong = await h.orchestrator.answer(waiting.taskId, { ...E17, userId: 'E99' }, '3');
    expect(wrong.accepted).toBe(false);
    const ok = await h.orchestrator.answer(waiting.taskId, E17, '3');
    expect(ok.accepted).toBe(true);
    expect((await h.orchestrator.settled(waiting.taskId)).state).toBe('answered');
    const transcript = await h.orchestrator.transcript(waiting.taskId);
    expect(transcript.map((e) => e.kind)).toEqual(['goal', 'question', 'user_answer', 'answer']);
  });
});

describe('memory', () => {
  it('keeps no task in memory that waits or has finished, even after events it refused', async () => {
    const h = harness({
      script: [
        reply.call('refund_order', { order_id: 'O-1001', amount_cents: 99_900, reason: 'x' }),
        reply.answer('x'),
      ],
    });
    const principal = { userId: 'E17', tenantId: 'acme', scopes: ['refunds:write'] };
    const waiting = await h.orchestrator.run({ principal, goal: 'refund', taskId: 'w' });
    await until(() => h.orchestrator.liveTasks === 0);
    await h.orchestrator.confirm('w', principal, { id: 'wrong', argsHash: 'x' });
    expect(h.orchestrator.liveTasks).toBe(0);
    await h.orchestrator.resume('w');
    expect(h.orchestrator.liveTasks).toBe(0);
    await h.orchestrator.reject('w', principal, { id: waiting.pendingConfirmation!.id });
    await h.orchestrator.settled('w');
    await until(() => h.orchestrator.liveTasks === 0);
    await h.orchestrator.cancel('w', principal);
    expect(h.orchestrator.liveTasks).toBe(0);
  });
});

/** Saves, then reports the store as unreachable for the chosen revisions: the reply of a save that landed is lost. */
class LostReplies extends MemoryStore {
  readonly loseReplyOf = new Set<number>();
  override async save(request: SaveRequest) {
    await super.save(request);
    if (this.loseReplyOf.delete(request.envelope.revision))
      throw new StoreUnavailableError('connection reset after send');
  }
}

describe('a save whose reply was lost', () => {
  it('is recognised as our own on retry, and the task goes on', async () => {
    const store = new LostReplies();
    store.loseReplyOf.add(2);
    const h = harness({ store, script: [reply.ask('which room?')] });
    const status = await h.orchestrator.run({ principal: E17, goal: 'book', taskId: 'lost-2' });
    expect(status.state).toBe('waiting_for_user');
    expect(store.loseReplyOf.size).toBe(0);
  });

  it('is recognised for the first save too (not reported as "task exists")', async () => {
    const store = new LostReplies();
    store.loseReplyOf.add(1);
    const h = harness({ store, script: [reply.ask('which room?')] });
    const status = await h.orchestrator.run({ principal: E17, goal: 'book', taskId: 'lost-1' });
    expect(status.state).toBe('waiting_for_user');
  });
});

describe('a task stopped while its save is being retried', () => {
  it('makes no further save attempt', async () => {
    class Outage extends MemoryStore {
      down = false;
      attempts = 0;
      override async save(request: SaveRequest) {
        if (this.down) {
          this.attempts += 1;
          throw new StoreUnavailableError('connection refused');
        }
        return super.save(request);
      }
    }
    const store = new Outage();
    const h = harness({ store, script: [reply.ask('which room?')], saveRetries: 50 });
    store.down = true;
    const started = h.orchestrator.start({ principal: E17, goal: 'g', taskId: 'stop-retry' }).catch((e: unknown) => e);
    await until(() => store.attempts >= 1);
    await h.orchestrator.close();
    await started;
    store.down = false;
    const attempts = store.attempts;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await store.load('stop-retry')).toBeNull();
    expect(store.attempts).toBe(attempts);
  });
});

describe('a task loaded only to read it or to refuse an event', () => {
  it('does not write a new revision when a task is only loaded to read it or to refuse an event', async () => {
    const h = harness({
      script: [reply.call('refund_order', { order_id: 'O-1001', amount_cents: 99_900, reason: 'x' })],
    });
    const principal = { userId: 'E17', tenantId: 'acme', scopes: ['refunds:write'] };
    const waiting = await h.orchestrator.run({ principal, goal: 'refund', taskId: 'quiet' });
    const revision = (await h.store.load('quiet'))!.revision;
    await h.orchestrator.resume('quiet');
    await h.orchestrator.confirm(
      'quiet',
      { ...principal, tenantId: 'other' },
      { id: waiting.pendingConfirmation!.id, argsHash: 'x' },
    );
    expect((await h.store.load('quiet'))!.revision).toBe(revision);
  });
});
