/**
 * The gate's own re-check against the invoked one, at runtime: the same hooks asked with the same arguments and
 * context, the same journal and outcome, for a first write and for a resend after a lookup that found nothing.
 */
import { describe, expect, it } from 'vitest';
import type { AuditEntry } from '../machines/journal.js';
import type { Principal } from '../machines/context.js';
import { createOrchestrator, defineTool } from '../src/index.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { ManualClock, reply, scriptedModel } from '../src/testing/index.js';
import { REFUND_BASE, REFUND_USER } from './support/refundTool.js';

const USER = REFUND_USER;
type Answer = 'pass' | 'refuse' | 'throws';

const REVIEWER: Principal = { userId: 'r2', tenantId: 't1', scopes: ['tasks:review'] };

async function run(gate: boolean, at: { validate: Answer[]; authorize: Answer[] }, failFirst: boolean, review = false) {
  const asked: unknown[] = [];
  const counts = { validate: 0, authorize: 0 };
  let executed = 0;
  const hook = (name: 'validate' | 'authorize') =>
    function (this: unknown, args: unknown, ctx: Record<string, unknown>) {
      const { signal: _signal, ...rest } = ctx;
      asked.push({ name, args, ctx: rest, self: this === undefined ? 'none' : 'tool' });
      const answer = at[name][counts[name]++] ?? 'pass';
      if (answer === 'throws') throw new Error('boom');
      return answer === 'pass' ? { ok: true } : { ok: false, code: 'no', summary: `${name} says no` };
    };
  const tool = defineTool({
    ...REFUND_BASE,
    confirm: { never: 'a test refund' },
    validate: hook('validate'),
    authorize: hook('authorize'),
    execute: async () => {
      executed += 1;
      if (review && executed === 1) return { ok: false, code: 'needs_review', summary: 'the service cannot say' };
      if (failFirst && executed === 1) throw new Error('network');
      return { ok: true, value: { refunded: true } };
    },
    lookup: async () => ({ found: false as const }),
  } as never);
  const orchestrator = createOrchestrator({
    store: new MemoryStore(),
    clock: new ManualClock(),
    tools: [tool],
    model: scriptedModel([reply.call('refund_order', { order: 'O-1' }, 'c1'), reply.answer('over')]),
    ...(gate ? {} : { refreshPrincipal: (p: Principal) => p }),
  });
  const status = await orchestrator.run({ principal: USER, goal: 'refund O-1', taskId: 'r1' });
  let settled = await orchestrator.settled('r1');
  let answer: unknown = null;
  if (review) {
    // The reply only: the status it carries is taken after the gate's re-check, and before the invoked one's.
    const { accepted, code, message } = (await orchestrator.resolveReview('r1', REVIEWER, {
      resolution: 'retry',
    })) as unknown as Record<string, unknown>;
    answer = { accepted, code, message };
    settled = await orchestrator.settled('r1');
  }
  const audit = (await orchestrator.audit('r1')).map(({ moves: _m, ...e }: AuditEntry & { moves?: unknown }) => e);
  await orchestrator.close();
  return { asked, executed, state: settled.state ?? status.state, obs: settled.observations, audit, answer };
}

describe('the gate re-check asks and records what the invoked one does', () => {
  it.each<[string, { validate: Answer[]; authorize: Answer[] }, boolean, number, number, boolean?]>([
    ['all pass', { validate: [], authorize: [] }, false, 1, 4],
    ['validate refuses at the re-check', { validate: ['pass', 'refuse'], authorize: [] }, false, 0, 3],
    ['authorize throws at the re-check', { validate: [], authorize: ['pass', 'throws'] }, false, 0, 4],
    // A resend asks authorize again, not validate.
    ['resend passes', { validate: [], authorize: [] }, true, 2, 5],
    ['resend refused by authorize', { validate: [], authorize: ['pass', 'pass', 'refuse'] }, true, 1, 5],
    // A reviewer's retry, after a write the service could not say about.
    ['reviewer retry passes', { validate: [], authorize: [] }, true, 2, 5, true],
    ['reviewer retry refused', { validate: [], authorize: ['pass', 'pass', 'refuse'] }, true, 1, 5, true],
  ])('%s', async (_name, answers, failFirst, executed, asked, review = false) => {
    const gate = await run(true, answers, failFirst, review);
    const invoked = await run(false, answers, failFirst, review);
    expect(gate.answer).toEqual(invoked.answer);
    if (review) expect(gate.answer).toMatchObject({ accepted: true, message: expect.stringContaining('retried') });
    expect([gate.executed, gate.asked.length]).toEqual([executed, asked]);
    expect(gate.asked).toEqual(invoked.asked);
    expect(gate.executed).toBe(invoked.executed);
    expect(gate.state).toBe(invoked.state);
    expect(gate.obs).toEqual(invoked.obs);
    expect(gate.audit).toEqual(invoked.audit);
  });
});
