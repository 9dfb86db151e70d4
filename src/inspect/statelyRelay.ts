/**
 * The Stately inspector's relay, ours: an HTTP page plus a WebSocket server that sends the inspector's frames to
 * the pages watching. The frames are produced in this process (no client connects to publish), and viewers only
 * receive:
 * - a page is served only to a signed-in caller: the host's `authenticate(request)` says who (a service passes its
 *   own session check), or, without one, the holder of the relay's random access key (in the URL it prints: the
 *   person who started the process). The page gets a one-time token, valid for `tokenTtlMs`, to open its WebSocket;
 * - a WebSocket upgrade needs an `Origin` among the relay's own origins (`http://127.0.0.1:<port>`,
 *   `http://localhost:<port>`... for its interface) or `allowedOrigins`, and an unused, unexpired token: another
 *   site cannot read the page, so it never holds a token, and its `Origin` is refused anyway. The page's `Host`
 *   must be one of those origins' too (a DNS-rebound name is refused);
 * - each viewer gets only the frames of tasks its session may see, by the HTTP layer's rules (`accessOf`: its
 *   tenant, and its own tasks or those whose pending confirmation it may approve; every task of its tenant for a
 *   holder of `operatorScope`); the access-key holder sees
 *   every task of this process. A viewer that gains access to a task (it becomes the approver) first gets the task's
 *   earlier frames from the backlog;
 * - nothing a viewer sends is passed on: messages from viewers are dropped (and a large one closes the socket).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import type { Principal } from '../../machines/context.js';
import { accessOf } from '../http/access.js';
import { optionalPeer } from '../peers/optionalPeer.js';
import { relayPage } from './relayPage.js';
import type { TaskAccessFacts } from './statelyFrames.js';

export interface RelayRequest {
  headers: http.IncomingHttpHeaders;
  url?: string | undefined;
}

export interface StatelyRelayOptions {
  port: number;
  host: string;
  inspectorUrl: string;
  /** Who is asking for the page; null refuses it. Without it, the page needs the relay's access key. */
  authenticate?: (request: RelayRequest) => Principal | null | Promise<Principal | null>;
  /** Origins besides the relay's own whose pages may connect (e.g. a proxy's `https://ops.example.com`). */
  allowedOrigins?: readonly string[];
  /** The scope of an operator, who sees every task of its tenant (the orchestrator's `adminScope`); default none. */
  operatorScope?: string;
  /** How long a page's token stays usable (default 60 s); each token opens one WebSocket. */
  tokenTtlMs?: number;
  /** Frames kept for viewers that connect later (default 1,000). */
  backlog?: number;
  now?: () => number;
}

export interface StatelyRelay {
  port: number;
  /** The page: with the access key when there is no `authenticate`. */
  url: string;
  origins: readonly string[];
  /** Sends a frame to every viewer that may see `taskId` (null: no task's; only the access-key holder sees it). */
  publish(frame: Record<string, unknown>, taskId: string | null, access: TaskAccessFacts | null): void;
  /** Whether any frame of this task was published. */
  knows(taskId: string): boolean;
  readonly viewers: number;
  stop(): Promise<void>;
}

/** null: the access-key holder, who sees every task. */
interface Viewer {
  principal: Principal | null;
  socket: WebSocket;
  tasks: Set<string>;
}

const LOOPBACK = ['127.0.0.1', 'localhost', '[::1]'];

