/**
 * The service behind a reverse proxy that rewrites `Host` as nginx does by default: a browser session's decision
 * carries the proxy's origin, which is not the `Host` the service sees. With `trustProxy` (and Fastify trusting the
 * proxy's address) the forwarded host counts; a client that is not the proxy cannot forge it; `allowedOrigins`
 * names an origin outright for a proxy that forwards nothing. The proxy is a real one (test/support/reverseProxy.ts).
 */
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { ServiceOptionsError, agentService } from '../src/http/index.js';
import { MemoryStore } from '../src/index.js';
import { type ReverseProxy, startReverseProxy } from './support/reverseProxy.js';

let service: DemoService | null = null;
let proxy: ReverseProxy | null = null;
afterEach(async () => {
  await proxy?.close();
  await service?.close();
  proxy = service = null;
});

async function behindProxy(
  options: Partial<Parameters<typeof createDemoService>[0]> = {},
  forwardedHeaders = true,
): Promise<{ upstream: string; proxy: ReverseProxy }> {
  service = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0, ...options });
  const upstream = await service.app.listen({ port: 0, host: '127.0.0.1' });
  proxy = await startReverseProxy(upstream, { forwardedHeaders });
  return { upstream, proxy };
}

let taskCount = 0;
/** What the browser does on the page at `origin`: read the session's token, then start a task with cookie and Origin. */
async function browserStart(base: string, origin: string, extraHeaders: Record<string, string> = {}) {
  const cookie = { cookie: 'demo_user=E17' };
  const session = await fetch(`${base}/api/session`, { headers: cookie });
  expect(session.status).toBe(200);
  const { csrfToken } = (await session.json()) as { csrfToken: string };
  const response = await fetch(`${base}/api/tasks`, {
    method: 'POST',
    headers: { ...cookie, origin, 'x-csrf-token': csrfToken, 'content-type': 'application/json', ...extraHeaders },
    body: JSON.stringify({ ...REFUND_START_BODY, taskId: `proxied-${++taskCount}` }),
  });
  return { status: response.status, code: ((await response.json()) as { code?: string }).code };
}

describe('behind a reverse proxy that rewrites Host', () => {
  it('refuses the page served through the proxy by default (403 cross_origin): strict unless told', async () => {
    const { proxy } = await behindProxy();
    expect(await browserStart(proxy.origin, proxy.origin)).toEqual({ status: 403, code: 'cross_origin' });
  });

  it('accepts it with trustProxy when Fastify trusts the proxy and the proxy sends X-Forwarded-Host', async () => {
    const { proxy } = await behindProxy({ trustProxy: '127.0.0.2' });
    expect(await browserStart(proxy.origin, proxy.origin)).toEqual({ status: 201, code: undefined });
  });

  it('does not believe an X-Forwarded-Host from a client that is not the trusted proxy', async () => {
    const { upstream } = await behindProxy({ trustProxy: '127.0.0.2' });
    const forged = await browserStart(upstream, 'https://evil.example', { 'x-forwarded-host': 'evil.example' });
    expect(forged).toEqual({ status: 403, code: 'cross_origin' });
    // The service's own origin still works directly.
    expect(await browserStart(upstream, upstream)).toEqual({ status: 201, code: undefined });
  });

  it('does not believe X-Forwarded-Host without its own trustProxy, even when Fastify trusts the proxy', async () => {
    service = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0 });
    const app = Fastify({ trustProxy: '127.0.0.2' });
    await app.register(agentService, {
      orchestrator: service.orchestrator,
      authenticate: () => ({ userId: 'E17', tenantId: 'acme', scopes: [] }),
      startRequest: () => {
        throw new Error('not reached');
      },
    });
    const upstream = await app.listen({ port: 0, host: '127.0.0.1' });
    proxy = await startReverseProxy(upstream, { forwardedHeaders: true });
    try {
      expect(await browserStart(proxy.origin, proxy.origin)).toEqual({ status: 403, code: 'cross_origin' });
    } finally {
      await app.close();
    }
  });

  it('accepts an origin listed in allowedOrigins when the proxy forwards nothing (nginx untouched)', async () => {
    // The service must know the proxy's origin, so the proxy starts first.
    let upstream = '';
    proxy = await startReverseProxy(() => upstream, { forwardedHeaders: false });
    service = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0, allowedOrigins: [proxy.origin] });
    upstream = await service.app.listen({ port: 0, host: '127.0.0.1' });
    expect(await browserStart(proxy.origin, proxy.origin)).toEqual({ status: 201, code: undefined });
    expect(await browserStart(proxy.origin, 'http://127.0.0.1:9')).toEqual({ status: 403, code: 'cross_origin' });
  });

  it.each([['*'], ['null'], ['https://app.example/inbox'], ['app.example'], ['ftp://app.example'], [42]])(
    'refuses allowedOrigins entry %j at registration (ServiceOptionsError)',
    async (entry) => {
      const app = Fastify();
      service = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0 });
      await expect(
        app.register(agentService, {
          orchestrator: service.orchestrator,
          authenticate: () => null,
          startRequest: () => {
            throw new Error('not reached');
          },
          allowedOrigins: [entry as string],
        }),
      ).rejects.toThrow(ServiceOptionsError);
      await app.close();
    },
  );
});
