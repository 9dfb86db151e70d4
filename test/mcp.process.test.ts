/**
 * statechart-agent/mcp with the fixture server (test/fixtures/mcp/server.ts) as a child process over stdio, as a host
 * runs a real server: tools imported and called, the process ended by close(), a server lost mid-session, a server
 * that fails its handshake. The import rules, calls and failures are in mcp.test.ts, with the server in process.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../machines/context.js';
import { McpConnectionError } from '../src/errors.js';
import {
  IDEMPOTENCY_META_KEY,
  type McpConnection,
  type McpToolPolicy,
  connectMcp,
  importMcpTools,
} from '../src/mcp.js';
import { type ReadTool, type Tool, type ToolContext, TransientToolError, type WriteTool } from '../src/tool.js';
import { scaled } from './support/timeScale.js';
import { PROJECT_ROOT } from './support/workers.js';

const SERVER = join(PROJECT_ROOT, 'test', 'fixtures', 'mcp', 'server.ts');
const spawnFixture = () =>
  connectMcp({
    stdio: { command: process.execPath, args: ['--import', 'tsx', SERVER], cwd: PROJECT_ROOT, stderr: 'ignore' },
  });
const PAYER: Principal = {
  userId: 'E17',
  tenantId: 'acme',
  scopes: ['orders:read', 'payments:write', 'notes:read', 'profiles:read'],
};
const ORDER: McpToolPolicy = { name: 'lookup_order', effect: 'read', scopes: ['orders:read'], timeoutMs: 2_000 };

function ctx(signal = new AbortController().signal): ToolContext {
  return { taskId: 't', callId: 'c', principal: PAYER, signal, attempt: 1 };
}
const byName = (tools: Tool[], name: string) => {
  const tool = tools.find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name} in ${tools.map((t) => t.name).join(', ')}`);
  return tool;
};
async function stats(connection: McpConnection): Promise<{ executions: number; keys: string[] }> {
  return (await connection.client.callTool({ name: 'stats', arguments: {} })).structuredContent as unknown as {
    executions: number;
    keys: string[];
  };
}

describe('the connection to a server process over stdio', () => {
  it('imports and calls tools: a read, and a write whose idempotency key the server sees once per key', async () => {
    const connection = await spawnFixture();
    try {
      expect(connection.server.name).toBe('fixture-payments');
      const { tools } = await importMcpTools(connection, {
        policy: {
          lookupOrder: ORDER,
          create_payment: {
            effect: 'write',
            scopes: ['payments:write'],
            timeoutMs: 2_000,
            lookup: async () => ({ found: false as const }),
          },
        },
      });
      expect(await (byName(tools, 'lookup_order') as ReadTool).execute({ order_id: 'O-1' }, ctx())).toMatchObject({
        ok: true,
      });
      const pay = byName(tools, 'create_payment') as WriteTool;
      const first = await pay.execute(
        { account: 'S-1', amount_cents: 100 },
        { ...ctx(), idempotencyKey: 'idem_stdio' },
      );
      const again = await pay.execute(
        { account: 'S-1', amount_cents: 100 },
        { ...ctx(), idempotencyKey: 'idem_stdio' },
      );
      expect(first).toMatchObject({ ok: true, value: { structured: { payment_id: 'P-1', account: 'S-1' } } });
      expect(again).toEqual(first);
      expect(await stats(connection)).toMatchObject({ executions: 1, keys: ['idem_stdio', 'idem_stdio'] });
      expect(IDEMPOTENCY_META_KEY).toBe('io.statechart-agent/idempotency-key');
    } finally {
      await connection.close();
    }
  });

  it('close() ends the server process', async () => {
    const connection = await spawnFixture();
    const pid = connection.pid!;
    expect(pid).toBeGreaterThan(0);
    expect(() => process.kill(pid, 0)).not.toThrow();
    await connection.close();
    expect(connection.closed).toBe(true);
    await expect
      .poll(
        () => {
          try {
            process.kill(pid, 0);
            return 'running';
          } catch {
            return 'gone';
          }
        },
        { timeout: scaled(5_000) },
      )
      .toBe('gone');
  });

  it('turns a lost server into a transient failure for a read, and a thrown (unknown) outcome for a write', async () => {
    const connection = await spawnFixture();
    const { tools } = await importMcpTools(connection, {
      policy: { lookupOrder: ORDER, create_payment: { effect: 'write', scopes: ['payments:write'], timeoutMs: 1_000 } },
    });
    process.kill(connection.pid!, 'SIGKILL');
    await expect.poll(() => connection.closed, { timeout: scaled(5_000) }).toBe(true);
    await expect((byName(tools, 'lookup_order') as ReadTool).execute({ order_id: 'O-1' }, ctx())).rejects.toThrow(
      TransientToolError,
    );
    const write = (byName(tools, 'create_payment') as WriteTool).execute(
      { account: 'A', amount_cents: 1 },
      { ...ctx(), idempotencyKey: 'k' },
    );
    await expect(write).rejects.toThrow();
    await expect(write).rejects.not.toThrow(TransientToolError);
    await connection.close();
  });

  it('reports a server that fails the handshake, and leaves no process behind', async () => {
    const failing = connectMcp({
      stdio: { command: process.execPath, args: ['-e', 'process.exit(3)'], stderr: 'ignore' },
      connectTimeoutMs: 2_000,
    });
    await expect(failing).rejects.toThrow(McpConnectionError);
    await expect(connectMcp({} as never)).rejects.toThrow(/needs one of/);
  });
});
