/**
 * Sub-tasks: a host-declared tool starts a child task with a narrower mandate, a share of the parent's budgets and a
 * subset of its tools; the parent waits (persisted) for the child's outcome, which comes back as the call's result;
 * cancelling the parent cancels the child; both survive restarts, and a start sent again finds the same child.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { delegateRefund } from '../examples/booking/subtaskScenario.js';
import { E17_SUPPORT, REFUND_TERMS } from '../examples/booking/requests.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { ToolDefinitionError } from '../src/errors.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { type SubtaskStarter, defineSubtask } from '../src/subtask.js';
import { type ScriptStep, reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { getOrder } from '../tools/getOrder.js';
import { refundMandate } from '../tools/mandates.js';
import { refundOrder } from '../tools/refundOrder.js';
import { byKind, until } from './support/harness.js';
import { replayAudit } from '../src/audit/replayAudit.js';
import { formatStatus } from '../src/cli/stepView.js';
import { childWaiting, startParent, subtaskSetup } from './support/subtasks.js';

describe('a sub-task: the happy path', () => {
  it("starts a child with a subset of the tools and a narrower mandate; its outcome is the parent's result", async () => {
    const s = subtaskSetup();
    await startParent(s.orchestrator, 'p1');
    const child = await childWaiting(s.orchestrator, 'p1');
    const parentWaiting = await s.orchestrator.status('p1');
    expect(parentWaiting.stateValue).toBe('executing.awaitingSubtask');
    // Linked both ways, in the status.
    expect(child.parent).toEqual({ taskId: 'p1', callId: 'call_1_1', tool: 'delegate_refund' });
    expect(parentWaiting.children).toMatchObject([
      { childTaskId: child.taskId, status: 'running', tool: 'delegate_refund' },
    ]);
    // Same principal, the narrower mandate, the share of the budgets.
    expect(child.principal.userId).toBe('E17');
    expect(child.mandate).toMatchObject({ kind: 'refund', terms: { order_id: 'O-1001', max_amount_cents: 19_900 } });
    expect(child.mandate?.id).toBe(child.taskId);
    expect(child.budget.limits).toMatchObject({ modelTurns: 4, toolCalls: 4, writes: 1, money: 19_900 });
    // The child's model is offered only its subset of tools.
    const childTurns = s.model.requests.filter((r) => r.taskId === child.taskId);
    expect(childTurns.length).toBeGreaterThan(0);
    for (const turn of childTurns) expect(turn.tools.sort()).toEqual(['get_order', 'refund_order']);
    // The parent took the share (plus the call itself) before the child started.
    expect(parentWaiting.budget.used.toolCalls).toBe(5);

    const confirmed = await s.orchestrator.confirm(child.taskId, E17_SUPPORT, child.pendingConfirmation!);
    expect(confirmed.accepted).toBe(true);
    await until(async () => (await s.orchestrator.status('p1')).outcome !== null);
    const parent = await s.orchestrator.status('p1');
    expect(parent.state).toBe('done');
    expect(parent.outcome?.evidence[0]).toMatchObject({ tool: 'delegate_refund', fields: { status: 'done' } });
    expect(s.desk.refunds).toHaveLength(1);
    // The child's unused share came back: 2 of its 4 tool calls were spent, plus the parent's own call.
    expect(parent.budget.used.toolCalls).toBe(3);
    expect(parent.budget.used.money).toBe(19_900);
    expect(parent.children[0]).toMatchObject({ status: 'finished', outcome: { status: 'done', code: 'goal_met' } });
    // The observation is the child's outcome and its trusted evidence, not its model's text.
    const result = (await s.orchestrator.transcript('p1')).find(
      (e) => e.kind === 'result' && e.observation.tool === 'delegate_refund',
    );
    expect(result).toMatchObject({ observation: { ok: true, data: { status: 'done', code: 'goal_met' } } });
    expect(JSON.stringify(result)).not.toContain('Refunded O-1001');
    expect(JSON.stringify(result)).toContain('TX-9001');
    // The step CLI's view shows the link both ways.
    const view = (st: typeof parent) => formatStatus(st, { auditLength: 0, modelWaiting: false, now: 0 });
    expect(view(parent)).toContain(`children  ${child.taskId} (delegate_refund) · done: goal_met`);
    expect(view(await s.orchestrator.status(child.taskId))).toContain(
      'parent    p1 (its delegate_refund call call_1_1)',
    );
    // A start sent again (a resend after a lookup found nothing) finds the same child: no second task.
    const starter = (s.orchestrator as unknown as { subtasks: SubtaskStarter }).subtasks;
    const again = await starter.start('p1', 'call_1_1', E17_SUPPORT);
    expect(again).toEqual({ ok: true, value: { child_task_id: child.taskId } });
    expect(await s.store.list()).toHaveLength(2);
    // The audit says when the child started and ended.
    const audit = await s.orchestrator.audit('p1');
    expect(byKind(audit, 'subtask').map((e) => `${e.action}:${e.childTaskId === child.taskId}`)).toEqual([
      'reserved:true',
      'started:true',
      'finished:true',
    ]);
    expect(byKind(audit, 'subtask')[2]!.returned).toMatchObject({ toolCalls: 2, modelTurns: 1, writes: 0 });
    await s.orchestrator.close();
  });

  it('refuses a call of a tool outside the subset inside the child (not_offered)', async () => {
    const script: ScriptStep[] = [
      (view) =>
        view.goal.startsWith('Sub-task:')
          ? reply.call('delegate_refund', { order_id: 'O-1001', amount_cents: 100 })
          : reply.call('delegate_refund', { order_id: 'O-1001', amount_cents: 19_900 }),
      (view) =>
        view.goal.startsWith('Sub-task:')
          ? reply.answer(`refused: ${view.errorCode('delegate_refund')}`)
          : reply.answer('the sub-task did not refund'),
      reply.answer('done'),
    ];
    const s = subtaskSetup({ script });
    await startParent(s.orchestrator, 'p-subset');
    await until(async () => (await s.orchestrator.status('p-subset')).outcome !== null);
    const childId = (await s.orchestrator.status('p-subset')).children[0]!.childTaskId;
    const transcript = await s.orchestrator.transcript(childId);
    const refused = transcript.find((e) => e.kind === 'result');
    expect(refused).toMatchObject({ observation: { ok: false, code: 'not_offered' } });
    // The child answered without a refund: the parent's call failed with the child's reason.
    const parent = await s.orchestrator.status('p-subset');
    expect(parent.state).toBe('failed');
    expect(s.desk.refunds).toHaveLength(0);
    await s.orchestrator.close();
  });
});

describe('a sub-task refused at the gates: nothing starts', () => {
  const refusedOnce = (args: Record<string, unknown>): ScriptStep[] => [
    reply.call('delegate_refund', args),
    (view) => reply.answer(`not delegated: ${view.errorCode('delegate_refund')}`),
  ];

  it('refuses a child whose mandate would be wider than the parent (a larger amount)', async () => {
    const s = subtaskSetup({ script: refusedOnce({ order_id: 'O-1001', amount_cents: 99_900 }) });
    await startParent(s.orchestrator, 'p-wide');
    const status = await s.orchestrator.settled('p-wide');
    expect(status.outcome?.reason.code).toBe('goal_not_met');
    const gates = byKind(await s.orchestrator.audit('p-wide'), 'gate').filter((g) => g.decision === 'reject');
    expect(gates.map((g) => `${g.gate}:${g.code}`)).toEqual(['mandate:subtask_mandate_not_narrower']);
    expect(gates[0]!.summary).toContain('not within');
    expect(status.children).toEqual([]);
    expect(await s.store.list()).toHaveLength(1);
    await s.orchestrator.close();
  });

  it('refuses a child for another order (not within the parent mandate)', async () => {
    const s = subtaskSetup({ script: refusedOnce({ order_id: 'O-1002', amount_cents: 100 }) });
    await startParent(s.orchestrator, 'p-other');
    await s.orchestrator.settled('p-other');
    const gates = byKind(await s.orchestrator.audit('p-other'), 'gate').filter((g) => g.decision === 'reject');
    expect(gates.map((g) => g.code)).toEqual(['subtask_mandate_not_narrower']);
    expect(await s.store.list()).toHaveLength(1);
    await s.orchestrator.close();
  });

  it("refuses a child whose tools the parent's principal may not use (not a subset)", async () => {
    const s = subtaskSetup({ script: refusedOnce({ order_id: 'O-1001', amount_cents: 19_900 }) });
    const readOnly = { ...E17_SUPPORT, scopes: ['orders:read'] };
    await startParent(s.orchestrator, 'p-tools', { principal: readOnly });
    await s.orchestrator.settled('p-tools');
    const gates = byKind(await s.orchestrator.audit('p-tools'), 'gate').filter((g) => g.decision === 'reject');
    expect(gates.map((g) => `${g.gate}:${g.code}`)).toEqual(['permission:subtask_tools_not_permitted']);
    expect(gates[0]!.summary).toContain('refund_order');
    expect(await s.store.list()).toHaveLength(1);
    await s.orchestrator.close();
  });

  it("refuses a child whose share does not fit what is left of the parent's budget", async () => {
    const s = subtaskSetup({ script: refusedOnce({ order_id: 'O-1001', amount_cents: 19_900 }) });
    // The share is 4 tool calls, plus the call itself: 3 are left.
    await startParent(s.orchestrator, 'p-budget', { limits: { toolCalls: 3 } });
    const status = await s.orchestrator.settled('p-budget');
    const gates = byKind(await s.orchestrator.audit('p-budget'), 'gate').filter((g) => g.decision === 'reject');
    expect(gates.map((g) => `${g.gate}:${g.code}`)).toEqual(['budget:over_budget']);
    expect(status.budget.used.toolCalls).toBe(0);
    expect(await s.store.list()).toHaveLength(1);
    await s.orchestrator.close();
  });

  it("refuses a parent whose success on the sub-task tool would take an 'answered' child (its model's word) as done", async () => {
    const s = subtaskSetup();
    const start = (match: Record<string, string> | undefined) =>
      s.orchestrator.start({
        principal: E17_SUPPORT,
        goal: 'refund',
        success: { tool: 'delegate_refund', ...(match ? { match } : {}) },
        taskId: `p-success-${match?.status ?? 'none'}`,
      });
    for (const match of [undefined, { status: 'answered' }])
      await expect(start(match)).rejects.toMatchObject({
        code: 'invalid_request',
        message: expect.stringMatching(/must match \{ status: 'done' \}/),
      });
    expect(await s.orchestrator.list()).toEqual([]);
    await s.orchestrator.close();
  });

  it('refuses bad definitions: no tools, itself, a tool not installed, a nested sub-task, a mandate kind without within', () => {
    const base = {
      name: 'delegate_x',
      description: 'x',
      input: z.strictObject({ order_id: z.string() }),
      goal: () => 'x',
      budget: { modelTurns: 1, toolCalls: 1 },
    };
    expect(() => defineSubtask({ ...base, tools: [] })).toThrow(ToolDefinitionError);
    expect(() => defineSubtask({ ...base, tools: ['delegate_x'] })).toThrow(/itself/);
    expect(() => defineSubtask({ ...base, tools: ['get_order'], budget: { modelTurns: 0, toolCalls: 1 } })).toThrow(
      /modelTurns/,
    );
    const noWithin = { kind: { ...refundMandate, within: undefined }, terms: () => REFUND_TERMS };
    expect(() => defineSubtask({ ...base, tools: ['get_order'], mandate: noWithin as never })).toThrow(/within/);
    const desk = new RefundDesk();
    const install = (...tools: Parameters<typeof createOrchestrator>[0]['tools']) =>
      createOrchestrator({ tools, model: scriptedModel([]) });
    expect(() => install(getOrder(desk), defineSubtask({ ...base, tools: ['refund_order'] }))).toThrow(/not installed/);
    // Not across a dispatch queue: refused at construction rather than left waiting.
    expect(() =>
      createOrchestrator({
        tools: [getOrder(desk), refundOrder(desk), delegateRefund],
        model: scriptedModel([]),
        dispatch: {} as never,
      }),
    ).toThrow(/not supported with a dispatch/);
    const inner = defineSubtask({ ...base, name: 'inner', tools: ['get_order'] });
    expect(() => install(getOrder(desk), inner, defineSubtask({ ...base, tools: ['inner'] }))).toThrow(
      /one level only/,
    );
  });
});

describe('a start that does not happen', () => {
  it('gives the whole share back when the child is refused (no capacity), and the replay agrees', async () => {
    const s = subtaskSetup({
      capacity: { maxRunningPerTenant: 1 },
      script: [
        reply.call('delegate_refund', { order_id: 'O-1001', amount_cents: 19_900 }),
        (view) => reply.answer(`not delegated: ${view.errorCode('delegate_refund')}`),
      ],
    });
    await startParent(s.orchestrator, 'p-nocap');
    const status = await s.orchestrator.settled('p-nocap');
    const result = (await s.orchestrator.transcript('p-nocap')).find((e) => e.kind === 'result');
    expect(result).toMatchObject({ observation: { ok: false, code: 'subtask_not_started' } });
    expect(status.children).toMatchObject([{ status: 'not_started', outcome: null }]);
    // The call itself stays spent (one call, one write); the share (4 turns, 4 calls, 1 write, 199.00) came back.
    expect(status.budget.used).toMatchObject({ modelTurns: 2, toolCalls: 1, writes: 1, money: 0 });
    expect(await s.store.list()).toHaveLength(1);
    const audit = await s.orchestrator.audit('p-nocap');
    expect(byKind(audit, 'subtask').map((e) => e.action)).toEqual(['reserved', 'released']);
    expect(replayAudit(audit).budget.used).toEqual(status.budget.used);
    await s.orchestrator.close();
  });
});

describe('cancelling the parent', () => {
  it('cancels the child; the child ending afterwards changes nothing', async () => {
    const s = subtaskSetup();
    await startParent(s.orchestrator, 'p-cancel');
    const child = await childWaiting(s.orchestrator, 'p-cancel');
    const cancelled = await s.orchestrator.cancel('p-cancel', E17_SUPPORT, 'the customer withdrew');
    expect(cancelled.accepted).toBe(true);
    await until(async () => (await s.orchestrator.status(child.taskId)).state === 'cancelled');
    const childStatus = await s.orchestrator.status(child.taskId);
    expect(childStatus.outcome?.reason.message).toContain('p-cancel');
    const parent = await s.orchestrator.status('p-cancel');
    expect(parent.state).toBe('cancelled');
    expect(s.desk.refunds).toHaveLength(0);
    // The child's confirmation can no longer run anything.
    const late = await s.orchestrator.confirm(child.taskId, E17_SUPPORT, child.pendingConfirmation!);
    expect(late.accepted).toBe(false);
    expect((await s.orchestrator.status('p-cancel')).state).toBe('cancelled');
    expect(s.desk.refunds).toHaveLength(0);
    await s.orchestrator.close();
  });
});
