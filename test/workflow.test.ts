/**
 * Workflows: the host fixes the flow in code; the program makes the calls (through every gate), the model only makes
 * the decisions the flow asks for, each checked against its choices or schema. The refund of the design sources as
 * the example: extract the order id (model), read the order (program), judge refund vs escalate (model), refund
 * (program, confirmed by the tool's rule).
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { E17_SUPPORT, REFUND_GOAL, REFUND_SUCCESS, REFUND_TERMS } from '../examples/booking/requests.js';
import { RefundDesk } from '../examples/booking/refundService.js';
import { refundWorkflow } from '../examples/booking/workflowScenario.js';
import { createOrchestrator, defineWorkflow, established } from '../src/index.js';
import { AgentError, HostRequestError } from '../src/errors.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { type ScriptStep, reply, scriptedModel } from '../src/testing/scriptedModel.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { getOrder } from '../tools/getOrder.js';
import { refundMandate } from '../tools/mandates.js';
import { refundDeskAuthority, refundOrder } from '../tools/refundOrder.js';
import { byKind } from './support/harness.js';
import type { WorkflowDefinition } from '../machines/workflows.js';

interface Setup {
  script: ScriptStep[];
  workflow?: WorkflowDefinition;
  store?: TaskStore;
  desk?: RefundDesk;
}

function setup(options: Setup) {
  const desk = options.desk ?? new RefundDesk();
  const model = scriptedModel(options.script);
  const orchestrator = createOrchestrator({
    tools: [getOrder(desk), refundOrder(desk, { confirmAboveCents: 10_000 })],
    workflows: [options.workflow ?? refundWorkflow],
    loosen: refundDeskAuthority,
    mandates: [refundMandate],
    model,
    store: options.store ?? new MemoryStore(),
    expirySweepMs: 0,
  });
  return { desk, model, orchestrator };
}

const start = (s: ReturnType<typeof setup>, taskId: string, workflow = 'refund') =>
  s.orchestrator.start({
    principal: E17_SUPPORT,
    goal: REFUND_GOAL,
    success: REFUND_SUCCESS,
    mandate: refundMandate.of(REFUND_TERMS),
    limits: { money: REFUND_TERMS.max_amount_cents },
    workflow,
    taskId,
  });

const ORDER = reply.decide({ order_id: 'O-1001' });
const REFUND = reply.decide({ choice: 'refund' });

async function confirmRefund(s: ReturnType<typeof setup>, taskId: string) {
  const waiting = await s.orchestrator.settled(taskId);
  expect(waiting.pendingConfirmation?.tool).toBe('refund_order');
  await s.orchestrator.confirm(taskId, E17_SUPPORT, waiting.pendingConfirmation!);
  return s.orchestrator.settled(taskId);
}

describe('a fixed workflow with model decisions inside it', () => {
  it('runs the program’s calls and offers the model only the decision at hand', async () => {
    const s = setup({ script: [ORDER, REFUND] });
    await start(s, 'flow');
    const status = await confirmRefund(s, 'flow');
    expect(status).toMatchObject({ state: 'done', outcome: { reason: { code: 'goal_met' } } });
    expect(s.desk.refunds).toHaveLength(1);
    expect(s.desk.refunds[0]).toMatchObject({ orderId: 'O-1001', amountCents: 19_900 });
    // Two model turns, each offered only the decision (never get_order or refund_order).
    expect(s.model.requests.map((r) => r.tools)).toEqual([['submit_decision'], ['submit_decision']]);
    const audit = await s.orchestrator.audit('flow');
    expect(byKind(audit, 'workflow').map((e) => `${e.action}:${e.step ?? ''}`)).toEqual([
      'decided:extract',
      'step:extract',
      'call:lookup',
      'step:lookup',
      'decided:judge',
      'step:judge',
      'call:refund',
      'step:refund',
      'ended:',
    ]);
    // The program's calls went through every gate, the refund's confirmation included.
    const gates = byKind(audit, 'gate')
      .filter((g) => g.tool === 'refund_order')
      .map((g) => `${g.gate}:${g.decision}`);
    expect(gates).toEqual(
      expect.arrayContaining(['schema:pass', 'mandate:pass', 'permission:pass', 'confirmation:pass']),
    );
  });

  it('refuses a decision outside its choices or schema, and an answer in its place, and asks again', async () => {
    const s = setup({
      script: [
        reply.decide({ order_id: 'order one thousand and one' }),
        reply.answer('I refunded it.'),
        ORDER,
        reply.decide({ choice: 'refund everything' }),
        REFUND,
      ],
    });
    await start(s, 'refused');
    // Three unusable outputs exceed the default bound of two re-asks.
    const status = await s.orchestrator.settled('refused');
    expect(status.state).toBe('failed');
    expect(status.outcome?.reason.code).toBe('protocol_error');
    const refused = byKind(await s.orchestrator.audit('refused'), 'workflow').filter((e) => e.action === 'refused');
    expect(refused.map((e) => e.step)).toEqual(['extract', 'extract', 'judge']);
    expect(refused[0]?.summary).toMatch(/order_id/);
    expect(s.desk.refunds).toEqual([]);
  });

  it('refuses a real tool call in a decision turn as not offered', async () => {
    const s = setup({
      script: [reply.call('refund_order', { order_id: 'O-1001', amount_cents: 99_900, reason: 'x' }), ORDER, REFUND],
    });
    await start(s, 'jump');
    await confirmRefund(s, 'jump');
    const refused = byKind(await s.orchestrator.audit('jump'), 'gate').find((g) => g.code === 'not_offered');
    expect(refused).toMatchObject({ tool: 'refund_order', decision: 'reject' });
    expect(s.desk.refunds.map((r) => r.amountCents)).toEqual([19_900]);
  });

  it('branches in code: an escalation ends the flow without a refund; another order never gets read', async () => {
    const escalate = setup({ script: [ORDER, reply.decide({ choice: 'escalate' })] });
    await start(escalate, 'escalate');
    const escalated = await escalate.orchestrator.settled('escalate');
    expect(escalated).toMatchObject({ state: 'failed', outcome: { reason: { code: 'goal_not_met' } } });
    expect(escalate.desk.refunds).toEqual([]);

    const other = setup({ script: [reply.decide({ order_id: 'O-2002' })] });
    await start(other, 'other');
    const stopped = await other.orchestrator.settled('other');
    expect(stopped.state).toBe('failed');
    expect(byKind(await other.orchestrator.audit('other'), 'tool_started')).toEqual([]);
  });

  it('sends the program’s calls through the mandate: a rule that asks for more is refused, and its step fails', async () => {
    const greedy = defineWorkflow({
      ...refundWorkflow,
      name: 'greedy',
      steps: {
        ...refundWorkflow.steps,
        refund: {
          call: {
            tool: 'refund_order',
            args: (facts) => ({
              order_id: established<{ order_id: string }>(facts.extract).order_id,
              amount_cents: 99_900,
              reason: 'note',
            }),
          },
        },
      },
    });
    const s = setup({ workflow: greedy, script: [ORDER, REFUND] });
    await start(s, 'greedy', 'greedy');
    const status = await s.orchestrator.settled('greedy');
    expect(status.state).toBe('failed');
    const steps = byKind(await s.orchestrator.audit('greedy'), 'workflow').filter((e) => e.action === 'step');
    expect(steps.at(-1)).toMatchObject({ step: 'refund', code: 'outside_mandate' });
    expect(s.desk.refunds).toEqual([]);
  });

  it('stops when a rule of the program fails, running nothing on it', async () => {
    const broken = defineWorkflow({
      name: 'broken',
      start: 'lookup',
      steps: {
        lookup: {
          call: {
            tool: 'get_order',
            args: () => {
              throw new Error('no order id');
            },
          },
        },
      },
    });
    const s = setup({ workflow: broken, script: [] });
    await start(s, 'broken', 'broken');
    const status = await s.orchestrator.settled('broken');
    expect(status).toMatchObject({ state: 'failed', outcome: { reason: { code: 'internal_error' } } });
    expect(status.outcome?.reason.message).toMatch(/arguments rule of step lookup failed: .*no order id/);
    expect(byKind(await s.orchestrator.audit('broken'), 'tool_started')).toEqual([]);
  });

  it('survives a restart while the program’s refund waits for confirmation, and refunds once', async () => {
    const store = new MemoryStore();
    const desk = new RefundDesk();
    const first = setup({ store, desk, script: [ORDER, REFUND] });
    await start(first, 'restart');
    const waiting = await first.orchestrator.settled('restart');
    expect(waiting.pendingConfirmation?.tool).toBe('refund_order');
    await first.orchestrator.close();

    const second = setup({ store, desk, script: [ORDER, REFUND] });
    await second.orchestrator.recover();
    const status = await confirmRefund(second, 'restart');
    expect(status.state).toBe('done');
    expect(desk.refunds).toHaveLength(1);
    expect(second.model.requests).toEqual([]);
  });

  it('refuses an unknown workflow at start, and a workflow whose tools are not installed', async () => {
    const s = setup({ script: [] });
    await expect(start(s, 'nope', 'nope')).rejects.toThrow(HostRequestError);
    const bad = defineWorkflow({
      name: 'bad',
      start: 'a',
      steps: { a: { call: { tool: 'teleport', args: () => ({}) } } },
    });
    expect(() => setup({ workflow: bad, script: [] })).toThrow(/calls teleport, which is not installed/);
    expect(() =>
      defineWorkflow({
        name: 'both',
        start: 'a',
        steps: { a: { decide: { prompt: 'x', output: z.object({}) }, call: { tool: 'get_order', args: () => ({}) } } },
      }),
    ).toThrow(AgentError);
  });
});