export async function startStatelyRelay(options: StatelyRelayOptions): Promise<StatelyRelay> {
  const { WebSocketServer, WebSocket: Ws } = await optionalPeer('ws', () => import('ws'), 'createStatelyInspection');
  const now = options.now ?? Date.now;
  const ttl = options.tokenTtlMs ?? 60_000;
  const limit = options.backlog ?? 1_000;
  const accessKey = randomBytes(24).toString('base64url');
  const tokens = new Map<string, { principal: Principal | null; expiresAt: number }>();
  const backlog: { frame: string; taskId: string | null }[] = [];
  const facts = new Map<string, TaskAccessFacts>();
  const viewers = new Set<Viewer>();
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1_024 });

  const server = http.createServer((request, response) => {
    void servePage(request, response).catch(() => {
      if (!response.headersSent) refuse(response, 500, 'the page could not be served');
    });
  });
  server.listen(options.port, options.host);
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([error]) => {
      throw error;
    }),
  ]);
  server.on('error', () => {});
  const port = (server.address() as { port: number }).port;
  const hosts =
    options.host === '0.0.0.0' || LOOPBACK.includes(options.host) || options.host === '::1'
      ? LOOPBACK
      : [options.host.includes(':') ? `[${options.host}]` : options.host];
  const origins = [
    ...hosts.map((host) => `http://${host}:${port}`),
    ...(options.allowedOrigins ?? []).map((origin) => new URL(origin).origin),
  ];
  const allowedHosts = new Set(origins.map((origin) => new URL(origin).host));

  const visible = (viewer: Viewer, taskId: string | null) => {
    if (viewer.principal === null) return true;
    if (taskId === null) return false;
    const task = facts.get(taskId);
    return task !== undefined && accessOf(viewer.principal, task, options.operatorScope ?? null) !== null;
  };
  const send = (viewer: Viewer, frame: string) => {
    if (viewer.socket.readyState === Ws.OPEN) viewer.socket.send(frame);
  };

  async function servePage(request: http.IncomingMessage, response: http.ServerResponse) {
    const url = new URL(request.url ?? '/', 'http://relay');
    if (request.method !== 'GET' || url.pathname !== '/') return refuse(response, 404, 'not found');
    if (!allowedHosts.has(request.headers.host ?? '')) return refuse(response, 421, 'unknown host');
    let principal: Principal | null;
    if (options.authenticate) {
      principal = await options.authenticate({ headers: request.headers, url: request.url });
      if (!principal) return refuse(response, 401, 'sign in to watch tasks');
    } else {
      if (!sameSecret(url.searchParams.get('key') ?? '', accessKey))
        return refuse(response, 401, 'open the address the relay printed (it carries its access key)');
      principal = null;
    }
    const token = randomBytes(24).toString('base64url');
    for (const [old, entry] of tokens) if (entry.expiresAt <= now()) tokens.delete(old);
    tokens.set(token, { principal, expiresAt: now() + ttl });
    response.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      // The URL may carry the access key: never send it to the inspector's site as a referrer.
      'referrer-policy': 'no-referrer',
      'x-frame-options': 'DENY',
    });
    response.end(relayPage(options.inspectorUrl, token));
  }

  server.on('upgrade', (request: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const origin = request.headers.origin;
    if (!origin || !origins.includes(origin)) return reject(socket, 403, 'Forbidden');
    const token = new URL(request.url ?? '/', 'http://relay').searchParams.get('token') ?? '';
    const entry = tokens.get(token);
    if (!entry || entry.expiresAt <= now()) return reject(socket, 401, 'Unauthorized');
    tokens.delete(token);
    wss.handleUpgrade(request, socket, head, (ws) => {
      const viewer: Viewer = { principal: entry.principal, socket: ws, tasks: new Set() };
      viewers.add(viewer);
      ws.on('error', () => ws.terminate());
      ws.on('close', () => viewers.delete(viewer));
      // Viewers only watch: whatever they send goes nowhere.
      ws.on('message', () => {});
      for (const item of backlog) {
        if (!visible(viewer, item.taskId)) continue;
        if (item.taskId !== null) viewer.tasks.add(item.taskId);
        send(viewer, item.frame);
      }
    });
  });

  let stopped = false;
  return {
    port,
    url: options.authenticate ? origins[0]! : `${origins[0]}/?key=${accessKey}`,
    origins,
    get viewers() {
      return viewers.size;
    },
    knows: (taskId) => facts.has(taskId) || backlog.some((item) => item.taskId === taskId),
    publish(frameObject, taskId, access) {
      if (stopped) return;
      if (taskId !== null && access) facts.set(taskId, access);
      const frame = JSON.stringify(frameObject);
      backlog.push({ frame, taskId });
      if (backlog.length > limit) backlog.shift();
      for (const viewer of viewers) {
        if (!visible(viewer, taskId)) {
          if (taskId !== null) viewer.tasks.delete(taskId);
          continue;
        }
        if (taskId === null || viewer.tasks.has(taskId) || viewer.principal === null) {
          if (taskId !== null) viewer.tasks.add(taskId);
          send(viewer, frame);
          continue;
        }
        // Newly visible (e.g. it became this task's approver): the task's frames so far, this one included.
        viewer.tasks.add(taskId);
        for (const item of backlog) if (item.taskId === taskId) send(viewer, item.frame);
      }
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      const sockets = [...viewers].map((viewer) => viewer.socket);
      const goodbyes = sockets.map((ws) =>
        ws.readyState === Ws.CLOSED ? Promise.resolve() : once(ws, 'close').then(() => undefined),
      );
      for (const ws of sockets) ws.close(1001, 'inspector relay stopped');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(goodbyes), new Promise((resolve) => (timer = setTimeout(resolve, 500)))]);
      clearTimeout(timer);
      for (const ws of sockets) ws.terminate();
      wss.close();
      const closed = server.listening ? once(server, 'close') : Promise.resolve();
      server.close();
      server.closeAllConnections();
      await closed;
    },
  };
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function refuse(response: http.ServerResponse, status: number, message: string): void {
  response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
  response.end(`${message}\n`);
}

function reject(socket: Duplex, status: number, reason: string): void {
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  socket.destroy();
}
