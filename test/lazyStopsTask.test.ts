/**
 * A tool whose AbortSignal is made only when it asks (fromTask, runWithTimeout's Cancel) is still told to stop when
 * its task is cancelled or its process closes, even if it first looks at `ctx.signal` after that happened.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../src/tool.js';
import { reply } from '../src/testing/scriptedModel.js';
import { E17, harness, until } from './support/harness.js';

function gatedRead() {
  const seen: { aborted: boolean; reason: unknown }[] = [];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let started = 0;
  const tool = defineTool({
    name: 'probe',
    description: 'Reads a probe.',
    effect: 'read',
    scopes: [],
    timeoutMs: 60_000,
    input: z.strictObject({ id: z.string() }),
    output: z.object({ name: z.string() }),
    execute: async (_args, ctx) => {
      started += 1;
      await gate;
      // The first look at the signal, after the stop.
      seen.push({ aborted: ctx.signal.aborted, reason: ctx.signal.reason });
      return { ok: true, value: { name: 'x' } };
    },
  });
  return { tool, seen, release, started: () => started };
}

describe('a read whose signal is asked for only after its task stopped', () => {
  it.each(['cancel', 'close'] as const)('sees it aborted (%s)', async (how) => {
    const probe = gatedRead();
    const h = harness({ script: [reply.call('probe', { id: 'a' }), reply.answer('ok')], extraTools: [probe.tool] });
    await h.orchestrator.start({ principal: E17, goal: 'probe a', taskId: `lazy-${how}` });
    await until(() => probe.started() === 1);
    if (how === 'cancel') await h.orchestrator.cancel(`lazy-${how}`, E17, 'stop');
    else await h.orchestrator.close();
    probe.release();
    await until(() => probe.seen.length === 1);
    expect(probe.seen[0]!.aborted).toBe(true);
    expect(probe.seen[0]!.reason).toMatchObject({ name: 'AbortError' });
    if (how === 'cancel') await h.orchestrator.close();
  });
});
