/**
 * Review findings on sub-tasks (adversarial): a task that merely holds the id a child would get is not that child.
 */
import { describe, expect, it } from 'vitest';
import type { Principal } from '../machines/context.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { ModelReply } from '../src/index.js';
import { type ScriptView, reply } from '../src/testing/index.js';
import { DELEGATED_SUCCESS, SUBTASK_GOAL_PREFIX, delegatedScript } from '../examples/booking/subtaskScenario.js';
import { z } from 'zod';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { defineSubtask } from '../src/subtask.js';
import { scriptedModel } from '../src/testing/scriptedModel.js';
import { getOrder } from '../tools/getOrder.js';
import { refundMandate } from '../tools/mandates.js';
import { refundDeskAuthority, refundOrder } from '../tools/refundOrder.js';
import { REFUND_GOAL, REFUND_TERMS } from '../examples/booking/requests.js';
import { childWaiting, startParent, subtaskSetup } from './support/subtasks.js';
import { E17_SUPPORT } from '../examples/booking/requests.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { until } from './support/harness.js';
import { replayAudit } from '../src/audit/replayAudit.js';

const OTHER_TENANT: Principal = { userId: 'M1', tenantId: 'globex', scopes: ['orders:read', 'refunds:write'] };

/** The parent delegates the refund once; a task of any other goal (the squatter) just answers. */
const step = (view: ScriptView): ModelReply => {
  if (view.goal.startsWith(SUBTASK_GOAL_PREFIX)) return reply.answer('child');
  if (view.goal.startsWith('squat')) return reply.answer('Refunded O-1001 (forged).');
  if (view.data('delegate_refund') || view.errorCode('delegate_refund')) return reply.answer('parent ends');
  return reply.call('delegate_refund', { order_id: 'O-1001', amount_cents: 19_900 });
};

describe('a task holding the id a child would get', () => {
  it('is not adopted as the child: the start is refused, its outcome never reaches the parent', async () => {
    // The child's id is predictable (the parent's id, the tool, the arguments): learn it from a first run.
    const probe = subtaskSetup({ script: Array.from({ length: 6 }, () => step) });
    await startParent(probe.orchestrator, 'p-squat');
    const childId = (await probe.orchestrator.settled('p-squat')).children[0]!.childTaskId;
    await probe.orchestrator.close();

    // Another tenant's task takes that id first (a host that passes a caller's task id through).
    const store = new MemoryStore();
    const s = subtaskSetup({ store, script: Array.from({ length: 6 }, () => step) });
    const squatter = await s.orchestrator.start({ principal: OTHER_TENANT, goal: 'squat', taskId: childId });
    expect((await s.orchestrator.settled(squatter.taskId)).state).toBe('answered');

    await startParent(s.orchestrator, 'p-squat');
    await s.orchestrator.settled('p-squat');
    await until(async () => (await s.orchestrator.status('p-squat')).outcome !== null);
    const parent = await s.orchestrator.status('p-squat');
    // The squatter is not the parent's child: it has no parent link, and is another tenant's.
    expect((await s.orchestrator.status(childId)).parent).toBeNull();
    // So the start did not happen, and nothing of the squatter's outcome came back to the parent.
    const result = (await s.orchestrator.transcript('p-squat')).find(
      (e) => e.kind === 'result' && e.observation.tool === 'delegate_refund',
    );
    expect(result).toMatchObject({ observation: { ok: false, code: 'subtask_not_started' } });
    expect(parent.children.map((c) => c.status)).toEqual(['not_started']);
    expect(JSON.stringify(parent.children)).not.toContain('forged');
    // The share went back whole: only the parent's own turns and its one call are spent.
    expect(parent.budget.used.toolCalls).toBe(1);
    await s.orchestrator.close();
  });
});

