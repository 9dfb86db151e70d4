/**
 * Connecting to an MCP server with the official SDK client: a child process over stdio, a URL over Streamable HTTP,
 * any SDK transport, or a client the host already connected.
 *
 * The SDK is an optional peer: it is loaded here, when a connection is made, so that `statechart-agent/mcp` itself
 * loads without it and a missing install is reported by name (`missing_peer`). The main entry never imports this.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransportOptions } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { cap, safeErrorText } from '../../machines/lib/text.js';
import { McpConnectionError } from '../errors.js';
import { optionalPeer } from '../peers/optionalPeer.js';

const SDK = '@modelcontextprotocol/sdk';
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

export interface McpStdioOptions {
  /** The executable that runs the server. */
  command: string;
  args?: string[];
  /**
   * Added to the SDK's safe inherited subset (HOME, PATH, SHELL, TERM, USER, LOGNAME): the parent's secrets are not
   * passed to the server unless named here.
   */
  env?: Record<string, string>;
  cwd?: string;
  /** The server's stderr: shown in this process (`'inherit'`, default) or dropped (`'ignore'`). */
  stderr?: 'inherit' | 'ignore';
}

interface CommonOptions {
  /** How this client introduces itself in the handshake. Default `{ name: 'statechart-agent', version: '0' }`. */
  clientInfo?: { name: string; version: string };
  /** Time allowed for the handshake (default 10 s). */
  connectTimeoutMs?: number;
}

export type McpConnectOptions =
  | (CommonOptions & { stdio: McpStdioOptions })
  | (CommonOptions & {
      url: string | URL;
      headers?: Record<string, string>;
      http?: StreamableHTTPClientTransportOptions;
    })
  | (CommonOptions & { transport: Transport })
  /** A client the host made and connected; `close()` closes it. */
  | { client: Client };

/** An open connection to one MCP server. */
export interface McpConnection {
  readonly client: Client;
  /** What the server called itself in the handshake: untrusted, capped, for labels and logs only. */
  readonly server: { name: string; version: string };
  /** The server process, for stdio connections; null otherwise or once it has exited. */
  readonly pid: number | null;
  /** True once `close()` was called or the transport closed on its own (the server exited, the stream dropped). */
  readonly closed: boolean;
  /** Closes the client and its transport; for stdio, ends the server process (stdin closed, then SIGTERM, SIGKILL). */
  close(): Promise<void>;
}

/**
 * Connects to an MCP server. The returned connection is what `importMcpTools` imports from; close it when the
 * tools are no longer installed.
 *
 * @example
 * const github = await connectMcp({ stdio: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-github'], env: { GITHUB_TOKEN } } });
 * const docs = await connectMcp({ url: 'https://mcp.example.com/mcp', headers: { authorization: `Bearer ${token}` } });
 */
export async function connectMcp(options: McpConnectOptions): Promise<McpConnection> {
  if ('client' in options) return wrap(options.client, null);
  const { Client: ClientClass } = await optionalPeer(
    SDK,
    () => import('@modelcontextprotocol/sdk/client/index.js'),
    'connectMcp',
  );
  const transport = await makeTransport(options);
  const client = new ClientClass(options.clientInfo ?? { name: 'statechart-agent', version: '0' });
  try {
    await client.connect(transport, { timeout: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS });
  } catch (error) {
    await client.close().catch(() => {});
    await transport.close().catch(() => {});
    throw new McpConnectionError(`the handshake failed (${safeErrorText(error)})`, { cause: error });
  }
  return wrap(client, 'stdio' in options ? transport : null);
}

async function makeTransport(options: Exclude<McpConnectOptions, { client: Client }>): Promise<Transport> {
  if ('transport' in options) return options.transport;
  if ('stdio' in options) {
    const { StdioClientTransport } = await optionalPeer(
      SDK,
      () => import('@modelcontextprotocol/sdk/client/stdio.js'),
      'connectMcp',
    );
    const { command, args, env, cwd, stderr } = options.stdio;
    if (typeof command !== 'string' || command === '')
      throw new McpConnectionError('stdio.command must name the executable that runs the server');
    return new StdioClientTransport({ command, args: args ?? [], env, cwd, stderr: stderr ?? 'inherit' });
  }
  if ('url' in options) {
    const { StreamableHTTPClientTransport } = await optionalPeer(
      SDK,
      () => import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
      'connectMcp',
    );
    const url = options.url instanceof URL ? options.url : new URL(options.url);
    const requestInit = {
      ...options.http?.requestInit,
      headers: { ...toRecord(options.http?.requestInit?.headers), ...options.headers },
    };
    return new StreamableHTTPClientTransport(url, { ...options.http, requestInit });
  }
  throw new McpConnectionError('connectMcp needs one of { stdio }, { url }, { transport } or { client }');
}

function wrap(client: Client, stdio: Transport | null): McpConnection {
  const info = client.getServerVersion();
  const server = { name: cap(String(info?.name ?? 'unknown'), 80), version: cap(String(info?.version ?? ''), 40) };
  let closed = false;
  const previous = client.onclose;
  client.onclose = () => {
    closed = true;
    previous?.();
  };
  return {
    client,
    server,
    get pid() {
      return stdio && 'pid' in stdio ? ((stdio as { pid: number | null }).pid ?? null) : null;
    },
    get closed() {
      return closed;
    },
    async close() {
      closed = true;
      await client.close();
    },
  };
}

function toRecord(headers: unknown): Record<string, string> {
  if (!headers) return {};
  if (typeof Headers !== 'undefined' && headers instanceof Headers) return Object.fromEntries(headers.entries());
  if (Array.isArray(headers)) return Object.fromEntries(headers as [string, string][]);
  return { ...(headers as Record<string, string>) };
}
