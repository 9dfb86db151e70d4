/**
 * Live inspection in the Stately inspector, on request only: a local relay (`createInspectorServer` from
 * `@statelyai/inspect/server`: an HTTP page plus a WebSocket server) and a `createWebSocketInspector` client
 * connected to it. Task actors' inspection events go to the client, the relay forwards them to the page, and the
 * page embeds the Stately inspector UI. The UI itself loads from stately.ai (it needs internet); the relay and
 * the event stream are local and work offline.
 *
 * Shutting down is the delicate part (checked against @statelyai/inspect 0.7.2):
 * - the WebSocket client reconnects every 5 s forever after any socket error, even after `stop()`, and its timer
 *   keeps the process alive. Here the relay is ours and in-process, so reconnecting is never useful: the client's
 *   error handler is replaced right after it is created, and no reconnect is ever scheduled;
 * - the relay's `stop()` closes its servers but not the connections (ws 8 leaves clients open, and an open
 *   browser tab keeps the HTTP server alive). The relay's HTTP server is captured when it is created so that
 *   every socket it accepted can be destroyed, and its listen errors (port in use) reach the caller instead of
 *   crashing the process.
 * `stop()` therefore lets queued events go out, closes the client (waiting for its close), then stops the relay
 * and destroys its sockets, last.
 *
 * What it streams is ours, not the library's: the relay listens on 127.0.0.1 only (unless told otherwise), and the
 * frames are built from the offline inspection stream's messages (`createInspectionStream`), so a snapshot carries
 * the same reduced context (turn, budgets used, pending confirmation, batch, outcome), and an event only its type and
 * identifiers (never the goal, the principal's scopes, actor inputs or tool output such as a customer's note). Each task is one actor in the inspector, named
 * `task:<taskId>` (its children `task:<taskId>/<invoke id>`), however often it is evicted while it waits and
 * reloaded: XState gives every reload a new session id, which would show as a new root actor each time.
 */
import http from 'node:http';
import { once } from 'node:events';
import type { Socket } from 'node:net';
import type { InspectionEvent } from 'xstate';
import { AgentError } from '../errors.js';
import { optionalPeer } from '../peers/optionalPeer.js';
import { statelyFrames } from './statelyFrames.js';

export interface StatelyInspectionOptions {
  /** Port of the local relay (page and WebSocket). Default 8080; 0 picks a free one. */
  port?: number;
  /** Interface the relay listens on (default 127.0.0.1: this machine only). */
  host?: string;
  /** Open the page in the default browser (default false). */
  open?: boolean;
  /** The inspector UI the page embeds (default: the library's, https://stately.ai/inspect). */
  inspectorUrl?: string;
  /** How long to wait for the client to connect to the relay (default 3 s). */
  connectTimeoutMs?: number;
}

export interface StatelyInspection {
  /** For `createOrchestrator({ inspect })`. Does nothing once stopped. */
  inspect: (event: InspectionEvent) => void;
  /** The page to open in a browser: `http://127.0.0.1:<port>`. */
  url: string;
  /** The relay's WebSocket: `ws://127.0.0.1:<port>`. */
  wsUrl: string;
  port: number;
  /** Releases the client, the relay and every socket; the process can exit afterwards. Idempotent. */
  stop(): Promise<void>;
}

/** A minimal view of the ws client the library keeps privately (0.7.2: `adapter.ws`, `adapter.status`). */
interface ClientView {
  ws?: {
    readyState: number;
    onerror: ((event: unknown) => void) | null;
    once(event: 'open' | 'close', listener: () => void): unknown;
    terminate(): void;
  };
  status?: string;
}

const OPEN = 1;
const CLOSED = 3;

export class InspectorStartError extends AgentError<'inspector_start_failed'> {
  constructor(message: string) {
    super('inspector_start_failed', message);
  }
}

/**
 * Starts the relay and a client connected to it. Resolves once the client is connected.
 *
 * @example
 * const inspection = await createStatelyInspection({ port: 8080 });
 * console.log(`open ${inspection.url}`);
 * const orchestrator = createOrchestrator({ tools, model, inspect: inspection.inspect });
 * // ...
 * await orchestrator.close();
 * await inspection.stop();
 */
