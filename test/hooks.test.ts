/**
 * Typed hooks and the logger: hooks fire after the save that made each event durable, in journal order; a hook or
 * a save listener that throws is logged and the task goes on; what the library has to report goes to the host's
 * pino-compatible logger, never to the console.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TaskHooks } from '../src/index.js';
import { reply } from '../src/testing/scriptedModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { REFUND_GOAL, REFUND_MANDATE, REFUND_SUCCESS, SUPPORT, harness } from './support/harness.js';

const refundScript = [
  reply.call('get_order', { order_id: 'O-1001' }),
  reply.call('refund_order', { order_id: 'O-1001', amount_cents: 19_900, reason: 'projector arrived broken' }),
  reply.answer('Refunded 199.00.'),
];

function recorder() {
  const events: string[] = [];
  const hooks: Required<TaskHooks> = {
    transition: (e) => events.push(`transition ${e.from?.stateValue ?? '-'} → ${e.to.stateValue}`),
    toolStarted: (e) => events.push(`toolStarted ${e.entry.tool} attempt ${e.entry.attempt}`),
    toolFinished: (e) => events.push(`toolFinished ${e.entry.tool} ${e.entry.code}`),
    confirmationRequested: (e) => events.push(`confirmationRequested ${e.entry.tool} ${e.entry.confirmationId}`),
    confirmationDecided: (e) => events.push(`confirmationDecided ${e.entry.action} by ${e.entry.userId}`),
    settled: (e) => events.push(`settled ${e.summary.state}`),
    recovered: (e) => events.push(`recovered ${e.report.resumed.join(' ')}`),
  };
  return { events, hooks };
}

const logged = () => {
  const lines: { level: string; fields: Record<string, unknown>; message?: string }[] = [];
  const at = (level: string) => (fields: object, message?: string) =>
    lines.push({ level, fields: fields as Record<string, unknown>, message });
  return { lines, logger: { warn: at('warn'), error: at('error') } };
};

afterEach(() => vi.restoreAllMocks());

describe('typed hooks', () => {
  it('tell a refund as it became durable: tools, the confirmation asked and granted, the states, settled twice', async () => {
    const { events, hooks } = recorder();
    const { orchestrator } = harness({ script: refundScript, hooks });
    let status = await orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      success: REFUND_SUCCESS,
      mandate: REFUND_MANDATE,
      taskId: 'hooked',
    });
    expect(status.state).toBe('waiting_for_confirmation');
    const pending = status.pendingConfirmation!;
    await orchestrator.confirm('hooked', SUPPORT, { id: pending.id, argsHash: pending.argsHash });
    status = await orchestrator.settled('hooked');
    expect(status.state).toBe('done');

    const lifecycle = events.filter((e) => !e.startsWith('transition'));
    expect(lifecycle).toEqual([
      'toolStarted get_order attempt 1',
      'toolFinished get_order ok',
      `confirmationRequested refund_order ${pending.id}`,
      'settled waiting_for_confirmation',
      `confirmationDecided granted by ${SUPPORT.userId}`,
      'toolStarted refund_order attempt 1',
      'toolFinished refund_order ok',
      'settled done',
    ]);
    const transitions = events.filter((e) => e.startsWith('transition'));
    expect(transitions[0]).toMatch(/^transition - → /);
    // One per save: a task is saved when a barrier needs it (a model turn, a write, a host event) or when it comes
    // to rest, so the read round (thinking → vetting → reading → thinking) is one save, and shows as none.
    expect(transitions).toEqual([
      'transition - → thinking',
      'transition thinking → executing.awaitingConfirmation',
      'transition executing.awaitingConfirmation → executing.rechecking.hooks',
      'transition executing.rechecking.hooks → executing.writing',
      'transition executing.writing → thinking',
      'transition thinking → done',
    ]);
    expect(transitions.at(-1)).toMatch(/→ done$/);
    // Each transition names a state the one before ended in.
    for (let i = 1; i < transitions.length; i++) {
      expect(transitions[i]!.split(' ')[1]).toBe(transitions[i - 1]!.split(' → ')[1]);
    }
  });

  it('fire only after the save: the store already holds what a hook is told', async () => {
    /** Notes, as each save lands, the kinds of the audit entries it appended. */
    class Noting extends MemoryStore {
      readonly durable: string[] = [];
      override async save(request: Parameters<MemoryStore['save']>[0]) {
        const result = await super.save(request);
        this.durable.push(...(request.append.audit as { kind: string }[]).map((e) => e.kind));
        return result;
      }
    }
    const store = new Noting();
    const seen: string[] = [];
    const hooks: TaskHooks = {
      toolStarted: () => seen.push(`started: ${store.durable.filter((k) => k === 'tool_started').length} durable`),
      toolFinished: () => seen.push(`finished: ${store.durable.filter((k) => k === 'tool_finished').length} durable`),
      settled: (e) => seen.push(`settled ${e.summary.state}: revision ${e.summary.revision}`),
    };
    const { orchestrator } = harness({
      script: [refundScript[0]!, reply.answer('The order is O-1001.')],
      hooks,
      store,
    });
    const status = await orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      mandate: REFUND_MANDATE,
      taskId: 'after-save',
    });
    expect(seen).toEqual([
      'started: 1 durable',
      'finished: 1 durable',
      `settled answered: revision ${status.revision}`,
    ]);
  });

  it('a hook or a save listener that throws is logged, and the task still ends done', async () => {
    const { lines, logger } = logged();
    const console = vi.spyOn(globalThis.console, 'error');
    const warn = vi.spyOn(globalThis.console, 'warn');
    const hooks: TaskHooks = {
      toolStarted: () => {
        throw new Error('hook bug');
      },
    };
    const { orchestrator } = harness({ script: refundScript, hooks, logger });
    orchestrator.onSaved(() => {
      throw new Error('listener bug');
    });
    let status = await orchestrator.run({
      principal: SUPPORT,
      goal: REFUND_GOAL,
      success: REFUND_SUCCESS,
      mandate: REFUND_MANDATE,
      taskId: 'throws',
    });
    const pending = status.pendingConfirmation!;
    await orchestrator.confirm('throws', SUPPORT, { id: pending.id, argsHash: pending.argsHash });
    status = await orchestrator.settled('throws');
    expect(status.state).toBe('done');
    expect(
      lines
        .filter((l) => l.fields.hook === 'toolStarted')
        .map((l) => [l.level, l.fields.taskId, l.fields.err, l.message]),
    ).toEqual([
      ['warn', 'throws', 'Error: hook bug', 'the toolStarted hook threw; the task goes on'],
      ['warn', 'throws', 'Error: hook bug', 'the toolStarted hook threw; the task goes on'],
    ]);
    expect(lines.filter((l) => l.fields.hook === 'onSaved').length).toBeGreaterThan(3);
    // Nothing of it went to the console.
    expect(console).not.toHaveBeenCalled();
    expect(warn).not.toHaveBeenCalled();
  });
});

