/**
 * statechart-agent/mcp against a real MCP server built with the same SDK (test/fixtures/mcp/server.ts), in this
 * process and linked in memory: default deny, renames, strict schemas, hints that only tighten, the write rules, the
 * idempotency key in `_meta`, failures, timeouts, caps, and a prompt injection that stays data. One test runs over
 * Streamable HTTP; the server as a child process over stdio (ended, lost, failing its handshake) is in
 * mcp.process.test.ts.
 */
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Principal } from '../machines/context.js';
import { McpLookupUnavailableError, McpPolicyError, ToolDefinitionError } from '../src/errors.js';
import {
  IDEMPOTENCY_META_KEY,
  type McpConnection,
  type McpToolPolicy,
  connectMcp,
  importMcpTools,
  untrustedOutputSchema,
} from '../src/mcp.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { type ReadTool, type Tool, type ToolContext, type WriteTool } from '../src/tool.js';
import { INJECTION, fixtureServer, fixtureState } from './fixtures/mcp/server.js';
import { byKind, harness } from './support/harness.js';
import { PROJECT_ROOT } from './support/workers.js';
import { scaled } from './support/timeScale.js';

/** The fixture server in this process, connected to the client through an in-memory transport pair. */
async function linkedFixture(): Promise<McpConnection> {
  const [client, server] = InMemoryTransport.createLinkedPair();
  await fixtureServer().connect(server);
  return connectMcp({ transport: client });
}
const PAYER: Principal = {
  userId: 'E17',
  tenantId: 'acme',
  scopes: ['orders:read', 'payments:write', 'notes:read', 'profiles:read'],
};

const read = (name: string, more: Partial<McpToolPolicy> = {}): McpToolPolicy =>
  ({ effect: 'read', scopes: ['notes:read'], timeoutMs: 2_000, name, ...more }) as McpToolPolicy;
const ORDER: McpToolPolicy = { name: 'lookup_order', effect: 'read', scopes: ['orders:read'], timeoutMs: 2_000 };

