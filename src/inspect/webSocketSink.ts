/**
 * An inspection sink that serves messages over a local WebSocket (127.0.0.1 only): every connected client gets
 * each message as one JSON text frame. A client that connects late first receives the most recent messages
 * (a bounded backlog), then the live ones, in order.
 *
 * `close()` releases everything: clients are asked to close (so frames already sent are delivered), those that do
 * not answer within `closeTimeoutMs` are terminated (a silent client must not keep the process alive), and the
 * server is closed.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { InspectionMessage, InspectionSink } from './inspectionStream.js';
import { optionalPeer } from '../peers/optionalPeer.js';

export interface WebSocketSinkOptions {
  /** TCP port; 0 (the default) picks a free one. */
  port?: number;
  /** Interface to listen on (default 127.0.0.1: the stream is for this machine). */
  host?: string;
  /** Messages kept for clients that connect later (default 1,000; 0 disables). */
  backlog?: number;
  /** How long `close()` waits for clients to finish the closing handshake before terminating them (default 500). */
  closeTimeoutMs?: number;
}

export interface WebSocketSink extends InspectionSink {
  readonly port: number;
  /** `ws://127.0.0.1:<port>` */
  readonly url: string;
  /** Clients connected now. */
  readonly clients: number;
}

/** Starts the server; resolves once it listens. */
export async function webSocketSink(options: WebSocketSinkOptions = {}): Promise<WebSocketSink> {
  const host = options.host ?? '127.0.0.1';
  const limit = options.backlog ?? 1_000;
  // ws is an optional peer: loaded when a WebSocket sink is asked for, so the inspect entry loads without it.
  const { WebSocket, WebSocketServer } = await optionalPeer('ws', () => import('ws'), 'webSocketSink');
  const server = new WebSocketServer({ host, port: options.port ?? 0 });
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([error]) => {
      throw error;
    }),
  ]);
  // After start, an error (e.g. a bad client) must not crash the host process.
  server.on('error', () => {});
  const backlog: string[] = [];
  server.on('connection', (socket) => {
    socket.on('error', () => socket.terminate());
    for (const frame of backlog) socket.send(frame);
  });
  const { port } = server.address() as AddressInfo;
  let closed = false;
  return {
    port,
    url: `ws://${host}:${port}`,
    get clients() {
      return server.clients.size;
    },
    write(message: InspectionMessage) {
      if (closed) return;
      const frame = JSON.stringify(message);
      if (limit > 0) {
        backlog.push(frame);
        if (backlog.length > limit) backlog.shift();
      }
      for (const client of server.clients) if (client.readyState === WebSocket.OPEN) client.send(frame);
    },
    async close() {
      if (closed) return;
      closed = true;
      const clients = [...server.clients];
      const goodbyes = clients.map((client) =>
        client.readyState === WebSocket.CLOSED ? Promise.resolve() : once(client, 'close').then(() => undefined),
      );
      for (const client of clients) client.close(1001, 'inspection stream closed');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(goodbyes),
        new Promise((resolve) => (timer = setTimeout(resolve, options.closeTimeoutMs ?? 500))),
      ]);
      clearTimeout(timer);
      for (const client of server.clients) client.terminate();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
