/**
 * The service's HTTP rate limit (`@fastify/rate-limit`): on by default, per caller. 60 concurrent starts by one
 * caller over a real socket get some `429 rate_limited` problems with `Retry-After`, every other one 201; another
 * caller keeps their own allowance; `rateLimit: false` turns it off explicitly.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { RATE_LIMIT_DEFAULTS, ServiceOptionsError, type AgentServiceOptions } from '../src/http/index.js';
import { MemoryStore } from '../src/index.js';

let service: DemoService | null = null;
afterEach(async () => {
  await service?.close();
  service = null;
});

async function listening(rateLimit?: AgentServiceOptions['rateLimit']): Promise<string> {
  service = await createDemoService({
    store: new MemoryStore(),
    expirySweepMs: 0,
    ...(rateLimit !== undefined ? { rateLimit } : {}),
  });
  return service.app.listen({ port: 0, host: '127.0.0.1' });
}

async function starts(origin: string, user: string, count: number, prefix: string) {
  return Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const response = await fetch(`${origin}/api/tasks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${user}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ...REFUND_START_BODY, taskId: `${prefix}-${i}` }),
      });
      return {
        status: response.status,
        retryAfter: response.headers.get('retry-after'),
        contentType: response.headers.get('content-type'),
        body: (await response.json()) as { code?: string; status?: unknown },
      };
    }),
  );
}

describe('the HTTP rate limit', () => {
  it('answers some of 60 concurrent starts 429 rate_limited with Retry-After, and every other one 201', async () => {
    const origin = await listening();
    const answers = await starts(origin, 'E17', 60, 'burst');
    const created = answers.filter((a) => a.status === 201);
    const limited = answers.filter((a) => a.status === 429);
    expect(created.length + limited.length).toBe(60);
    expect(created.length).toBe(RATE_LIMIT_DEFAULTS.starts);
    expect(limited.length).toBe(60 - RATE_LIMIT_DEFAULTS.starts);
    for (const answer of limited) {
      expect(answer.contentType).toBe('application/problem+json; charset=utf-8');
      expect(answer.body).toMatchObject({ code: 'rate_limited', status: 429 });
      expect(Number(answer.retryAfter)).toBeGreaterThan(0);
    }
    // Only the allowed starts exist.
    expect((await service!.orchestrator.list({})).length).toBe(RATE_LIMIT_DEFAULTS.starts);
    // Another caller has their own allowance.
    expect((await starts(origin, 'E99', 1, 'other'))[0]!.status).toBe(201);
  });

  it('counts per caller with the limits given, and is off with rateLimit: false', async () => {
    let origin = await listening({ starts: 2, windowMs: 60_000 });
    expect((await starts(origin, 'E17', 4, 'two')).map((a) => a.status).sort()).toEqual([201, 201, 429, 429]);
    await service!.close();
    origin = await listening(false);
    expect(new Set((await starts(origin, 'E17', 30, 'off')).map((a) => a.status))).toEqual(new Set([201]));
  });

  it('documents 429 rate_limited on the limited routes only', async () => {
    await listening();
    const document = (await service!.app.inject({ url: '/api/openapi.json' })).json() as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    };
    expect(Object.keys(document.paths['/api/tasks']!.post!.responses)).toContain('429');
    expect(Object.keys(document.paths['/api/tasks/{taskId}/confirm']!.post!.responses)).toContain('429');
    expect(Object.keys(document.paths['/api/tasks/{taskId}']!.get!.responses)).not.toContain('429');
  });

  it.each([[{ starts: 0 }], [{ windowMs: -1 }], [true], ['20/min']])(
    'refuses rateLimit %j at registration (ServiceOptionsError)',
    async (rateLimit) => {
      await expect(
        createDemoService({
          store: new MemoryStore(),
          expirySweepMs: 0,
          rateLimit: rateLimit as AgentServiceOptions['rateLimit'],
        }),
      ).rejects.toThrow(ServiceOptionsError);
    },
  );
});
