/**
 * The shared agent machine's routes (`src/runtime/sharedMachine.ts`, `machineRoute.ts`) against hosts that drive one
 * orchestrator's task from inside another's run: a synchronous business rule, an inspection observer and a tool's
 * `execute` that each confirm a task of another orchestrator at once (whose gates, and whose re-check actor, must be
 * that orchestrator's), and then let the first task go on (whose later gates must read its own tools again); and runs
 * nested three deep. Orchestrator A's `refund_order` runs without confirmation, B's asks for it: a task judged with
 * the other's tools waits, or runs the other's `execute`; a gate asked outside every route stops it (machine error).
 */
import { describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import type { AgentEvent } from '../machines/events.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { type MachineRoute, currentRoute } from '../src/runtime/machineRoute.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { defineTool } from '../src/tool.js';
import { REFUND_BASE } from './support/refundTool.js';
import {
  type Nested,
  USER,
  confirmingOnce,
  liveOf,
  refund,
  refunding,
  settledBoth,
  waitingInB,
} from './support/sharedMachineSides.js';

/** B's task took the confirmation sent from inside A's run, and A's route was the same before and after the send. */
function expectConfirmedInsideRun(nested: Nested): void {
  expect(nested.accepted).toBe(true);
  expect(nested.before).toBeDefined();
  expect(nested.after).toBe(nested.before);
}

describe('the shared machine, driven across orchestrators from inside a run', () => {
  it("a synchronous business rule of A confirms B's task: B is judged by B's tools, A's later gates by A's", async () => {
    const nested: Nested = {};
    const late: { confirmB?: () => void } = {};
    const a = refund('A', () => late.confirmB?.());
    const bTool = refund('B');
    const b = createOrchestrator({ tools: [bTool.tool], model: refunding('B-1'), store: new MemoryStore() });
    const orchestratorA = createOrchestrator({ tools: [a.tool], model: refunding('A-1'), store: new MemoryStore() });
    late.confirmB = confirmingOnce(await waitingInB(b, 'b-task'), nested);
    const endA = await orchestratorA.run({ principal: USER, goal: 'refund', taskId: 'a-task' });
    const endB = await b.settled('b-task');
    expectConfirmedInsideRun(nested);
    // A ran its refund unconfirmed (B's rule would have made it wait); B's ran once confirmed, with B's execute.
    expect(endA.state).toBe('answered');
    expect(endB.state).toBe('answered');
    expect(a.ran).toEqual(['A:A-1']);
    expect(bTool.ran).toEqual(['B:B-1']);
    expect(currentRoute()).toBeUndefined();
    await Promise.all([orchestratorA.close(), b.close()]);
  });

  it("an inspection observer of A confirms B's task while A's actor runs; A goes on under its own route", async () => {
    const nested: Nested = {};
    const late: { confirmB?: () => void } = {};
    const inspect = (event: InspectionEvent) => {
      // Inside A's run: the model's answer reaches A's actor (A's gates judge the proposed refund right after).
      if (event.type !== '@xstate.event' || event.event.type !== 'xstate.done.actor.model') return;
      late.confirmB?.();
    };
    const a = refund('A');
    const bTool = refund('B');
    const b = createOrchestrator({ tools: [bTool.tool], model: refunding('B-1'), store: new MemoryStore() });
    const orchestratorA = createOrchestrator({
      tools: [a.tool],
      model: refunding('A-1'),
      store: new MemoryStore(),
      inspect,
    });
    late.confirmB = confirmingOnce(await waitingInB(b, 'b-task'), nested);
    const endA = await orchestratorA.run({ principal: USER, goal: 'refund', taskId: 'a-task' });
    const endB = await b.settled('b-task');
    expectConfirmedInsideRun(nested);
    expect([endA.state, endB.state]).toEqual(['answered', 'answered']);
    expect(a.ran).toEqual(['A:A-1']);
    expect(bTool.ran).toEqual(['B:B-1']);
    await Promise.all([orchestratorA.close(), b.close()]);
  });

  it("a tool's execute of A confirms B's task: no route outside the run, and none leaks into A's", async () => {
    const nested: Nested & { inExecute?: MachineRoute | null } = {};
    const late: { confirmB?: () => void } = {};
    const ranA: string[] = [];
    const aTool = defineTool({
      ...REFUND_BASE,
      confirm: { never: 'side A refunds without asking (test)' },
      execute: async (args: { order: string }) => {
        nested.inExecute = currentRoute() ?? null;
        late.confirmB?.();
        ranA.push(`A:${args.order}`);
        return { ok: true, value: { refunded: true } };
      },
      lookup: async () => ({ found: false as const }),
    } as never);
    const bTool = refund('B');
    const b = createOrchestrator({ tools: [bTool.tool], model: refunding('B-1'), store: new MemoryStore() });
    const a = createOrchestrator({ tools: [aTool], model: refunding('A-1'), store: new MemoryStore() });
    late.confirmB = confirmingOnce(await waitingInB(b, 'b-task'), nested);
    await a.run({ principal: USER, goal: 'refund', taskId: 'a-task' });
    const { endA, endB } = await settledBoth(a, b, 'a-task', 'b-task');
    expect(nested.inExecute).toBeNull();
    expect(nested.accepted).toBe(true);
    expect(nested.before).toBeUndefined();
    expect(nested.after).toBeUndefined();
    expect([endA.state, endB.state]).toEqual(['answered', 'answered']);
    expect(ranA).toEqual(['A:A-1']);
    expect(bTool.ran).toEqual(['B:B-1']);
    await Promise.all([a.close(), b.close()]);
  });

  it('nests three runs deep (A, then B, then another task of A) and comes back to each route in turn', async () => {
    const seen: { depth: string; route: MachineRoute | undefined }[] = [];
    let fromA: (() => void) | undefined;
    let fromB: (() => void) | undefined;
    const aTool = refund('A', () => fromA?.());
    const bTool = refund('B', () => fromB?.());
    const oa = createOrchestrator({
      tools: [aTool.tool],
      model: scriptedModel([
        (view) => reply.call('refund_order', { order: view.goal }),
        (view) => reply.answer(`refunded ${view.goal}`),
      ]),
      store: new MemoryStore(),
    });
    const ob = createOrchestrator({ tools: [bTool.tool], model: refunding('B-1'), store: new MemoryStore() });
    const { task: bTask, confirm: confirmB } = await waitingInB(ob, 'b-task');
    const liveA = liveOf(oa);
    await oa.start({ principal: USER, goal: 'A-2', taskId: 'a-2' });
    await oa.settled('a-2');
    // A's other task, ended and loaded again: an event sent to it from inside B's run is judged under A's route.
    const a2 = await liveA.exclusive('a-2', () => liveA.hydrate('a-2'));
    fromB = () => {
      fromB = undefined;
      seen.push({ depth: 'B before', route: currentRoute() });
      a2.send({ type: 'task.cancelled', at: Date.now(), reason: 'nested', by: USER.userId } as AgentEvent);
      seen.push({ depth: 'B after', route: currentRoute() });
    };
    fromA = () => {
      fromA = undefined;
      seen.push({ depth: 'A before', route: currentRoute() });
      bTask.send(confirmB());
      seen.push({ depth: 'A after', route: currentRoute() });
    };
    const endA = await oa.run({ principal: USER, goal: 'A-1', taskId: 'a-1' });
    const endB = await ob.settled('b-task');
    expect([endA.state, endB.state]).toEqual(['answered', 'answered']);
    expect(aTool.ran.sort()).toEqual(['A:A-1', 'A:A-2']);
    expect(bTool.ran).toEqual(['B:B-1']);
    const [aBefore, bBefore, bAfter, aAfter] = seen;
    expect(seen.map((s) => s.depth)).toEqual(['A before', 'B before', 'B after', 'A after']);
    expect(aBefore!.route).toBeDefined();
    expect(bBefore!.route).toBeDefined();
    expect(bBefore!.route).not.toBe(aBefore!.route);
    expect(bAfter!.route).toBe(bBefore!.route);
    expect(aAfter!.route).toBe(aBefore!.route);
    expect(currentRoute()).toBeUndefined();
    await Promise.all([oa.close(), ob.close()]);
  });
});
