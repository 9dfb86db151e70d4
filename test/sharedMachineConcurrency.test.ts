/**
 * Two orchestrators with a tool of the same name under other rules (B's business rule refuses every call, A's does
 * not), on the process's one agent machine: many tasks each, interleaved, one tool throwing; each side's offer rule;
 * tasks restored from their snapshots in new orchestrators (mid-read, and waiting for a confirmation) while another
 * side's task runs; and each side's workflows, summariser and sub-tasks. A task judged with the other side's tools,
 * or running the other side's actors, answers with the other side's data, runs the other's tool, or stops.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AgentModel } from '../src/model/agentModel.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import type { TaskStatus } from '../src/orchestrator/status.js';
import { currentRoute } from '../src/runtime/machineRoute.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { defineTool } from '../src/tool.js';
import { E17_SUPPORT } from '../examples/booking/requests.js';
import { until } from './support/harness.js';
import { childWaiting, startParent, subtaskSetup } from './support/subtasks.js';
import { USER, answerOf, lookup, perTask, plainLookup, refund, refunding } from './support/sharedMachineSides.js';

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

  it('a task stopped mid-read resumes in a new orchestrator, its read run again there, while another runs', async () => {
    const store = new MemoryStore();
    let started!: () => void;
    const reading = new Promise<void>((resolve) => (started = resolve));
    const stuckRuns: number[] = [];
    const stuck = defineTool({
      name: 'lookup',
      // The contract of `lookup('A')` (what a task's catalog records): only its execute differs.
      description: 'looks up on side A',
      effect: 'read',
      timeoutMs: 1_000,
      scopes: ['lookup:read'],
      input: z.strictObject({ n: z.number().int() }),
      output: z.strictObject({ side: z.string(), n: z.number() }),
      execute: ({ n }: { n: number }) => {
        stuckRuns.push(n);
        started();
        return new Promise(() => {});
      },
    } as never);
    const a1 = createOrchestrator({ tools: [stuck], model: perTask('A'), store });
    await a1.start({ principal: USER, goal: 'look', taskId: 'a-5' });
    await reading;
    await a1.close();

    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const b = plainLookup('B', held);
    const ob = createOrchestrator({ tools: [b.tool], model: perTask('B'), store: new MemoryStore() });
    await ob.start({ principal: USER, goal: 'look', taskId: 'b-7' });
    const a = lookup('A');
    const a2 = createOrchestrator({ tools: [a.tool], model: perTask('A'), store });
    await a2.resume('a-5');
    const endA = await a2.settled('a-5');
    release();
    const endB = await ob.settled('b-7');
    expect([endA.state, endB.state]).toEqual(['answered', 'answered']);
    expect(stuckRuns).toEqual([5]);
    expect(a.runs).toEqual([5, 105]);
    expect(b.runs).toEqual([7, 107]);
    expect(await answerOf(a2, 'a-5')).toBe(`A saw ${JSON.stringify({ n: 105, side: 'A' })}`);
    await Promise.all([a2.close(), ob.close()]);
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