describe('the logger', () => {
  it('hears a failed expiry sweep instead of nobody', async () => {
    const { lines, logger } = logged();
    class Failing extends MemoryStore {
      override async list(): Promise<never> {
        throw new Error('store is down');
      }
    }
    const { orchestrator } = harness({ store: new Failing(), logger, expirySweepMs: 5 });
    await expect.poll(() => lines.length).toBeGreaterThan(0);
    await orchestrator.close();
    expect(lines.length).toBeGreaterThan(0);
    expect(lines[0]).toMatchObject({
      level: 'warn',
      message: 'the expiry sweep failed',
      fields: { err: expect.stringContaining('store is down') },
    });
  });

  it('hears a task this process stopped driving because its store failed', async () => {
    const { lines, logger } = logged();
    class Breaking extends MemoryStore {
      saves = 0;
      override async save(request: Parameters<MemoryStore['save']>[0]) {
        if (++this.saves > 2) throw new Error('disk on fire');
        return super.save(request);
      }
    }
    const { orchestrator } = harness({ store: new Breaking(), logger, script: refundScript, saveRetries: 0 });
    await orchestrator
      .run({ principal: SUPPORT, goal: REFUND_GOAL, mandate: REFUND_MANDATE, taskId: 'broken-store' })
      .catch(() => {});
    await expect.poll(() => lines.some((line) => line.message === 'this process stopped driving the task')).toBe(true);
    expect(lines).toContainEqual({
      level: 'error',
      message: 'this process stopped driving the task',
      fields: expect.objectContaining({ taskId: 'broken-store', err: expect.stringContaining('disk on fire') }),
    });
  });
});
