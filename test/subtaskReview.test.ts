/**
 * Review findings on sub-tasks (adversarial): a task that merely holds the id a child would get is not that child.
 */
import { describe, expect, it } from 'vitest';
import type { Principal } from '../machines/context.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { ModelReply } from '../src/index.js';
import { type ScriptView, reply } from '../src/testing/index.js';
import { SUBTASK_GOAL_PREFIX } from '../examples/booking/subtaskScenario.js';
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