interface Stats {
  payments: number;
  executions: number;
  keys: string[];
  calls: Record<string, number>;
  cancelled: number;
  lastArgs: Record<string, unknown>;
}
async function stats(connection: McpConnection): Promise<Stats> {
  return (await connection.client.callTool({ name: 'stats', arguments: {} })).structuredContent as unknown as Stats;
}
function ctx(signal = new AbortController().signal): ToolContext {
  return { taskId: 't', callId: 'c', principal: PAYER, signal, attempt: 1 };
}
const byName = (tools: Tool[], name: string) => {
  const tool = tools.find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name} in ${tools.map((t) => t.name).join(', ')}`);
  return tool;
};
/** A lookup that asks the server's own find_payment tool. */
const findPayment: NonNullable<Extract<McpToolPolicy, { effect: 'write' }>['lookup']> = async (key, lookupCtx) => {
  const answer = await lookupCtx.callTool('find_payment', { idempotency_key: key });
  const found = answer.structuredContent as { found: boolean; payment?: unknown } | undefined;
  if (answer.isError || !found) throw new Error('find_payment did not answer');
  return found.found ? { found: true, value: found.payment } : { found: false };
};
const paymentOutput = z.strictObject({ payment_id: z.string(), account: z.string(), amount_cents: z.number().int() });

let mcp: McpConnection;
beforeAll(async () => {
  mcp = await linkedFixture();
});
afterAll(async () => {
  await mcp?.close();
});

describe('importMcpTools', () => {
  it('imports only the tools the policy names, and reports the rest and the missing', async () => {
    const { tools, skipped, missing } = await importMcpTools(mcp, {
      policy: { lookupOrder: ORDER, no_such_tool: read('no_such_tool') },
    });
    expect(tools.map((t) => t.name)).toEqual(['lookup_order']);
    expect(skipped).toContainEqual({ name: 'delete_everything', reason: 'not_in_policy', detail: expect.any(String) });
    expect(skipped.map((s) => s.name)).not.toContain('lookupOrder');
    expect(missing).toEqual(['no_such_tool']);
    await expect(importMcpTools(mcp, { policy: { lookupOrder: ORDER }, onUnlisted: 'throw' })).rejects.toThrow(
      McpPolicyError,
    );
  });

  it('refuses an MCP name that is not snake_case unless the policy renames it, and suggests a name', async () => {
    const error = await importMcpTools(mcp, {
      policy: { lookupOrder: { effect: 'read', scopes: [], timeoutMs: 1_000 } },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpPolicyError);
    expect(String((error as Error).message)).toContain("name: 'lookup_order'");
  });

  it('refuses unknown policy fields and write-only fields on a read', async () => {
    await expect(
      importMcpTools(mcp, { policy: { lookupOrder: { ...ORDER, confirmRule: 'always' } as McpToolPolicy } }),
    ).rejects.toThrow(/unknown field "confirmRule"/);
    await expect(
      importMcpTools(mcp, { policy: { lookupOrder: { ...ORDER, sameKeyRetrySafe: true } as McpToolPolicy } }),
    ).rejects.toThrow(/applies to a write only/);
  });

  it("marks a server description as the server's own words, and uses the host's when given", async () => {
    const { tools } = await importMcpTools(mcp, {
      policy: { lookupOrder: ORDER, read_note: read('read_note', { description: 'Reads a support note.' }) },
    });
    expect(byName(tools, 'lookup_order').description).toBe(
      'From the MCP server "fixture-payments" (its own words, unverified): Reads one order by id.',
    );
    expect(byName(tools, 'read_note').description).toBe('Reads a support note.');
  });

  describe('input schemas', () => {
    it("converts the server's JSON Schema to a strict zod object: unknown fields are refused", async () => {
      const { tools } = await importMcpTools(mcp, { policy: { lookupOrder: ORDER, tag_note: read('tag_note') } });
      const order = byName(tools, 'lookup_order');
      expect(order.input.safeParse({ order_id: 'O-1' }).success).toBe(true);
      expect(order.input.safeParse({ order_id: 'O-1', debug: true }).success).toBe(false);
      expect(order.input.safeParse({}).success).toBe(false);
      // The server declares extra fields welcome (looseObject), at the top and nested: strict here all the same.
      const tag = byName(tools, 'tag_note');
      expect(tag.input.safeParse({ note_id: 'N-1', tag: { label: 'x' } }).success).toBe(true);
      expect(tag.input.safeParse({ note_id: 'N-1', tag: { label: 'x' }, extra: 1 }).success).toBe(false);
      expect(tag.input.safeParse({ note_id: 'N-1', tag: { label: 'x', color: 'red' } }).success).toBe(false);
    });

    it("keeps an identity field out of the model's hands: refused as converted, allowed with a host input that fills it from the session", async () => {
      await expect(
        importMcpTools(mcp, { policy: { get_profile: read('get_profile', { scopes: ['profiles:read'] }) } }),
      ).rejects.toThrow(ToolDefinitionError);
      const { tools } = await importMcpTools(mcp, {
        policy: {
          get_profile: read('get_profile', {
            scopes: ['profiles:read'],
            input: z.strictObject({ fields: z.array(z.string()).optional() }),
            serverArguments: (args: { fields?: string[] }, toolCtx: ToolContext) => ({
              ...args,
              user_id: toolCtx.principal.userId,
            }),
          }),
        },
      });
      const result = await (byName(tools, 'get_profile') as ReadTool).execute({}, ctx());
      expect(result).toMatchObject({ ok: true, value: { text: 'profile of E17', structured: { user_id: 'E17' } } });
    });
  });

  describe('hints', () => {
    it('refuses a host "read" that the server marks destructive or not read-only', async () => {
      const error = await importMcpTools(mcp, { policy: { purge_cache: read('purge_cache') } }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(McpPolicyError);
      expect((error as Error).message).toMatch(/says "read" but the server says destructiveHint: true/);
      await expect(importMcpTools(mcp, { policy: { create_payment: read('create_payment') } })).rejects.toThrow(
        /readOnlyHint: false/,
      );
    });

    it('leaves it out, or imports it as an always-confirmed write without retries, when the host says so', async () => {
      const skipped = await importMcpTools(mcp, {
        policy: { purge_cache: read('purge_cache') },
        onHintConflict: 'skip',
      });
      expect(skipped.tools).toEqual([]);
      expect(skipped.skipped).toContainEqual({
        name: 'purge_cache',
        reason: 'hint_conflict',
        detail: expect.stringContaining('destructiveHint'),
      });
      const policy = read('purge_cache', {
        confirm: 'never',
        retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1 },
      });
      const tightened = await importMcpTools(mcp, { policy: { purge_cache: policy }, onHintConflict: 'as_write' });
      const tool = tightened.tools[0] as WriteTool;
      expect(tool).toMatchObject({ effect: 'write', confirm: 'always', sameKeyRetrySafe: false });
      expect('retry' in tool).toBe(false);
      await expect(
        tool.lookup('k', { taskId: 't', principal: PAYER, signal: new AbortController().signal }),
      ).rejects.toThrow(McpLookupUnavailableError);
      expect(tightened.tightened[0]!.changes.join('; ')).toMatch(/imported as a write/);
    });

    it('never loosens: readOnlyHint does not make a write a read, idempotentHint does not make it retry-safe', async () => {
      const { tools } = await importMcpTools(mcp, {
        policy: {
          lookupOrder: { ...ORDER, name: 'order_note', effect: 'write', lookup: async () => ({ found: false }) },
          create_payment: { effect: 'write', scopes: ['payments:write'], timeoutMs: 2_000, lookup: findPayment },
        },
      });
      expect(byName(tools, 'order_note')).toMatchObject({ effect: 'write', sameKeyRetrySafe: false });
      expect(byName(tools, 'create_payment')).toMatchObject({ effect: 'write', sameKeyRetrySafe: false });
    });

    it("confirms a destructive write every time when the policy sets no confirm, and keeps the host's explicit rule", async () => {
      const base = {
        effect: 'write',
        scopes: ['payments:write'],
        timeoutMs: 2_000,
        lookup: async () => ({ found: false as const }),
      } as const;
      const unset = await importMcpTools(mcp, { policy: { wipe_account: base } });
      expect(unset.tools[0]!.confirm).toBe('always');
      expect(unset.tightened[0]!.changes[0]).toMatch(/destructiveHint: true/);
      const approvers = await importMcpTools(mcp, {
        policy: { wipe_account: { ...base, confirm: { approverScope: 'ops:approve' } } },
      });
      expect(approvers.tools[0]!.confirm).toEqual({ approverScope: 'ops:approve' });
    });
  });

  describe('a write without a host lookup', () => {
    const payment = { effect: 'write', scopes: ['payments:write'], timeoutMs: 2_000 } as const;

    it('is confirmed every time and never retry-safe', async () => {
      const { tools, tightened } = await importMcpTools(mcp, { policy: { create_payment: payment } });
      expect(tools[0]).toMatchObject({ effect: 'write', confirm: 'always', sameKeyRetrySafe: false });
      expect(tightened[0]!.changes).toEqual(["confirm: 'always' (a write without a host lookup)"]);
    });

    it('is refused with a weaker confirmation rule or a retry-safety claim', async () => {
      await expect(
        importMcpTools(mcp, { policy: { create_payment: { ...payment, confirm: 'never' } } }),
      ).rejects.toThrow(/must be confirmed every time/);
      await expect(
        importMcpTools(mcp, { policy: { create_payment: { ...payment, confirm: () => true } } }),
      ).rejects.toThrow(/not a predicate/);
      await expect(
        importMcpTools(mcp, { policy: { create_payment: { ...payment, sameKeyRetrySafe: true } } }),
      ).rejects.toThrow(/needs a host lookup/);
    });
  });
});

describe('an imported tool, called directly', () => {
  let tools: Tool[];
  beforeAll(async () => {
    ({ tools } = await importMcpTools(mcp, {
      policy: {
        lookupOrder: {
          ...ORDER,
          output: z.strictObject({ order_id: z.string(), status: z.string(), total_cents: z.number() }),
        },
        always_fails: read('always_fails'),
        huge_report: read('huge_report'),
        show_chart: read('show_chart'),
        slow_read: read('slow_read', { timeoutMs: 200 }),
        create_payment: {
          effect: 'write',
          scopes: ['payments:write'],
          timeoutMs: 2_000,
          lookup: findPayment,
          sameKeyRetrySafe: true,
          keyArgument: 'request_key',
        },
      },
    }));
  });

  it("validates structured content against the host's output schema", async () => {
    const tool = byName(tools, 'lookup_order') as ReadTool;
    const result = await tool.execute({ order_id: 'O-7' }, ctx());
    expect(result).toEqual({ ok: true, value: { order_id: 'O-7', status: 'paid', total_cents: 12_900 } });
    expect(tool.output.safeParse({ order_id: 'O-7' }).success).toBe(false);
  });

  it('turns isError into a failure value with a capped summary: unknown facts, or an answer if the policy says so', async () => {
    // tool_error is one of the codes after which a read's facts are unverified (observedFacts.ts).
    const result = await (byName(tools, 'always_fails') as ReadTool).execute({}, ctx());
    expect(result).toMatchObject({ ok: false, code: 'tool_error', retryable: false });
    const answers = await importMcpTools(mcp, {
      policy: { always_fails: read('always_fails', { serverErrors: 'final' }) },
    });
    expect(await (answers.tools[0] as ReadTool).execute({}, ctx())).toMatchObject({ ok: false, code: 'server_error' });
    expect(result.ok === false && result.summary).toMatch(
      /^always_fails failed, as the MCP server reports: upstream refused: quota exceeded/,
    );
    expect(result.ok === false && result.summary.length).toBeLessThan(300);
  });

  it('caps huge text, and the capped value still matches the output schema', async () => {
    const result = await (byName(tools, 'huge_report') as ReadTool).execute({}, ctx());
    expect(result.ok).toBe(true);
    const value = result.ok ? (result.value as { text: string; truncated?: boolean }) : null;
    expect(Buffer.byteLength(value!.text)).toBeLessThanOrEqual(16 * 1024);
    expect(value!.text).toMatch(/^BEGIN x+ …\[cut: 1000010 bytes in all\]$/);
    expect(value!.truncated).toBe(true);
    expect(untrustedOutputSchema.safeParse(value).success).toBe(true);
  });

  it('caps at the configured size', async () => {
    const small = await importMcpTools(mcp, { policy: { huge_report: read('huge_report') }, maxResultBytes: 1_024 });
    const result = await (small.tools[0] as ReadTool).execute({}, ctx());
    expect(result.ok && Buffer.byteLength((result.value as { text: string }).text)).toBeLessThanOrEqual(1_024);
  });

  it('reports an isError write as failed, or as unknown (looked up) when the policy says the server cannot be believed', async () => {
    const write = {
      effect: 'write',
      scopes: [],
      timeoutMs: 2_000,
      lookup: async () => ({ found: false as const }),
    } as const;
    const final = await importMcpTools(mcp, { policy: { always_fails: write } });
    const unknown = await importMcpTools(mcp, { policy: { always_fails: { ...write, serverErrors: 'unknown' } } });
    const writeCtx = { ...ctx(), idempotencyKey: 'idem_fails' };
    expect(await (final.tools[0] as WriteTool).execute({}, writeCtx)).toMatchObject({
      ok: false,
      code: 'server_error',
    });
    // tool_error is one of the codes after which the runtime looks a write up before anything else.
    expect(await (unknown.tools[0] as WriteTool).execute({}, writeCtx)).toMatchObject({
      ok: false,
      code: 'tool_error',
    });
  });

  it('summarises images and resources instead of passing them on', async () => {
    const result = await (byName(tools, 'show_chart') as ReadTool).execute({}, ctx());
    expect(result).toEqual({
      ok: true,
      value: {
        text: 'chart attached',
        attachments: [
          { type: 'image', mimeType: 'image/png', bytes: 16 },
          { type: 'resource_link', mimeType: 'application/pdf', uri: 'file:///reports/q3.pdf', name: 'q3.pdf' },
        ],
      },
    });
  });

  it('cancels the MCP request when the signal aborts', async () => {
    const before = (await stats(mcp)).cancelled;
    const controller = new AbortController();
    const running = (byName(tools, 'slow_read') as ReadTool).execute({ ms: 5_000 }, ctx(controller.signal));
    setTimeout(() => controller.abort(new Error('timeout')), 100);
    await expect(running).rejects.toThrow();
    await expect.poll(async () => (await stats(mcp)).cancelled, { timeout: scaled(2_000) }).toBe(before + 1);
  });

  it('sends the idempotency key in _meta (and as the key argument), so the server applies a repeat once', async () => {
    const tool = byName(tools, 'create_payment') as WriteTool;
    expect(tool.input.safeParse({ account: 'A-1', amount_cents: 5, request_key: 'mine' }).success).toBe(false);
    const writeCtx = { ...ctx(), idempotencyKey: 'idem_direct_1' };
    const first = await tool.execute({ account: 'A-1', amount_cents: 500 }, writeCtx);
    const again = await tool.execute({ account: 'A-1', amount_cents: 500 }, writeCtx);
    expect(again).toEqual(first);
    const after = await stats(mcp);
    expect(after.keys.filter((k) => k === 'idem_direct_1')).toHaveLength(2);
    expect(after.lastArgs.create_payment).toEqual({ account: 'A-1', amount_cents: 500 });
    expect(
      await tool.lookup('idem_direct_1', { taskId: 't', principal: PAYER, signal: new AbortController().signal }),
    ).toEqual({
      found: true,
      value: { text: '', structured: first.ok && (first.value as { structured: unknown }).structured },
    });
    expect(
      await tool.lookup('idem_never', { taskId: 't', principal: PAYER, signal: new AbortController().signal }),
    ).toEqual({ found: false });
  });
});

describe('through the orchestrator', () => {
  const paymentPolicy = (more: Partial<Extract<McpToolPolicy, { effect: 'write' }>> = {}): McpToolPolicy => ({
    effect: 'write',
    scopes: ['payments:write'],
    timeoutMs: 1_000,
    output: paymentOutput,
    ...more,
  });
  const importing = async (policy: Record<string, McpToolPolicy>) => (await importMcpTools(mcp, { policy })).tools;

  it('runs a renamed read to a trusted result', async () => {
    const model = scriptedModel([reply.call('lookup_order', { order_id: 'O-42' }), reply.answer('paid')]);
    const h = harness({ extraTools: await importing({ lookupOrder: ORDER }), model });
    const status = await h.orchestrator.run({
      principal: PAYER,
      goal: 'is O-42 paid?',
      success: { tool: 'lookup_order', require: ['text'] },
    });
    expect(status.state).toBe('done');
    expect(model.requests[1]!.observations[0]).toMatchObject({
      ok: true,
      tool: 'lookup_order',
      data: { structured: { order_id: 'O-42', status: 'paid' } },
    });
    await h.orchestrator.close();
  });

  it('refuses unknown fields at the schema gate; the server is never called', async () => {
    const before = (await stats(mcp)).calls.lookupOrder ?? 0;
    const h = harness({
      extraTools: await importing({ lookupOrder: ORDER }),
      script: [reply.call('lookup_order', { order_id: 'O-1', include_secrets: true }), reply.answer('x')],
    });
    const status = await h.orchestrator.run({ principal: PAYER, goal: 'read O-1', taskId: 'mcp-schema' });
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'invalid_arguments', gate: 'schema' });
    expect((await stats(mcp)).calls.lookupOrder ?? 0).toBe(before);
    await h.orchestrator.close();
  });

  it('refuses a call of an unlisted tool as unknown (it was never imported)', async () => {
    const h = harness({
      extraTools: await importing({ lookupOrder: ORDER }),
      script: [reply.call('delete_everything', {}), reply.answer('x')],
    });
    const status = await h.orchestrator.run({ principal: PAYER, goal: 'clean up' });
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'unknown_tool' });
    expect((await stats(mcp)).calls.delete_everything).toBeUndefined();
    await h.orchestrator.close();
  });

  it("holds a write without a host lookup for confirmation, then sends the task's idempotency key to the server", async () => {
    const h = harness({
      extraTools: await importing({ create_payment: paymentPolicy() }),
      script: [reply.call('create_payment', { account: 'A-9', amount_cents: 900 }), reply.answer('sent')],
    });
    const waiting = await h.orchestrator.run({
      principal: PAYER,
      goal: 'pay A-9 9.00',
      taskId: 'mcp-confirm',
      success: { tool: 'create_payment', require: ['payment_id'] },
    });
    expect(waiting.state).toBe('waiting_for_confirmation');
    await h.orchestrator.confirm(waiting.taskId, PAYER, waiting.pendingConfirmation!);
    const done = await h.orchestrator.settled(waiting.taskId);
    expect(done.state).toBe('done');
    const [started] = byKind(await h.orchestrator.audit(waiting.taskId), 'tool_started');
    expect(started!.idempotencyKey).toMatch(/^idem_/);
    expect((await stats(mcp)).keys).toContain(started!.idempotencyKey);
    await h.orchestrator.close();
  });

  it('reconciles a write that timed out through the host lookup: found, applied once', async () => {
    const before = (await stats(mcp)).executions;
    const h = harness({
      extraTools: await importing({ create_payment: paymentPolicy({ timeoutMs: 300, lookup: findPayment }) }),
      script: [
        reply.call('create_payment', { account: 'A-5', amount_cents: 500, delay_ms: 1_500 }),
        reply.answer('sent'),
      ],
    });
    const waiting = await h.orchestrator.run({
      principal: PAYER,
      goal: 'pay A-5',
      taskId: 'mcp-lost',
      success: { tool: 'create_payment', require: ['payment_id'] },
    });
    // A write imported over MCP is confirmed by default, like any write whose policy gives no rule.
    expect(waiting.state).toBe('waiting_for_confirmation');
    await h.orchestrator.confirm(waiting.taskId, PAYER, waiting.pendingConfirmation!);
    const status = await h.orchestrator.settled(waiting.taskId);
    expect(status.state).toBe('done');
    const audit = await h.orchestrator.audit('mcp-lost');
    expect(byKind(audit, 'tool_finished')[0]).toMatchObject({ code: 'timeout' });
    expect(byKind(audit, 'write_lookup').map((l) => l.result)).toEqual(['found']);
    expect((await stats(mcp)).executions).toBe(before + 1);
    await h.orchestrator.close();
  });

  it('holds a timed-out write without a host lookup for review: never sent again', async () => {
    const h = harness({
      extraTools: await importing({ create_payment: paymentPolicy({ timeoutMs: 300 }) }),
      script: [
        reply.call('create_payment', { account: 'A-6', amount_cents: 600, delay_ms: 1_500 }),
        reply.answer('sent'),
      ],
    });
    const waiting = await h.orchestrator.run({ principal: PAYER, goal: 'pay A-6', taskId: 'mcp-review' });
    await h.orchestrator.confirm(waiting.taskId, PAYER, waiting.pendingConfirmation!);
    const status = await h.orchestrator.settled('mcp-review');
    expect(status.state).toBe('review_required');
    const audit = await h.orchestrator.audit('mcp-review');
    expect(byKind(audit, 'tool_started')).toHaveLength(1);
    expect(byKind(audit, 'write_lookup').every((l) => l.result === 'inconclusive')).toBe(true);
    await h.orchestrator.close();
  });

  it('retries a read that timed out within its policy, then reports the result unknown', async () => {
    const before = (await stats(mcp)).calls.slow_read ?? 0;
    const slow = read('slow_read', { timeoutMs: 150, retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 10 } });
    const h = harness({
      extraTools: await importing({ slow_read: slow }),
      script: [reply.call('slow_read', { ms: 3_000 }), reply.answer('x')],
    });
    const status = await h.orchestrator.run({ principal: PAYER, goal: 'wait' });
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'timeout' });
    expect(byKind(await h.orchestrator.audit(status.taskId), 'tool_finished')[0]).toMatchObject({ attempts: 2 });
    await expect.poll(async () => (await stats(mcp)).calls.slow_read, { timeout: scaled(2_000) }).toBe(before + 2);
    await h.orchestrator.close();
  });

  it('tells the model of an isError result as a failure', async () => {
    const h = harness({
      extraTools: await importing({ always_fails: read('always_fails') }),
      script: [reply.call('always_fails', {}), reply.answer('it failed')],
    });
    const status = await h.orchestrator.run({ principal: PAYER, goal: 'try' });
    expect(status.observations[0]).toMatchObject({ ok: false, code: 'tool_error', retryable: false });
    await h.orchestrator.close();
  });

  it("runs no write on a read the server answered with isError, unless the read's policy says its errors are answers", async () => {
    const attempt = async (serverErrors: 'final' | undefined) => {
      const h = harness({
        extraTools: await importing({
          always_fails: read('always_fails', serverErrors ? { serverErrors } : {}),
          create_payment: paymentPolicy({ lookup: findPayment }),
        }),
        script: [
          reply.call('always_fails', {}),
          reply.call('create_payment', { account: 'A-3', amount_cents: 300 }),
          reply.answer('tried'),
        ],
      });
      const status = await h.orchestrator.run({ principal: PAYER, goal: 'check, then pay A-3 3.00' });
      await h.orchestrator.close();
      return status;
    };
    // The read established nothing: the write that depends on it (every read, by default) is not run.
    const unknown = await attempt(undefined);
    expect(unknown.observations.map((o) => (o.ok ? 'ok' : o.code))).toEqual(['unverified_facts']);
    expect(unknown.state).toBe('answered');
    // Its errors declared answers: the write goes on to its gates (here, the user's confirmation).
    const answered = await attempt('final');
    expect(answered.state).toBe('waiting_for_confirmation');
  });

  it('keeps a prompt injection in a result as data: the write it asks for still waits for the user', async () => {
    const before = (await stats(mcp)).executions;
    const model = scriptedModel([
      reply.call('read_note', { note_id: 'N-666' }),
      // A model that obeys the note: the host's gates decide all the same.
      reply.call('create_payment', { account: 'ATTACKER', amount_cents: 99_999_999 }),
    ]);
    const h = harness({
      extraTools: await importing({
        read_note: read('read_note'),
        create_payment: paymentPolicy({ lookup: findPayment, confirm: 'always' }),
      }),
      model,
    });
    const status = await h.orchestrator.run({ principal: PAYER, goal: 'summarise note N-666', taskId: 'mcp-inject' });
    expect(model.requests[1]!.observations[0]).toEqual({
      callId: expect.any(String),
      tool: 'read_note',
      ok: true,
      data: { text: INJECTION },
      truncated: false,
    });
    expect(status.state).toBe('waiting_for_confirmation');
    expect(status.principal.scopes).toEqual(PAYER.scopes);
    expect((await stats(mcp)).executions).toBe(before);
    await h.orchestrator.close();
  });
});

describe('the connection', () => {
  it('imports and calls tools over Streamable HTTP', async () => {
    const state = fixtureState();
    const http = createServer(async (request, response) => {
      const server = fixtureServer(state);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      response.on('close', () => void transport.close().then(() => server.close()));
      await server.connect(transport);
      await transport.handleRequest(request, response);
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
    const connection = await connectMcp({ url, headers: { 'x-tenant': 'acme' } });
    try {
      expect(connection.server.name).toBe('fixture-payments');
      const { tools } = await importMcpTools(connection, {
        policy: {
          create_payment: { effect: 'write', scopes: ['payments:write'], timeoutMs: 2_000, lookup: findPayment },
        },
      });
      const result = await (tools[0] as WriteTool).execute(
        { account: 'H-1', amount_cents: 100 },
        { ...ctx(), idempotencyKey: 'idem_http' },
      );
      expect(result).toMatchObject({ ok: true, value: { structured: { payment_id: 'P-1', account: 'H-1' } } });
      expect(state.keys).toEqual(['idem_http']);
      expect(IDEMPOTENCY_META_KEY).toBe('io.statechart-agent/idempotency-key');
    } finally {
      await connection.close();
      await new Promise((resolve) => http.close(resolve));
    }
  });

  it('loads the SDK only from statechart-agent/mcp, and at runtime only when connecting', async () => {
    const sources = [
      'src/mcp/connect.ts',
      'src/mcp/importTools.ts',
      'src/mcp/policy.ts',
      'src/mcp/result.ts',
      'src/mcp/schema.ts',
      'src/mcp.ts',
      'src/index.ts',
    ];
    for (const file of sources) {
      const code = await readFile(join(PROJECT_ROOT, file), 'utf8');
      // Static imports of the SDK are types only (erased); the runtime loads it in connectMcp through optionalPeer.
      expect(code.match(/^import (?!type )[^;]*'@modelcontextprotocol\/sdk[^']*'/gm) ?? [], file).toEqual([]);
    }
    expect(await readFile(join(PROJECT_ROOT, 'src/index.ts'), 'utf8')).not.toMatch(/from '\.\/mcp/);
  });
});
