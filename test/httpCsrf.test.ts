/**
 * CSRF tokens across instances and restarts: a token is an HMAC of the caller under the service's secret, so two
 * instances (or a process and its restart) that share `csrfSecret` accept each other's tokens, and without it each
 * process has its own random secret and refuses the other's (the pages then fetch a new token and retry once:
 * test/deploy.browser.test.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';

const services: DemoService[] = [];
afterEach(async () => {
  for (const service of services.splice(0)) await service.close();
});

async function instances(csrfSecret?: string): Promise<[DemoService, DemoService]> {
  const store = new MemoryStore();
  const make = () => createDemoService({ store, expirySweepMs: 0, ...(csrfSecret ? { csrfSecret } : {}) });
  const pair: [DemoService, DemoService] = [await make(), await make()];
  services.push(...pair);
  return pair;
}

const cookie = { cookie: 'demo_user=E17' };

async function tokenFrom(service: DemoService): Promise<string> {
  return (await service.app.inject({ url: '/api/session', headers: cookie })).json().csrfToken as string;
}

function startWith(service: DemoService, token: string, taskId: string) {
  return service.app.inject({
    method: 'POST',
    url: '/api/tasks',
    headers: { ...cookie, 'x-csrf-token': token },
    payload: { ...REFUND_START_BODY, taskId },
  });
}

describe('CSRF tokens across instances', () => {
  it('are accepted by another instance with the same csrfSecret', async () => {
    const [a, b] = await instances('a-secret-from-the-host-secret-store-0123456789');
    const token = await tokenFrom(a);
    expect(await tokenFrom(b)).toBe(token);
    expect((await startWith(b, token, 'csrf-shared-1')).statusCode).toBe(201);
  });

  it('are refused by another instance without one (403 csrf_token_invalid): each process has its own secret', async () => {
    const [a, b] = await instances();
    const token = await tokenFrom(a);
    const refused = await startWith(b, token, 'csrf-random-1');
    expect([refused.statusCode, refused.json().code]).toEqual([403, 'csrf_token_invalid']);
    expect((await startWith(b, await tokenFrom(b), 'csrf-random-1')).statusCode).toBe(201);
  });
});