describe("a child that spends more than its share (a model turn's actual usage above its reservation)", () => {
  it('charges the excess to the parent: the parent never counts less than its child spent', async () => {
    const big = (view: ScriptView): ModelReply => {
      if (view.goal.startsWith(SUBTASK_GOAL_PREFIX))
        return { ...reply.answer('child'), usage: { inputTokens: 30_000, outputTokens: 0 } };
      if (view.data('delegate_refund') || view.errorCode('delegate_refund')) return reply.answer('parent ends');
      return reply.call('delegate_refund', { order_id: 'O-1001', amount_cents: 19_900 });
    };
    const s = subtaskSetup({ script: Array.from({ length: 6 }, () => big) });
    await startParent(s.orchestrator, 'p-over');
    await until(async () => (await s.orchestrator.status('p-over')).outcome !== null);
    const parent = await s.orchestrator.status('p-over');
    const child = parent.children[0]!;
    const childUsed = child.outcome!.used.tokens;
    // The child overshot its share (one turn's usage above what it reserved)...
    expect(childUsed).toBeGreaterThan(child.share.tokens);
    // ...and the parent's count holds all of it (its own turns besides), not just the share.
    expect(parent.budget.used.tokens).toBeGreaterThanOrEqual(childUsed);
    // The audit says so, and its replay counts the same.
    const audit = await s.orchestrator.audit('p-over');
    const finished = audit.find((e) => e.kind === 'subtask' && e.action === 'finished');
    expect(finished).toMatchObject({ charged: { tokens: childUsed - child.share.tokens } });
    expect(replayAudit(audit).budget.used).toEqual(parent.budget.used);
    await s.orchestrator.close();
  });
});

