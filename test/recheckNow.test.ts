/**
 * The re-check the gate asks itself, at runtime: which tools get it (`recheckNow`), that such a write is re-checked
 * with no invoked state, and that a refusal there records what the invoked re-check records for the same answer.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AuditEntry } from '../machines/journal.js';
import type { Principal } from '../machines/context.js';
import { createOrchestrator, defineTool } from '../src/index.js';
import { ToolRegistry } from '../src/runtime/toolRegistry.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { ManualClock, reply, scriptedModel } from '../src/testing/index.js';
import { REFUND_BASE, REFUND_USER } from './support/refundTool.js';

const USER = REFUND_USER;

/** A refund whose authorization passes at vetting and refuses at the re-check (its second question). */
function refundTool(extra: Record<string, unknown> = {}) {
  let asked = 0;
  return defineTool({
    ...REFUND_BASE,
    confirm: { never: 'a test refund' },
    validate: () => ({ ok: true }),
    authorize: () =>
      ++asked === 1 ? { ok: true } : { ok: false, code: 'permission_denied', summary: 'the order was locked' },
    execute: async () => ({ ok: true, value: { refunded: true } }),
    lookup: async () => ({ found: false as const }),
    ...extra,
  } as never);
}

describe('recheckNow', () => {
  it('is set for a tool whose re-check waits for nothing, and only then', () => {
    const base = {
      description: 'x',
      effect: 'write' as const,
      scopes: [],
      timeoutMs: 100,
      input: z.strictObject({}),
      output: z.strictObject({}),
      confirm: { never: 'a test write' },
      sameKeyRetrySafe: true,
    };
    const write = {
      ...base,
      execute: async () => ({ ok: true as const, value: {} }),
      lookup: async () => ({ found: false as const }),
    };
    const tools = [
      defineTool({ ...write, name: 'plain' }),
      defineTool({ ...write, name: 'sync', hooks: 'sync', validate: () => ({ ok: true }) }),
      defineTool({ ...write, name: 'async', validate: () => ({ ok: true }) }),
      defineTool({ ...write, name: 'limited', rateLimit: { points: 5, perSeconds: 60 } }),
    ];
    const registry = new ToolRegistry(tools as never);
    const now = (name: string) => registry.toolkit.rules(name)?.recheckNow;
    expect(['plain', 'sync', 'async', 'limited'].map(now)).toEqual([true, true, false, false]);
    registry.refreshesSession = true;
    expect(['plain', 'sync'].map(now)).toEqual([false, false]);
  });

  it('refuses at the gate with the invoked re-check’s record, with no invoked state', async () => {
    const run = async (refresh: boolean) => {
      const states: string[] = [];
      const orchestrator = createOrchestrator({
        store: new MemoryStore(),
        clock: new ManualClock(),
        tools: [refundTool()],
        model: scriptedModel([reply.call('refund_order', { order: 'O-1' }, 'c1'), reply.answer('not refunded')]),
        ...(refresh ? { refreshPrincipal: (p: Principal) => p } : {}),
        inspect: (event) => {
          if (event.type === '@xstate.snapshot')
            states.push(JSON.stringify((event.snapshot as { value?: unknown }).value ?? null));
        },
      });
      const status = await orchestrator.run({ principal: USER, goal: 'refund O-1', taskId: 'r1' });
      const audit = await orchestrator.audit('r1');
      await orchestrator.close();
      return { status, audit, states };
    };
    const gate = await run(false);
    const invoked = await run(true);
    // Every entry but its `moves` stamp (the chart transitions that made it, which differ by design).
    const recheck = (audit: readonly AuditEntry[]) =>
      audit
        .filter((e) => (e.kind === 'gate' || e.kind === 'check_started') && 'gate' in e)
        .map(({ moves: _moves, ...entry }: AuditEntry & { moves?: unknown }) => entry);
    const refusal = recheck(gate.audit).find((e) => e.kind === 'gate' && e.decision === 'reject');
    expect(refusal).toMatchObject({ gate: 'permission', code: 'permission_denied' });
    expect(gate.audit.some((e) => e.kind === 'tool_started')).toBe(false);
    expect(recheck(gate.audit)).toEqual(recheck(invoked.audit));
    expect(gate.states.some((s) => s.includes('"rechecking":"hooks"'))).toBe(false);
    expect(invoked.states.some((s) => s.includes('"rechecking":"hooks"'))).toBe(true);
  });
});
