/**
 * A tiny reverse proxy for tests, behaving like nginx's default `proxy_pass`: it rewrites `Host` to the upstream's
 * address (`proxy_set_header Host $proxy_host`) and, when asked, sends what a configured nginx adds
 * (`X-Forwarded-Host $host`, `X-Forwarded-Proto $scheme`, `X-Forwarded-For`). It connects from `localAddress`
 * (127.0.0.2 by default) so a service can trust the proxy's address without trusting every loopback client.
 * Bodies and responses stream through (SSE included).
 */
import {
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  createServer,
  request as httpRequest,
} from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReverseProxy {
  /** The proxy's own origin, what the browser sees: `http://127.0.0.1:<port>`. */
  origin: string;
  close(): Promise<void>;
}

/** `upstream` is the service's origin, or a function giving it (when the service must know the proxy's first). */
export async function startReverseProxy(
  upstream: string | (() => string),
  options: { forwardedHeaders?: boolean; localAddress?: string } = {},
): Promise<ReverseProxy> {
  const localAddress = options.localAddress ?? '127.0.0.2';
  const server: Server = createServer((incoming: IncomingMessage, outgoing) => {
    const target = new URL(typeof upstream === 'string' ? upstream : upstream());
    const headers: IncomingHttpHeaders = { ...incoming.headers, host: target.host };
    if (options.forwardedHeaders) {
      headers['x-forwarded-host'] = incoming.headers.host;
      headers['x-forwarded-proto'] = 'http';
      headers['x-forwarded-for'] = incoming.socket.remoteAddress;
    }
    const forwarded = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: incoming.method,
        path: incoming.url,
        headers,
        localAddress,
      },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    forwarded.on('error', () => {
      if (!outgoing.headersSent) outgoing.writeHead(502);
      outgoing.end();
    });
    outgoing.on('close', () => forwarded.destroy());
    incoming.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
