/**
 * Regression tests for defects found in review (fixed), and `it.fails` tests that pin down defects that are
 * described but not fixed yet: each of those passes while the defect exists and starts failing once it is fixed.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { HostRequestError, StoreUnavailableError, TaskExistsError } from '../src/errors.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { reply } from '../src/testing/scriptedModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { SaveRequest } from '../src/store/taskStore.js';
import { defineTool } from '../src/tool.js';
import { E17, byKind, harness, reserveArgs, until } from './support/harness.js';

/** Saves, then reports the store as unreachable for the chosen revisions: the reply of a save that landed is lost. */
class LostReplies extends MemoryStore {
  readonly loseReplyOf = new Set<number>();
  override async save(request: SaveRequest) {
    await super.save(request);
    if (this.loseReplyOf.delete(request.envelope.revision)) throw new StoreUnavailableError('connection reset after send');
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

describe('start', () => {
  it('reports a store that cannot be read as unavailable, not as an existing task', async () => {
    class DownOnLoad extends MemoryStore {
      override async load(): Promise<never> {
        throw new StoreUnavailableError('connection refused');
      }
    }
    const h = harness({ store: new DownOnLoad() });
    const error = await h.orchestrator.start({ principal: E17, goal: 'book', taskId: 's1' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(error).not.toBeInstanceOf(TaskExistsError);
  });

  it('refuses a success criterion or task id the store could not read back', async () => {
    const h = harness({ script: [reply.ask('q?')] });
    const badSuccess = { tool: 'reserve_room', match: { status: ['confirmed'] } } as never;
    await expect(h.orchestrator.start({ principal: E17, goal: 'g', success: badSuccess })).rejects.toThrow(HostRequestError);
    await expect(h.orchestrator.start({ principal: E17, goal: 'g', taskId: '' })).rejects.toThrow(HostRequestError);
    expect(h.orchestrator.liveTasks).toBe(0);
  });
});

describe('model usage that is not a finite number', () => {
  it('is charged as the reservation, so budgets stay enforced and the task stays restorable', async () => {
    let turn = 0;
    const model: AgentModel = {
      name: 'nan-usage',
      reservation: { tokens: 1_000, costMicros: 0 },
      decide: async () => {
        turn += 1;
        return turn === 1
          ? { type: 'ask_user', question: 'which room?', usage: { inputTokens: Number.NaN, outputTokens: 5 } }
          : { type: 'answer', text: 'done' };
      },
    };
    const store = new MemoryStore();
    const h = harness({ model, store });
    const status = await h.orchestrator.run({ principal: E17, goal: 'g', taskId: 'nan' });
    expect(Number.isFinite(status.budget.used.tokens)).toBe(true);
    expect(status.budget.used.tokens).toBeGreaterThanOrEqual(1_000);
    const again = harness({ model, store });
    expect((await again.orchestrator.status('nan')).budget.used.tokens).toBe(status.budget.used.tokens);
  });
});

describe('an input schema that transforms its arguments', () => {
  it('is refused at the schema gate instead of running arguments other than the confirmed ones', async () => {
    const executed: number[] = [];
    const refundCents = defineTool({
      name: 'refund_cents',
      description: 'Refunds an amount given in whole units.',
      effect: 'write',
      scopes: [],
      timeoutMs: 100,
      sameKeyRetrySafe: true,
      input: z.strictObject({ amount: z.number().transform((units) => units * 100) }),
      output: z.strictObject({ ok: z.boolean() }),
      confirm: 'always',
      describeConfirmation: (args) => `refund ${args.amount} cents`,
      execute: async (args) => {
        executed.push(args.amount);
        return { ok: true, value: { ok: true } };
      },
      lookup: async () => ({ found: false as const }),
    });
    const h = harness({ extraTools: [refundCents], script: [reply.call('refund_cents', { amount: 2 }), reply.answer('x')] });
    const status = await h.orchestrator.run({ principal: E17, goal: 'refund', taskId: 'tx' });
    expect(status.pendingConfirmation).toBeNull();
    expect(executed).toEqual([]);
    const audit = await h.orchestrator.audit('tx');
    expect(byKind(audit, 'gate').find((g) => g.gate === 'schema' && g.decision === 'reject')?.code).toBe('invalid_arguments');
  });
});

describe('defects found in review, now fixed', () => {
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
    const h = harness({ store, script: [reply.ask('which room?')] });
    (h.orchestrator as unknown as { options: { saveRetries: number } }).options.saveRetries = 50;
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

describe('createOrchestrator', () => {
  it('refuses a policy that would be persisted unreadable or make every confirmation invalid', () => {
    expect(() => harness({ policy: { version: '' } })).toThrow(HostRequestError);
    expect(() => harness({ policy: { confirmationTtlMs: Number.NaN } })).toThrow(HostRequestError);
    expect(() => harness({ policy: { maxConfirmationRequests: -1 } })).toThrow(HostRequestError);
    expect(() => harness({ policy: { maxCallsPerBatch: 2 } })).not.toThrow();
  });
});

describe('a confirmation rule that does not return a plain boolean', () => {
  const payment = (confirm: unknown, sent: number[]) =>
    defineTool({
      name: 'send_payment',
      description: 'Sends a payment.',
      effect: 'write',
      scopes: [],
      timeoutMs: 100,
      sameKeyRetrySafe: true,
      input: z.strictObject({ amount: z.number() }),
      output: z.strictObject({ status: z.literal('sent') }),
      confirm: confirm as never,
      execute: async (args) => {
        sent.push(args.amount);
        return { ok: true, value: { status: 'sent' as const } };
      },
      lookup: async () => ({ found: false as const }),
    });

  for (const [name, rule] of [
    ['an async rule', async () => true],
    ['a truthy non-boolean', () => 1],
  ] as const) {
    it(`fails closed: ${name} asks for confirmation`, async () => {
      const sent: number[] = [];
      const h = harness({ extraTools: [payment(rule, sent)], script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')] });
      const status = await h.orchestrator.run({ principal: E17, goal: 'pay', taskId: 'rule' });
      expect(status.state).toBe('waiting_for_confirmation');
      expect(sent).toEqual([]);
    });
  }

  it('an unknown rule name is refused by defineTool', () => {
    expect(() => payment('Always', [])).toThrow(/confirm must be/);
  });
});

describe('a validation or authorization hook that does not return { ok: true }', () => {
  it('rejects the call instead of passing it on a truthy value', async () => {
    const sent: number[] = [];
    const tool = defineTool({
      name: 'send_payment',
      description: 'Sends a payment.',
      effect: 'write',
      scopes: [],
      timeoutMs: 100,
      sameKeyRetrySafe: true,
      input: z.strictObject({ amount: z.number() }),
      output: z.strictObject({ status: z.literal('sent') }),
      authorize: (() => ({ ok: 'no' })) as never,
      execute: async (args) => {
        sent.push(args.amount);
        return { ok: true, value: { status: 'sent' as const } };
      },
      lookup: async () => ({ found: false as const }),
    });
    const h = harness({ extraTools: [tool], script: [reply.call('send_payment', { amount: 5 }), reply.answer('x')] });
    const status = await h.orchestrator.run({ principal: E17, goal: 'pay', taskId: 'hook' });
    expect(sent).toEqual([]);
    expect(status.observations[0]).toMatchObject({ ok: false, gate: 'permission', code: 'permission_denied' });
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

describe('low-severity findings, fixed', () => {
  it('shows the model only the name of an error a validation hook threw, not its message', async () => {
    const leaky = defineTool({
      name: 'leaky_read',
      description: 'x',
      effect: 'read',
      scopes: [],
      timeoutMs: 100,
      input: z.strictObject({}),
      output: z.strictObject({}),
      validate: () => {
        throw new TypeError('connect ECONNREFUSED 10.1.2.3:5432 (db-internal.corp)');
      },
      execute: async () => ({ ok: true, value: {} }),
    });
    const h = harness({ extraTools: [leaky], script: [reply.call('leaky_read', {}), reply.answer('x')] });
    const status = await h.orchestrator.run({ principal: E17, goal: 'g', taskId: 'leak' });
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'unavailable', summary: 'business validation failed (TypeError)' });
    expect(JSON.stringify(await h.orchestrator.transcript('leak'))).not.toContain('10.1.2.3');
  });

  it('does not write a new revision when a task is only loaded to read it or to refuse an event', async () => {
    const h = harness({ script: [reply.call('refund_order', { order_id: 'O-1001', amount_cents: 99_900, reason: 'x' })] });
    const principal = { userId: 'E17', tenantId: 'acme', scopes: ['refunds:write'] };
    const waiting = await h.orchestrator.run({ principal, goal: 'refund', taskId: 'quiet' });
    const revision = (await h.store.load('quiet'))!.revision;
    await h.orchestrator.resume('quiet');
    await h.orchestrator.confirm('quiet', { ...principal, tenantId: 'other' }, { id: waiting.pendingConfirmation!.id, argsHash: 'x' });
    expect((await h.store.load('quiet'))!.revision).toBe(revision);
  });

  it('refuses a confirmation from the right user whose session no longer holds the tool scopes', async () => {
    const h = harness({ script: [reply.call('refund_order', { order_id: 'O-1001', amount_cents: 99_900, reason: 'x' })] });
    const principal = { userId: 'E17', tenantId: 'acme', scopes: ['refunds:write'] };
    const waiting = await h.orchestrator.run({ principal, goal: 'refund', taskId: 'revoked' });
    const result = await h.orchestrator.confirm('revoked', { ...principal, scopes: [] }, waiting.pendingConfirmation!);
    expect(result).toMatchObject({ accepted: false, code: 'permission_denied' });
    expect(h.refunds.refunds).toEqual([]);
    expect((await h.orchestrator.confirm('revoked', principal, waiting.pendingConfirmation!)).accepted).toBe(true);
  });

  it('refuses oversized text in host events and goals', async () => {
    const h = harness({ script: [reply.ask('which room?')] });
    await expect(h.orchestrator.start({ principal: E17, goal: 'x'.repeat(20_000) })).rejects.toThrow(HostRequestError);
    const status = await h.orchestrator.run({ principal: E17, goal: 'g', taskId: 'big' });
    await expect(h.orchestrator.answer(status.taskId, E17, 'y'.repeat(20_000))).rejects.toThrow(HostRequestError);
  });
});