export async function createStatelyInspection(options: StatelyInspectionOptions = {}): Promise<StatelyInspection> {
  const host = options.host ?? '127.0.0.1';
  const port = options.port === 0 ? await freePort(host) : (options.port ?? 8080);
  // @statelyai/inspect is an optional peer: loaded only when the Stately inspector is asked for.
  const stately = await optionalPeer(
    '@statelyai/inspect',
    () => import('@statelyai/inspect'),
    'createStatelyInspection',
  );
  const server = await optionalPeer(
    '@statelyai/inspect',
    () => import('@statelyai/inspect/server'),
    'createStatelyInspection',
  );
  const relay = await startRelay(port, host, options, server.createInspectorServer);
  const address = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  const wsUrl = `ws://${address}:${port}`;
  const inspector = stately.createWebSocketInspector({ url: wsUrl });
  const client = inspector.adapter as unknown as ClientView;
  const socket = client.ws;
  let connectError: unknown = null;
  if (socket) {
    // Replaces the library's handler, which would reconnect every 5 s forever (see the header).
    socket.onerror = (error) => {
      connectError ??= error;
      client.status = 'closed';
    };
  }
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    // inspect.next defers each event with setTimeout(0): let the queued ones reach the socket first.
    await new Promise((resolve) => setTimeout(resolve, 10));
    if (socket && socket.readyState !== CLOSED) {
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      inspector.stop();
      await withTimeout(closed, 1_000);
      if (socket.readyState !== CLOSED) socket.terminate();
    } else {
      inspector.stop();
    }
    await relay.stop();
  };

  try {
    if (!socket)
      throw new InspectorStartError(
        'the Stately WebSocket inspector did not create its client (unexpected @statelyai/inspect version?)',
      );
    if (socket.readyState !== OPEN) {
      const settled = new Promise<void>((resolve) => {
        socket.once('open', () => resolve());
        socket.once('close', () => resolve());
      });
      await withTimeout(settled, options.connectTimeoutMs ?? 3_000);
      if (socket.readyState !== OPEN || connectError)
        throw new InspectorStartError(`could not connect to the inspector relay at ${wsUrl}`);
    }
  } catch (error) {
    await stop();
    throw error;
  }

  const frames = statelyFrames((frame) => inspector.adapter.send(frame as never));
  return {
    inspect: (event) => {
      if (!stopped) frames(event);
    },
    url: `http://${address}:${port}`,
    wsUrl,
    port,
    stop,
  };
}

/** The library's relay, with its HTTP server captured (see the header) so it can be fully released. */
async function startRelay(
  port: number,
  host: string,
  options: StatelyInspectionOptions,
  createInspectorServer: typeof import('@statelyai/inspect/server').createInspectorServer,
): Promise<{ stop(): Promise<void> }> {
  const { result: relay, server } = captureHttpServer(host, () =>
    createInspectorServer({
      port,
      autoOpen: options.open ?? false,
      ...(options.inspectorUrl ? { url: options.inspectorUrl } : {}),
    }),
  );
  if (!server) {
    // Not captured (a future version may build its server differently): the relay still works, but open
    // connections cannot be destroyed here.
    return { stop: async () => relay.stop() };
  }
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  // The ws server re-emits the HTTP server's errors on itself, where nobody listens: take them here instead.
  server.removeAllListeners('error');
  const failed = new Promise<never>((_, reject) =>
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new InspectorStartError(
          error.code === 'EADDRINUSE'
            ? `port ${port} is in use; choose another with --inspect-port <port>`
            : `the inspector relay could not listen on port ${port}: ${error.message}`,
        ),
      ),
    ),
  );
  server.on('error', () => {});
  const stopRelay = async () => {
    const closed = server.listening ? once(server, 'close') : Promise.resolve();
    relay.stop();
    for (const socket of sockets) socket.destroy();
    server.closeAllConnections();
    await closed;
  };
  // Only a listen error matters; one after that (the server is up) must not become an unhandled rejection.
  failed.catch(() => {});
  try {
    if (!server.listening) await Promise.race([once(server, 'listening'), failed]);
  } catch (error) {
    await stopRelay();
    throw error;
  }
  return { stop: stopRelay };
}

/**
 * Runs `start` while `http.createServer` is observed, and returns the server it created (synchronously). The
 * library listens with `listen(port, callback)`, which is every interface: the captured server listens on `host`.
 */
function captureHttpServer<T>(host: string, start: () => T): { result: T; server: http.Server | null } {
  const module = http as unknown as { createServer: typeof http.createServer };
  const original = module.createServer;
  const captured: { server: http.Server | null } = { server: null };
  module.createServer = ((...args: Parameters<typeof http.createServer>) => {
    const server = original(...args);
    const listen = server.listen.bind(server) as (...rest: unknown[]) => http.Server;
    server.listen = ((port: unknown, ...rest: unknown[]) =>
      typeof port === 'number' && (rest.length === 0 || typeof rest[0] === 'function')
        ? listen(port, host, ...rest)
        : listen(port, ...rest)) as typeof server.listen;
    captured.server = server;
    return server;
  }) as typeof http.createServer;
  try {
    const result = start();
    return { result, server: captured.server };
  } finally {
    module.createServer = original;
  }
}

async function freePort(host: string): Promise<number> {
  const probe = http.createServer();
  probe.listen(0, host);
  await once(probe, 'listening');
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

async function withTimeout(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
