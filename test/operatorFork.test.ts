/**
 * An operator's fork of a task from a step: a new task of the same tenant, run for the operator, with the original's
 * model turns before that step's turn as its transcript (their tool results stay tool results), offered only read
 * tools and marked `forkedFrom`. Refused (`fork_not_allowed` with a reason) where a copy could authorise a write: a
 * task with a mandate, a sub-task, a workflow; and to anyone who is no operator of the tenant.
 */
import { describe, expect, it } from 'vitest';
import type { Principal } from '../machines/context.js';
import type { TranscriptEntry } from '../machines/journal.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { ForkNotAllowedError } from '../src/orchestrator/orchestrator.js';
import { reply } from '../src/testing/index.js';
import { REFUND_GOAL, REFUND_MANDATE, SUPPORT, harness } from './support/harness.js';

const ADMIN = 'tasks:admin';
const OPERATOR: Principal = { userId: 'ops-1', tenantId: 'acme', scopes: ['orders:read', ADMIN] };

/** Reads the order in its first turn, answers in its second; records what each task was shown and offered. */
function model(): AgentModel & { seen: Map<string, { transcript: TranscriptEntry[]; tools: string[] }[]> } {
  const seen = new Map<string, { transcript: TranscriptEntry[]; tools: string[] }[]>();
  return {
    name: 'reads-then-answers',
    seen,
    async decide(request) {
      const transcript = await request.transcript();
      const tools = request.tools.map((t) => t.name);
      seen.set(request.taskId, [...(seen.get(request.taskId) ?? []), { transcript, tools }]);
      const read = transcript.some((e) => e.kind === 'result');
      return read ? reply.answer('Order O-1001 is delivered.') : reply.call('get_order', { order_id: 'O-1001' }, 'c1');
    },
  };
}

describe('orchestrator.fork', () => {
  it('copies the turns before the step into a new task of the operator, read tools only, marked forkedFrom', async () => {
    const m = model();
    const h = harness({ model: m, adminScope: ADMIN, expirySweepMs: 0 });
    const original = await h.orchestrator.run({ principal: SUPPORT, goal: 'How is order O-1001?', taskId: 'orig' });
    expect(original.state).toBe('answered');
    const audit = await h.orchestrator.audit('orig');
    // The step of the second turn's model request: the copy holds turn 1 (the read and its result) and asks turn 2.
    const step = audit.findIndex((e) => e.kind === 'model_requested' && e.turn === 2) + 1;
    const copy = await h.orchestrator.fork('orig', OPERATOR, { step, taskId: 'copy' });
    const settled = await h.orchestrator.settled(copy.taskId);
    expect(settled).toMatchObject({
      state: 'answered',
      forkedFrom: { taskId: 'orig', step },
      principal: { userId: 'ops-1', tenantId: 'acme' },
      turn: 2,
    });
    const [asked] = m.seen.get(copy.taskId)!;
    // The copy's model saw the goal, then the original's turn 1 as a proposal and its tool result; nothing else.
    expect(asked!.transcript.map((e) => e.kind)).toEqual(['goal', 'proposal', 'result']);
    expect(asked!.tools).toEqual(['get_order']);
    const started = (await h.orchestrator.audit(copy.taskId)).find((e) => e.kind === 'task_started');
    expect(started).toMatchObject({ userId: 'ops-1', forkedFrom: { taskId: 'orig', step } });
    // The original is unchanged.
    expect((await h.orchestrator.status('orig')).forkedFrom).toBeNull();
  });

  it('offers the copy no write tool, though the original had some', async () => {
    const m = model();
    const h = harness({ model: m, adminScope: ADMIN, expirySweepMs: 0 });
    await h.orchestrator.run({ principal: SUPPORT, goal: 'How is order O-1001?', taskId: 'orig-w' });
    const copy = await h.orchestrator.fork('orig-w', OPERATOR, { step: 1 });
    await h.orchestrator.settled(copy.taskId);
    const tools = m.seen.get(copy.taskId)![0]!.tools;
    expect(tools).not.toContain('refund_order');
    expect(tools).not.toContain('reserve_room');
    expect(m.seen.get('orig-w')![0]!.tools).toContain('refund_order');
  });

  const refused = async (run: () => Promise<unknown>) => {
    const error = await run().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ForkNotAllowedError);
    return (error as ForkNotAllowedError).reason;
  };

  it('refuses a task with a mandate (reason mandate)', async () => {
    const h = harness({ adminScope: ADMIN, expirySweepMs: 0, script: [reply.ask('Which order?')] });
    await h.orchestrator.run({ principal: SUPPORT, goal: REFUND_GOAL, mandate: REFUND_MANDATE, taskId: 'mand' });
    expect(await refused(() => h.orchestrator.fork('mand', OPERATOR, { step: 1 }))).toBe('mandate');
  });

  it('refuses the task user, another tenant, and a step out of range', async () => {
    const h = harness({ model: model(), adminScope: ADMIN, expirySweepMs: 0 });
    await h.orchestrator.run({ principal: SUPPORT, goal: 'How is order O-1001?', taskId: 'o2' });
    expect(await refused(() => h.orchestrator.fork('o2', SUPPORT, { step: 1 }))).toBe('operator_only');
    const other = { ...OPERATOR, tenantId: 'globex' };
    expect(await refused(() => h.orchestrator.fork('o2', other, { step: 1 }))).toBe('wrong_tenant');
    expect(await refused(() => h.orchestrator.fork('o2', OPERATOR, { step: 0 }))).toBe('step_out_of_range');
    expect(await refused(() => h.orchestrator.fork('o2', OPERATOR, { step: 10_000 }))).toBe('step_out_of_range');
  });
});
