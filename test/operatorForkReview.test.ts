/**
 * Adversarial checks of `orchestrator.fork`: the copy is offered only tools that are reads now, whatever the original
 * recorded, and bad steps get a clear refusal.
 */
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../machines/context.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { MemoryStore, defineTool } from '../src/index.js';
import { ForkNotAllowedError } from '../src/orchestrator/orchestrator.js';
import { reply } from '../src/testing/index.js';
import { SUPPORT, harness } from './support/harness.js';

const ADMIN = 'tasks:admin';
const OPERATOR: Principal = { userId: 'ops-1', tenantId: 'acme', scopes: ['orders:read', ADMIN] };

/** `note_order` as a read, and the same name after a deployment made it a write. */
const noteOrderShape = {
  name: 'note_order',
  description: 'Notes something about an order.',
  scopes: [],
  input: z.strictObject({ order_id: z.string() }),
  output: z.strictObject({ ok: z.boolean() }),
  timeoutMs: 1_000,
  async execute() {
    return { ok: true as const, value: { ok: true } };
  },
};
const noteOrderRead = defineTool({ ...noteOrderShape, effect: 'read' });
const noteOrderWrite = defineTool({
  ...noteOrderShape,
  effect: 'write',
  sameKeyRetrySafe: true,
  lookup: async () => ({ found: false as const }),
});

function offered(): AgentModel & { tools: Map<string, string[]> } {
  const tools = new Map<string, string[]>();
  return {
    name: 'answers',
    tools,
    async decide(request) {
      tools.set(
        request.taskId,
        request.tools.map((t) => t.name),
      );
      return reply.answer('Done.');
    },
  };
}

describe('orchestrator.fork, adversarially', () => {
  it('offers a tool recorded as a read but now a write to no copy', async () => {
    const store = new MemoryStore();
    const before = offered();
    const a = harness({ model: before, store, adminScope: ADMIN, expirySweepMs: 0, extraTools: [noteOrderRead] });
    await a.orchestrator.run({ principal: SUPPORT, goal: 'How is order O-1001?', taskId: 'orig' });
    expect(before.tools.get('orig')).toContain('note_order');
    const after = offered();
    const b = harness({ model: after, store, adminScope: ADMIN, expirySweepMs: 0, extraTools: [noteOrderWrite] });
    const copy = await b.orchestrator.fork('orig', OPERATOR, { step: 1, taskId: 'copy' });
    await b.orchestrator.settled(copy.taskId);
    expect(after.tools.get('copy')).not.toContain('note_order');
    expect(after.tools.get('copy')).toContain('get_order');
  });

  it('refuses a non-integer, negative or unsafe step with step_out_of_range', async () => {
    const h = harness({ model: offered(), adminScope: ADMIN, expirySweepMs: 0 });
    await h.orchestrator.run({ principal: SUPPORT, goal: 'How is order O-1001?', taskId: 'o3' });
    for (const step of [1.5, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60, '1' as unknown as number]) {
      const error = await h.orchestrator.fork('o3', OPERATOR, { step }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ForkNotAllowedError);
      expect((error as ForkNotAllowedError).reason).toBe('step_out_of_range');
    }
  });
});
