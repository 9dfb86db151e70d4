/**
 * Every orchestrator of a process drives its tasks on one agent machine (`src/runtime/sharedMachine.ts`); what
 * differs between orchestrators (the tools the gates read, the model and tools the actors call) is routed to the
 * task that runs. Two orchestrators with a tool of the same name but other rules, and other models, run tasks at the
 * same time here: each task is judged by its own orchestrator's tools and asks its own model. Outside a task's run
 * the shared machine reads no orchestrator's tools at all.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Principal } from '../machines/context.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { type MachineRoute, activeRoute, currentRoute, routeClock } from '../src/runtime/machineRoute.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { defineTool } from '../src/tool.js';
import type { AgentModel } from '../src/model/agentModel.js';

const PRINCIPAL: Principal = { userId: 'u', tenantId: 't', scopes: ['lookup:read'] };

/** A read named `lookup`; `refuse` makes its synchronous business rule refuse every call. */
function lookup(side: string, options: { refuse?: boolean; scopes?: string[] } = {}) {
  const runs: number[] = [];
  const tool = defineTool({
    name: 'lookup',
    description: `looks up on side ${side}`,
    effect: 'read',
    timeoutMs: 1_000,
    scopes: options.scopes ?? ['lookup:read'],
    input: z.strictObject({ n: z.number().int() }),
    output: z.strictObject({ side: z.string() }),
    hooks: 'sync',
    validate: () => (options.refuse ? { ok: false, code: 'refused', summary: `side ${side} refuses` } : { ok: true }),
    execute: async ({ n }) => {
      runs.push(n);
      return { ok: true, value: { side } };
    },
  });
  return { tool, runs };
}

/** Calls `lookup` once, then answers with what it saw; the first turn waits for `gate` when given. */
function model(name: string, gate?: Promise<void>): AgentModel & { asked: number } {
  const inner = scriptedModel([
    reply.call('lookup', { n: 1 }),
    (view) => {
      const seen = view.last('lookup');
      return reply.answer(`${name} saw ${JSON.stringify(seen?.ok ? seen.data : null)}`);
    },
  ]);
  const wrapped = {
    name,
    asked: 0,
    async decide(request: Parameters<AgentModel['decide']>[0]) {
      wrapped.asked += 1;
      if (request.turn === 1 && gate) await gate;
      return inner.decide(request);
    },
  };
  return wrapped;
}

describe('one agent machine shared by the orchestrators of a process', () => {
  it("judges each task by its own orchestrator's tools and asks its own model, while both run", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const a = lookup('a');
    const b = lookup('b', { refuse: true });
    const modelA = model('A', gate);
    const modelB = model('B');
    const first = createOrchestrator({ tools: [a.tool], model: modelA, store: new MemoryStore() });
    const second = createOrchestrator({ tools: [b.tool], model: modelB, store: new MemoryStore() });
    // A is mid-run (its model turn waits) while B runs from start to end: its gate refuses, A's would not.
    await first.start({ principal: PRINCIPAL, goal: 'look', taskId: 'same-id' });
    const endB = await second.run({ principal: PRINCIPAL, goal: 'look', taskId: 'same-id' });
    release();
    const endA = await first.settled('same-id');
    expect(b.runs).toEqual([]);
    expect(a.runs).toEqual([1]);
    expect(endA.outcome?.status).toBe('answered');
    expect(endB.outcome?.status).toBe('answered');
    const answerOf = async (o: typeof first) =>
      (await o.transcript('same-id')).filter((e) => e.kind === 'answer').map((e) => (e as { text: string }).text);
    expect(await answerOf(first)).toEqual(['A saw {"side":"a"}']);
    expect((await answerOf(second))[0]).toMatch(/^B saw /);
    expect((await answerOf(second))[0]).not.toContain('"side"');
    expect(modelA.asked).toBe(2);
    expect(modelB.asked).toBe(2);
    await Promise.all([first.close(), second.close()]);
  });

  it("refuses by the permission of the task's own orchestrator (scopes differ)", async () => {
    const open = lookup('open');
    const closed = lookup('closed', { scopes: ['admin:read'] });
    const o1 = createOrchestrator({ tools: [open.tool], model: model('1'), store: new MemoryStore() });
    const o2 = createOrchestrator({ tools: [closed.tool], model: model('2'), store: new MemoryStore() });
    const [s1, s2] = await Promise.all([
      o1.run({ principal: PRINCIPAL, goal: 'look', taskId: 't1' }),
      o2.run({ principal: PRINCIPAL, goal: 'look', taskId: 't2' }),
    ]);
    expect([s1.outcome?.status, s2.outcome?.status]).toEqual(['answered', 'answered']);
    expect(open.runs).toEqual([1]);
    expect(closed.runs).toEqual([]);
    await Promise.all([o1.close(), o2.close()]);
  });

  it("reads no orchestrator's tools outside the run of a task", () => {
    expect(() => activeRoute()).toThrow(/outside the run of a task/);
  });

  it("runs XState's delayed events under the route of the task that scheduled them", async () => {
    const route = { toolkit: { rules: () => undefined, sha256: () => '' }, actors: {} } as MachineRoute;
    const seen = await new Promise<MachineRoute | undefined>((resolve) => {
      routeClock(route).setTimeout(() => resolve(currentRoute()), 1);
    });
    expect(seen).toBe(route);
    expect(currentRoute()).toBeUndefined();
    const cleared = routeClock(route).setTimeout(() => expect.unreachable(), 1);
    routeClock(route).clearTimeout(cleared);
    await new Promise((resolve) => setTimeout(resolve, 5));
  });
});
