/**
 * Safe by default, at its edges: the ways a hostile model or a careless host could get around a default that
 * test/safeDefaults.test.ts shows working. A re-read of other arguments does not verify the read that ended unknown;
 * an untrusted tool's failure text is untrusted input too; a `dependsOn` that names no installed read protects
 * nothing, so it is refused; a written waiver cannot ride along with an approver rule.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AgentError, ToolDefinitionError } from '../src/errors.js';
import { reply } from '../src/testing/index.js';
import { defineTool } from '../src/tool.js';
import { E17, harness } from './support/harness.js';

/** A write with a written waiver: a notice to the customer. */
function noticeTool(sent: string[] = []) {
  return defineTool({
    name: 'send_notice',
    description: 'Sends the customer a notice.',
    effect: 'write',
    scopes: [],
    timeoutMs: 200,
    sameKeyRetrySafe: true,
    confirm: { never: 'a notice to the requester only' },
    input: z.strictObject({ text: z.string() }),
    output: z.strictObject({ notice_id: z.string() }),
    execute: async (args, ctx) => {
      sent.push(args.text);
      return { ok: true, value: { notice_id: `N-${ctx.idempotencyKey.slice(-4)}` } };
    },
    lookup: async () => ({ found: false as const }),
  });
}

describe('a write depends only on reads that are installed', () => {
  it.each([
    ['a read that is not installed (a typo)', ['find_availble_rooms'], /dependsOn names find_availble_rooms, which is not an installed read tool/],
    ['a write', ['reserve_room'], /dependsOn names reserve_room, which is not an installed read tool/],
  ])('refuses at createOrchestrator a dependsOn naming %s', (_label, dependsOn, message) => {
    const tool = defineTool({ ...noticeTool(), dependsOn });
    expect(() => harness({ extraTools: [tool] })).toThrow(AgentError);
    expect(() => harness({ extraTools: [tool] })).toThrow(message);
  });
});

describe('a waiver is a waiver alone', () => {
  it('refuses a confirm that both waives and names approvers', () => {
    const confirm = { never: 'approvers look at these anyway', approverScope: 'notices:approve' };
    expect(() => defineTool({ ...noticeTool(), confirm } as never)).toThrow(ToolDefinitionError);
    expect(() => defineTool({ ...noticeTool(), confirm } as never)).toThrow(/confirm\.never stands alone/);
  });

  it('asks the approvers of a rule changed into one after the orchestrator was made', async () => {
    const sent: string[] = [];
    const tool = noticeTool(sent);
    const h = harness({ extraTools: [tool], script: [reply.call('send_notice', { text: 'hi' }), reply.answer('x')] });
    // The gates read the tool as it is now (src/runtime/toolRegistry.ts), past defineTool's checks.
    Object.assign(tool, { confirm: { never: 'approvers look at these anyway', approverScope: 'notices:approve' } });
    const status = await h.orchestrator.run({ principal: E17, goal: 'notify', taskId: 'mutated-waiver' });
    expect(status.pendingConfirmation).toMatchObject({ tool: 'send_notice', approverScope: 'notices:approve', reasons: ['tool_rule'] });
    expect(sent).toEqual([]);
  });
});
