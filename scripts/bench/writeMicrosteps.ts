/**
 * Counts what the chart and the runtime do for one confirmed write round: the model proposes one write whose tool
 * declares synchronous hooks (`hooks: 'sync'`), the user confirms it, it runs, and the model answers.
 * `npx tsx scripts/bench/writeMicrosteps.ts` prints XState's inspection counts (microsteps, actions, actors started)
 * and the AbortControllers and timers made from the confirmation to the settled task, twice: with the gate's own
 * re-check (nothing it asks waits), and with a host `refreshPrincipal`, which keeps the invoked re-check.
 */
import { z } from 'zod';
import { createOrchestrator, defineTool } from '../../src/index.js';
import type { Principal } from '../../machines/context.js';
import { MemoryStore } from '../../src/store/memoryStore.js';
import { reply, scriptedModel } from '../../src/testing/index.js';
import { COUNT_KEYS, inspectionCounter } from './liveCounts.js';

const USER: Principal = { userId: 'u1', tenantId: 't1', scopes: ['orders:refund'] };
async function count(refresh: boolean) {
  const counter = inspectionCounter();
  const refund = defineTool({
    name: 'refund_order',
    description: 'Refunds an order.',
    effect: 'write',
    scopes: ['orders:refund'],
    timeoutMs: 1_000,
    sameKeyRetrySafe: true,
    hooks: 'sync',
    input: z.strictObject({ order: z.string(), cents: z.number() }),
    output: z.strictObject({ refunded: z.boolean() }),
    validate: (args: { cents: number }) => (args.cents > 0 ? { ok: true } : { ok: false, summary: 'nothing' }),
    authorize: () => ({ ok: true }),
    execute: async () => ({ ok: true, value: { refunded: true } }),
    lookup: async () => ({ found: false as const }),
  });
  const orchestrator = createOrchestrator({
    store: new MemoryStore(),
    tools: [refund],
    model: scriptedModel([reply.call('refund_order', { order: 'O-1', cents: 500 }), reply.answer('refunded')]),
    ...(refresh ? { refreshPrincipal: (p: Principal) => p } : {}),
    inspect: counter.inspect,
  });
  const waiting = await orchestrator.run({ principal: USER, goal: 'refund O-1', taskId: `w${refresh}` });
  if (waiting.state !== 'waiting_for_confirmation') throw new Error(`the task is ${waiting.state}`);
  const before = counter.now();
  await orchestrator.confirm(waiting.taskId, USER, waiting.pendingConfirmation!);
  const status = await orchestrator.settled(waiting.taskId);
  if (status.state !== 'answered' && status.state !== 'done') throw new Error(`the task ended ${status.state}`);
  const after = counter.now();
  await orchestrator.close();
  return COUNT_KEYS.map((key) => `${key} ${after[key] - before[key]}`).join(', ');
}

console.log(`gate's own re-check:           ${await count(false)}`);
console.log(`invoked re-check (refreshPrincipal): ${await count(true)}`);