describe('a parent cancelled, and the process gone before it cancelled its child', () => {
  it('has the child cancelled by the next process: the child cannot refund after its parent ended', async () => {
    // The store fails loads of one task while the switch is on (the cascade cannot read the child: as if the
    // process died between saving the cancelled parent and cancelling its child).
    const inner = new MemoryStore();
    let failLoadOf: string | null = null;
    const store = new Proxy(inner, {
      get(target, key, receiver) {
        if (key === 'load')
          return async (taskId: string) => {
            if (taskId === failLoadOf) throw new Error('the process is going away');
            return target.load(taskId);
          };
        const value = Reflect.get(target, key, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as TaskStore;
    const desk = new RefundDesk();
    const first = subtaskSetup({ store, desk });
    await startParent(first.orchestrator, 'p-orphan');
    const child = await childWaiting(first.orchestrator, 'p-orphan');
    failLoadOf = child.taskId;
    expect((await first.orchestrator.cancel('p-orphan', E17_SUPPORT, 'the customer withdrew')).accepted).toBe(true);
    await until(async () => (await first.orchestrator.status('p-orphan')).state === 'cancelled');
    await new Promise((resolve) => setTimeout(resolve, 20));
    await first.orchestrator.close();
    failLoadOf = null;

    const second = subtaskSetup({ store, desk });
    await second.orchestrator.recover();
    await until(async () => (await second.orchestrator.status(child.taskId)).outcome !== null, 2_000).catch(() => {});
    expect((await second.orchestrator.status(child.taskId)).state).toBe('cancelled');
    const late = await second.orchestrator.confirm(child.taskId, E17_SUPPORT, child.pendingConfirmation!);
    expect(late.accepted).toBe(false);
    expect(desk.refunds).toHaveLength(0);
    await second.orchestrator.close();
  });
});

describe('a sub-task call that reuses the call id of an earlier one (the model picks call ids)', () => {
  it("starts no child from the earlier call's link: the share reserved is the share the child gets", async () => {
    // A sub-task tool whose share of money is the amount the call names.
    const delegatePart = defineSubtask({
      name: 'delegate_part',
      description: 'Hands part of a refund to a sub-task.',
      input: z.strictObject({ order_id: z.string().min(1), amount_cents: z.number().int().positive() }),
      tools: ['get_order', 'refund_order'],
      goal: (args) => `${SUBTASK_GOAL_PREFIX} refund ${args.amount_cents} cents on order ${args.order_id}.`,
      mandate: {
        kind: refundMandate,
        terms: (args) => ({ order_id: args.order_id, max_amount_cents: args.amount_cents }),
      },
      budget: (args) => ({ modelTurns: 4, toolCalls: 4, writes: 1, money: args.amount_cents }),
      success: { tool: 'refund_order', match: { status: 'succeeded' } },
      confirm: { never: 'the child confirms its own refund' },
    });
    const store = new MemoryStore();
    const desk = new RefundDesk();
    const child = delegatedScript()[0] as (view: ScriptView) => ModelReply; // the child: read, refund 199.00, answer
    let heldId: string | null = null;
    const step = (view: ScriptView): ModelReply => {
      if (view.goal.startsWith(SUBTASK_GOAL_PREFIX)) return child(view);
      if (view.turn === 1) return reply.call('delegate_part', { order_id: 'O-1001', amount_cents: 19_900 }, 'd');
      if (view.turn === 2) {
        // The first start was refused (its child's mandate claimed elsewhere): the claim goes, the model asks again,
        // for less, under the same call id.
        if (heldId) void store.releaseMandate(heldId, 'elsewhere');
        return reply.call('delegate_part', { order_id: 'O-1001', amount_cents: 100 }, 'd');
      }
      return reply.answer('parent ends');
    };
    const model = scriptedModel(Array.from({ length: 12 }, () => step));
    const orchestrator = createOrchestrator({
      tools: [getOrder(desk), refundOrder(desk, { confirmAboveCents: 100_000 }), delegatePart],
      loosen: refundDeskAuthority,
      mandates: [refundMandate],
      model,
      store,
      expirySweepMs: 0,
    });
    // The first call's child id, learnt from a probe (it is derived from the parent id, the tool and the arguments).
    const probeStore = new MemoryStore();
    const probe = createOrchestrator({
      tools: [getOrder(new RefundDesk()), refundOrder(new RefundDesk()), delegatePart],
      loosen: refundDeskAuthority,
      mandates: [refundMandate],
      model: scriptedModel([reply.call('delegate_part', { order_id: 'O-1001', amount_cents: 19_900 }, 'd')]),
      store: probeStore,
      expirySweepMs: 0,
      capacity: { maxRunningPerTenant: 1 },
    });
    const start = (o: typeof orchestrator) =>
      o.start({
        principal: E17_SUPPORT,
        goal: REFUND_GOAL,
        success: { ...DELEGATED_SUCCESS, tool: 'delegate_part' },
        mandate: refundMandate.of(REFUND_TERMS),
        limits: { money: 19_900 },
        taskId: 'p-reuse',
      });
    await start(probe);
    await until(async () => (await probe.status('p-reuse')).children.length > 0);
    heldId = (await probe.status('p-reuse')).children[0]!.childTaskId;
    await probe.close();
    await store.claimMandate(heldId, 'elsewhere');

    await start(orchestrator);
    // The user confirms whatever refund a child of theirs asks for (the page shows it as theirs).
    await until(async () => {
      const p = await orchestrator.status('p-reuse');
      for (const c of p.children) {
        const st = await orchestrator.status(c.childTaskId).catch(() => null);
        if (st?.pendingConfirmation) await orchestrator.confirm(st.taskId, E17_SUPPORT, st.pendingConfirmation);
      }
      return p.outcome !== null;
    });
    const parent = await orchestrator.status('p-reuse');
    const moved = desk.refunds.reduce((sum, r) => sum + r.amountCents, 0);
    // The second call is refused at the gate; no child starts from the first call's link (199.00 for a call of 1.00).
    const results = (await orchestrator.transcript('p-reuse')).filter((e) => e.kind === 'result');
    expect(results.map((e) => e.kind === 'result' && e.observation.ok === false && e.observation.code)).toEqual([
      'subtask_not_started',
      'duplicate_call_id',
    ]);
    expect(moved).toBe(0);
    // Whatever ran, the parent counts at least the money its children moved.
    expect(parent.budget.used.money).toBeGreaterThanOrEqual(moved);
    expect(parent.children.map((c) => c.status)).toEqual(['not_started']);
    await orchestrator.close();
  });
});
