/**
 * Two sides, A and B, of the shared agent machine's tests (test/sharedMachine*.test.ts): tools of the same name under
 * other rules on each side, models that say which side they saw, and access to a task driven synchronously.
 */
import { expect } from 'vitest';
import { z } from 'zod';
import type { Principal } from '../../machines/context.js';
import type { AgentEvent } from '../../machines/events.js';
import type { LiveTask } from '../../src/runtime/liveTask.js';
import type { LiveTasks } from '../../src/orchestrator/liveTasks.js';
import type { Orchestrator } from '../../src/orchestrator/orchestrator.js';
import { type MachineRoute, currentRoute } from '../../src/runtime/machineRoute.js';
import { reply, scriptedModel } from '../../src/testing/scriptedModel.js';
import { defineTool } from '../../src/tool.js';
import type { AgentModel } from '../../src/model/agentModel.js';
import { REFUND_BASE, REFUND_USER } from './refundTool.js';

export const USER: Principal = { ...REFUND_USER, scopes: [...REFUND_USER.scopes, 'lookup:read'] };

/** `refund_order` on one side: B's asks for confirmation, A's runs without. `onValidate` runs in the gate's guard. */
export function refund(side: 'A' | 'B', onValidate?: () => void) {
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

export function refunding(order: string): AgentModel {
  return scriptedModel([reply.call('refund_order', { order }), reply.answer(`refunded ${order}`)]);
}

/** The live task table of an orchestrator (not public: the tests drive a task synchronously, as a host cannot). */
export function liveOf(orchestrator: Orchestrator): LiveTasks {
  return (orchestrator as unknown as { live: LiveTasks }).live;
}

/** B's task, waiting for the confirmation of its refund, loaded into memory to be driven synchronously. */
export async function waitingInB(
  b: Orchestrator,
  taskId: string,
): Promise<{ task: LiveTask; confirm: () => AgentEvent }> {
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
export interface Nested {
  before?: MachineRoute;
  after?: MachineRoute;
  accepted?: boolean;
}

/**
 * A call that confirms B's waiting task (`waitingInB`) the first time it is made, wherever from, and notes in
 * `nested` the route around the send; later calls do nothing.
 */
export function confirmingOnce({ task, confirm }: Awaited<ReturnType<typeof waitingInB>>, nested: Nested): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    nested.before = currentRoute();
    nested.accepted = task.send(confirm())?.accepted;
    nested.after = currentRoute();
  };
}

export async function settledBoth(a: Orchestrator, b: Orchestrator, aId: string, bId: string) {
  const [endA, endB] = await Promise.all([a.settled(aId), b.settled(bId)]);
  return { endA, endB };
}

/** A read named `lookup`: B's business rule refuses every call; `throwOn` makes A's execute throw for that `n`. */
export function lookup(side: 'A' | 'B', options: { throwOn?: number } = {}) {
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
export function looking(name: string, n: number): AgentModel {
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
export function perTask(side: string): AgentModel {
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

export async function answerOf(orchestrator: Orchestrator, taskId: string): Promise<string> {
  const entries = await orchestrator.transcript(taskId);
  return (entries.filter((e) => e.kind === 'answer').at(-1) as { text?: string } | undefined)?.text ?? '';
}

/** A read named `lookup` that records its side and `n`; `hold` keeps each run waiting until it resolves. */
export function plainLookup(side: 'A' | 'B', hold?: Promise<void>) {
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
