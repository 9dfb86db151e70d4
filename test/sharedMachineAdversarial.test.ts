/**
 * The shared agent machine's routes (`src/runtime/sharedMachine.ts`, `machineRoute.ts`) against hosts that drive one
 * orchestrator's task from inside another's run: a synchronous business rule, an inspection observer and a tool's
 * `execute` that each confirm a task of another orchestrator at once (whose gates, and whose re-check actor, must be
 * that orchestrator's), and then let the first task go on (whose later gates must read its own tools again). Then
 * two orchestrators with a tool of the same name under other rules, many tasks each, interleaved, one tool throwing,
 * a task restored from its snapshot (in a new orchestrator over the same store) while another one runs, and each
 * orchestrator's own offer rule, workflows, summariser and sub-tasks.
 *
 * What tells a wrong route apart: orchestrator A's `refund_order` runs without confirmation, B's asks for it; B's
 * `lookup` refuses every call, A's does not. A task judged with the other's tools waits, or is refused, or runs the
 * other's `execute`; a gate asked outside every route stops the task with a machine error.
 */
import { describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import { z } from 'zod';
import type { Principal } from '../machines/context.js';
import type { AgentEvent } from '../machines/events.js';
import type { LiveTask } from '../src/runtime/liveTask.js';
import type { LiveTasks } from '../src/orchestrator/liveTasks.js';
import { type Orchestrator, createOrchestrator } from '../src/orchestrator/orchestrator.js';
import type { TaskStatus } from '../src/orchestrator/status.js';
import { type MachineRoute, currentRoute } from '../src/runtime/machineRoute.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { defineTool } from '../src/tool.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { REFUND_BASE, REFUND_USER } from './support/refundTool.js';
import { E17_SUPPORT } from '../examples/booking/requests.js';
import { until } from './support/harness.js';
import { childWaiting, startParent, subtaskSetup } from './support/subtasks.js';

const USER: Principal = { ...REFUND_USER, scopes: [...REFUND_USER.scopes, 'lookup:read'] };

/** `refund_order` on one side: B's asks for confirmation, A's runs without. `onValidate` runs in the gate's guard. */
function refund(side: 'A' | 'B', onValidate?: () => void) {
  const ran: string[] = [];
  const tool = defineTool({
    ...REFUND_BASE,
    description: `refunds on side ${side}`,
    confirm: side === 'B' ? 'always' : { never: 'side A refunds without asking (test)' },
    validate: () => {
      onValidate?.();
      return { ok: true };
    },
    execute: async (args: { order: string }) => {
      ran.push(`${side}:${args.order}`);
      return { ok: true, value: { refunded: true } };
    },
    lookup: async () => ({ found: false as const }),
  } as never);
  return { tool, ran };
}

function refunding(order: string): AgentModel {
  return scriptedModel([reply.call('refund_order', { order }), reply.answer(`refunded ${order}`)]);
}

/** The live task table of an orchestrator (not public: the tests drive a task synchronously, as a host cannot). */
function liveOf(orchestrator: Orchestrator): LiveTasks {
  return (orchestrator as unknown as { live: LiveTasks }).live;
}

/** B's task, waiting for the confirmation of its refund, loaded into memory to be driven synchronously. */
async function waitingInB(b: Orchestrator, taskId: string): Promise<{ task: LiveTask; confirm: () => AgentEvent }> {
  const status = await b.run({ principal: USER, goal: 'refund', taskId });
  expect(status.state).toBe('waiting_for_confirmation');
  const pending = status.pendingConfirmation!;
  const live = liveOf(b);
  const task = await live.exclusive(taskId, () => live.hydrate(taskId));
  const confirm = () =>
    ({
      type: 'user.confirmed',
      at: Date.now(),
      confirmationId: pending.id,
      argsHash: pending.argsHash,
      userId: USER.userId,
      scopes: [...USER.scopes],
      policyVersion: pending.policyVersion,
    }) as AgentEvent;
  return { task, confirm };
}

/** What happened when B's task was confirmed from inside A's run. */
interface Nested {
  before?: MachineRoute;
  after?: MachineRoute;
  accepted?: boolean;
}

async function settledBoth(a: Orchestrator, b: Orchestrator, aId: string, bId: string) {
  const [endA, endB] = await Promise.all([a.settled(aId), b.settled(bId)]);
  return { endA, endB };
}

describe('the shared machine, driven across orchestrators from inside a run', () => {
  it("a synchronous business rule of A confirms B's task: B is judged by B's tools, A's later gates by A's", async () => {
    const nested: Nested = {};
    let confirmB: (() => void) | undefined;
    const a = refund('A', () => confirmB?.());
    const bTool = refund('B');
    const b = createOrchestrator({ tools: [bTool.tool], model: refunding('B-1'), store: new MemoryStore() });
    const orchestratorA = createOrchestrator({ tools: [a.tool], model: refunding('A-1'), store: new MemoryStore() });
    const { task, confirm } = await waitingInB(b, 'b-task');
    confirmB = () => {
      confirmB = undefined;
      nested.before = currentRoute();
      nested.accepted = task.send(confirm())?.accepted;
      nested.after = currentRoute();
    };
    const endA = await orchestratorA.run({ principal: USER, goal: 'refund', taskId: 'a-task' });
    const endB = await b.settled('b-task');
    expect(nested.accepted).toBe(true);
    expect(nested.before).toBeDefined();
    expect(nested.after).toBe(nested.before);
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
    let confirmB: (() => void) | undefined;
    const inspect = (event: InspectionEvent) => {
      // Inside A's run: the model's answer reaches A's actor (A's gates judge the proposed refund right after).
      if (event.type !== '@xstate.event' || event.event.type !== 'xstate.done.actor.model') return;
      confirmB?.();
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
    const { task, confirm } = await waitingInB(b, 'b-task');
    confirmB = () => {
      confirmB = undefined;
      nested.before = currentRoute();
      nested.accepted = task.send(confirm())?.accepted;
      nested.after = currentRoute();
    };
    const endA = await orchestratorA.run({ principal: USER, goal: 'refund', taskId: 'a-task' });
    const endB = await b.settled('b-task');
    expect(nested.accepted).toBe(true);
    expect(nested.before).toBeDefined();
    expect(nested.after).toBe(nested.before);
    expect([endA.state, endB.state]).toEqual(['answered', 'answered']);
    expect(a.ran).toEqual(['A:A-1']);
    expect(bTool.ran).toEqual(['B:B-1']);
    await Promise.all([orchestratorA.close(), b.close()]);
  });

  it("a tool's execute of A confirms B's task: no route outside the run, and none leaks into A's", async () => {
    const nested: Nested & { inExecute?: MachineRoute | null } = {};
    let confirmB: (() => void) | undefined;
    const ranA: string[] = [];
    const aTool = defineTool({
      ...REFUND_BASE,
      confirm: { never: 'side A refunds without asking (test)' },
      execute: async (args: { order: string }) => {
        nested.inExecute = currentRoute() ?? null;
        confirmB?.();
        ranA.push(`A:${args.order}`);
        return { ok: true, value: { refunded: true } };
      },
      lookup: async () => ({ found: false as const }),
    } as never);
    const bTool = refund('B');
    const b = createOrchestrator({ tools: [bTool.tool], model: refunding('B-1'), store: new MemoryStore() });
    const a = createOrchestrator({ tools: [aTool], model: refunding('A-1'), store: new MemoryStore() });
    const { task, confirm } = await waitingInB(b, 'b-task');
    confirmB = () => {
      confirmB = undefined;
      nested.before = currentRoute();
      nested.accepted = task.send(confirm())?.accepted;
      nested.after = currentRoute();
    };
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
});

/** A read named `lookup`: B's business rule refuses every call; `throwOn` makes A's execute throw for that `n`. */
function lookup(side: 'A' | 'B', options: { throwOn?: number } = {}) {
  const runs: number[] = [];
  const tool = defineTool({
    name: 'lookup',
    description: `looks up on side ${side}`,
    effect: 'read',
    timeoutMs: 1_000,
    scopes: ['lookup:read'],
    input: z.strictObject({ n: z.number().int() }),
    output: z.strictObject({ side: z.string(), n: z.number() }),
    hooks: 'sync',
    validate: () => (side === 'B' ? { ok: false, code: 'refused', summary: 'side B refuses' } : { ok: true }),
    // Not an async function: a throw is synchronous, inside the reads actor's run.
    execute: ({ n }: { n: number }) => {
      runs.push(n);
      if (n === options.throwOn) throw new Error(`side ${side} broke on ${n}`);
      // Settles after a varying number of turns of the event loop, so the two sides' settles interleave.
      return new Promise((resolve) =>
        setTimeout(() => resolve({ ok: true, value: { side, n } }), (n * 7) % 5),
      ) as never;
    },
  } as never);
  return { tool, runs };
}

/** Looks up its own `n` twice (two rounds), then answers with what it saw. */
function looking(name: string, n: number): AgentModel {
  return scriptedModel([
    reply.call('lookup', { n }),
    reply.call('lookup', { n: n + 100 }),
    (view) => {
      const seen = view.last('lookup');
      return reply.answer(`${name} saw ${JSON.stringify(seen?.ok ? seen.data : (seen?.code ?? null))}`);
    },
  ]);
}

/** One model per task (by id), of one side. */
function perTask(side: string): AgentModel {
  const models = new Map<string, AgentModel>();
  return {
    name: `model-${side}`,
    decide(request) {
      let model = models.get(request.taskId);
      if (!model) {
        model = looking(side, Number(request.taskId.split('-')[1]));
        models.set(request.taskId, model);
      }
      return model.decide(request);
    },
  };
}

async function answerOf(orchestrator: Orchestrator, taskId: string): Promise<string> {
  const entries = await orchestrator.transcript(taskId);
  return (entries.filter((e) => e.kind === 'answer').at(-1) as { text?: string } | undefined)?.text ?? '';
}

describe('two orchestrators, interleaved, on one machine', () => {
  it("many tasks each, settles interleaved, one tool throwing: every gate and actor is the task's own", async () => {
    const a = lookup('A', { throwOn: 3 });
    const b = lookup('B');
    const oa = createOrchestrator({ tools: [a.tool], model: perTask('A'), store: new MemoryStore() });
    const ob = createOrchestrator({ tools: [b.tool], model: perTask('B'), store: new MemoryStore() });
    const ids = [1, 2, 3, 4, 5, 6, 7, 8];
    const ends = await Promise.all(
      ids.flatMap((n) => [
        oa.run({ principal: USER, goal: 'look', taskId: `a-${n}` }),
        ob.run({ principal: USER, goal: 'look', taskId: `b-${n}` }),
      ]),
    );
    expect(ends.map((s: TaskStatus) => s.state)).toEqual(ids.flatMap(() => ['answered', 'answered']));
    // B's rule refused every call: B's execute never ran; A's ran each task's two calls, and nothing of B's.
    expect(b.runs).toEqual([]);
    expect([...a.runs].sort((x, y) => x - y)).toEqual([...ids, ...ids.map((n) => n + 100)].sort((x, y) => x - y));
    for (const n of ids) {
      expect(await answerOf(oa, `a-${n}`)).toBe(`A saw ${JSON.stringify({ n: n + 100, side: 'A' })}`);
      expect(await answerOf(ob, `b-${n}`)).toBe('B saw "refused"');
    }
    // The throw of A's tool on task a-3 is that call's failure, and that task's only.
    const finished = async (taskId: string) =>
      (await oa.audit(taskId)).filter((e) => e.kind === 'tool_finished').map((e) => (e as { code: string }).code);
    expect(await finished('a-3')).toEqual(['tool_error', 'ok']);
    for (const n of ids.filter((n) => n !== 3)) expect(await finished(`a-${n}`)).toEqual(['ok', 'ok']);
    expect(currentRoute()).toBeUndefined();
    await Promise.all([oa.close(), ob.close()]);
  });

  it("offers the tools of each task's own orchestrator's offer rule (one has none, one offers nothing)", async () => {
    const a = lookup('A');
    const b = plainLookup('B');
    const offeredToB: string[][] = [];
    // A's rule is absent (every tool); B's offers nothing, so B's call is refused before any of B's hooks.
    const oa = createOrchestrator({ tools: [a.tool], model: perTask('A'), store: new MemoryStore() });
    const ob = createOrchestrator({
      tools: [b.tool],
      model: perTask('B'),
      store: new MemoryStore(),
      offer: () => {
        offeredToB.push([]);
        return [];
      },
    });
    const ids = [1, 2, 3];
    await Promise.all(
      ids.flatMap((n) => [
        oa.run({ principal: USER, goal: 'look', taskId: `a-${n}` }),
        ob.run({ principal: USER, goal: 'look', taskId: `b-${n}` }),
      ]),
    );
    expect(b.runs).toEqual([]);
    expect(offeredToB.length).toBeGreaterThan(0);
    expect([...a.runs].sort((x, y) => x - y)).toEqual([1, 2, 3, 101, 102, 103]);
    for (const n of ids) {
      expect(await answerOf(oa, `a-${n}`)).toBe(`A saw ${JSON.stringify({ n: n + 100, side: 'A' })}`);
      expect(await answerOf(ob, `b-${n}`)).not.toContain('side');
    }
    await Promise.all([oa.close(), ob.close()]);
  });

  it("a task restored from its snapshot in a new orchestrator while another's task runs: each its own tools", async () => {
    // A task of B's configuration waits for confirmation, is left in the store, and is resumed by a fresh
    // orchestrator with B's tools (a restarted process) while A's task is mid-run (its model turn held).
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const storeB = new MemoryStore();
    const first = refund('B');
    const b1 = createOrchestrator({ tools: [first.tool], model: refunding('B-1'), store: storeB });
    const waiting = await b1.run({ principal: USER, goal: 'refund', taskId: 'restored' });
    expect(waiting.state).toBe('waiting_for_confirmation');
    await b1.close();

    const a = refund('A');
    const heldModel = refunding('A-1');
    const modelA: AgentModel = {
      name: 'held',
      async decide(request) {
        if (request.turn === 1) await gate;
        return heldModel.decide(request);
      },
    };
    const oa = createOrchestrator({ tools: [a.tool], model: modelA, store: new MemoryStore() });
    await oa.start({ principal: USER, goal: 'refund', taskId: 'running' });

    const second = refund('B');
    const b2 = createOrchestrator({ tools: [second.tool], model: refunding('B-1'), store: storeB });
    const confirmed = await b2.confirm('restored', USER, waiting.pendingConfirmation!);
    expect(confirmed.accepted).toBe(true);
    const endB = await b2.settled('restored');
    release();
    const endA = await oa.settled('running');
    expect([endA.state, endB.state]).toEqual(['answered', 'answered']);
    expect(first.ran).toEqual([]);
    expect(second.ran).toEqual(['B:B-1']);
    expect(a.ran).toEqual(['A:A-1']);
    await Promise.all([oa.close(), b2.close()]);
  });
});

/** A read named `lookup` that records its side and `n`; `hold` keeps each run waiting until it resolves. */
function plainLookup(side: 'A' | 'B', hold?: Promise<void>) {
  const runs: number[] = [];
  const tool = defineTool({
    name: 'lookup',
    description: `looks up on side ${side}`,
    effect: 'read',
    timeoutMs: 60_000,
    scopes: ['lookup:read'],
    input: z.strictObject({ n: z.number().int() }),
    output: z.strictObject({ side: z.string(), n: z.number() }),
    execute: async ({ n }: { n: number }) => {
      runs.push(n);
      if (hold) await hold;
      return { ok: true, value: { side, n } };
    },
  } as never);
  return { tool, runs };
}

describe("routed workflows and summariser: each task's orchestrator's own", () => {
  it('follows the workflow of its own orchestrator when both install one of the same name', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const flow = (n: number) => ({
      name: 'flow',
      start: 'look',
      steps: {
        look: { purpose: `look ${n} up`, call: { tool: 'lookup', args: () => ({ n }) }, next: () => 'again' },
        again: { purpose: `look ${n + 10} up`, call: { tool: 'lookup', args: () => ({ n: n + 10 }) } },
      },
    });
    const a = plainLookup('A', held);
    const b = plainLookup('B');
    const oa = createOrchestrator({
      tools: [a.tool],
      model: scriptedModel([]),
      store: new MemoryStore(),
      workflows: [flow(1) as never],
    });
    const ob = createOrchestrator({
      tools: [b.tool],
      model: scriptedModel([]),
      store: new MemoryStore(),
      workflows: [flow(2) as never],
    });
    // A's flow is mid-call (its read held) while B's runs from start to end.
    await oa.start({ principal: USER, goal: 'follow', taskId: 'wf', workflow: 'flow' });
    const endB = await ob.run({ principal: USER, goal: 'follow', taskId: 'wf', workflow: 'flow' });
    release();
    const endA = await oa.settled('wf');
    expect([endA.state, endB.state]).toEqual(['answered', 'answered']);
    expect(a.runs).toEqual([1, 11]);
    expect(b.runs).toEqual([2, 12]);
    await Promise.all([oa.close(), ob.close()]);
  });

  it("compacts with its own orchestrator's summariser, and goes on under its route once it settles", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const asked = { A: 0, B: 0 };
    const summaries: Record<'A' | 'B', string[]> = { A: [], B: [] };
    /** Reads pages until `rounds` results are in, then answers; keeps the summaries it was given. */
    const reader = (side: 'A' | 'B', rounds: number): AgentModel => ({
      name: `reader-${side}`,
      async decide(request) {
        if (request.summary) summaries[side].push(request.summary.text);
        const results = (await request.transcript()).filter((e) => e.kind === 'result').length;
        return results < rounds
          ? reply.call('lookup', { n: results + 1 }, `c${results + 1}`)
          : reply.answer(`${side} read ${results}.`);
      },
    });
    const wordy = (side: 'A' | 'B') =>
      defineTool({
        name: 'lookup',
        description: `reads on side ${side}`,
        effect: 'read',
        timeoutMs: 1_000,
        scopes: ['lookup:read'],
        input: z.strictObject({ n: z.number().int() }),
        output: z.strictObject({ side: z.string(), text: z.string() }),
        execute: async () => ({ ok: true, value: { side, text: 'lorem ipsum dolor sit amet '.repeat(20) } }),
      } as never);
    const oa = createOrchestrator({
      tools: [wordy('A')],
      model: reader('A', 6),
      store: new MemoryStore(),
      compaction: {
        atTokens: 600,
        summarise: async (older) => {
          asked.A += 1;
          await held;
          return `SUMMARY-A of ${older.length}`;
        },
      },
    });
    const ob = createOrchestrator({
      tools: [wordy('B')],
      model: reader('B', 6),
      store: new MemoryStore(),
      compaction: {
        atTokens: 600,
        summarise: async (older) => {
          asked.B += 1;
          return `SUMMARY-B of ${older.length}`;
        },
      },
    });
    await oa.start({ principal: USER, goal: 'read', taskId: 'c' });
    const endB = await ob.run({ principal: USER, goal: 'read', taskId: 'c' });
    release();
    const endA = await oa.settled('c');
    expect([endA.state, endB.state]).toEqual(['answered', 'answered']);
    expect(asked.A).toBeGreaterThan(0);
    expect(asked.B).toBeGreaterThan(0);
    expect(summaries.A.length).toBeGreaterThan(0);
    expect(summaries.B.length).toBeGreaterThan(0);
    expect(summaries.A.every((text) => text.includes('SUMMARY-A') && !text.includes('SUMMARY-B'))).toBe(true);
    expect(summaries.B.every((text) => text.includes('SUMMARY-B') && !text.includes('SUMMARY-A'))).toBe(true);
    await Promise.all([oa.close(), ob.close()]);
  });
});

describe('sub-tasks of two orchestrators at once', () => {
  it("each parent's child runs, and is taken back, in its own orchestrator with its own tools", async () => {
    const first = subtaskSetup();
    const second = subtaskSetup();
    await Promise.all([startParent(first.orchestrator, 'p'), startParent(second.orchestrator, 'p')]);
    const [childA, childB] = await Promise.all([
      childWaiting(first.orchestrator, 'p'),
      childWaiting(second.orchestrator, 'p'),
    ]);
    // B's child is confirmed and runs to the end (its parent then too) while A's child still waits.
    expect((await second.orchestrator.confirm(childB.taskId, E17_SUPPORT, childB.pendingConfirmation!)).accepted).toBe(
      true,
    );
    await until(async () => (await second.orchestrator.status('p')).outcome !== null);
    expect(first.desk.refunds).toHaveLength(0);
    expect(second.desk.refunds).toHaveLength(1);
    expect((await first.orchestrator.confirm(childA.taskId, E17_SUPPORT, childA.pendingConfirmation!)).accepted).toBe(
      true,
    );
    await until(async () => (await first.orchestrator.status('p')).outcome !== null);
    expect((await first.orchestrator.status('p')).state).toBe('done');
    expect((await second.orchestrator.status('p')).state).toBe('done');
    expect(first.desk.refunds).toHaveLength(1);
    expect(second.desk.refunds).toHaveLength(1);
    await Promise.all([first.orchestrator.close(), second.orchestrator.close()]);
  });
});
