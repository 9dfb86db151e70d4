/**
 * A task whose stored envelope is damaged (truncated, of an unknown machine version), read through the HTTP service:
 * its own routes answer with its specific error, naming the task and the problem, and every listing leaves it out
 * and keeps serving the tenant's other tasks.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';
import { ManualClock } from '../src/testing/index.js';
import { rawRows } from './support/rawRows.js';

const services: DemoService[] = [];
afterEach(async () => {
  for (const service of services.splice(0)) await service.close();
});

async function serviceOn(store: MemoryStore): Promise<DemoService> {
  const service = await createDemoService({ store, clock: new ManualClock(), expirySweepMs: 0 });
  services.push(service);
  return service;
}

const get = (service: DemoService, url: string) =>
  service.app.inject({ method: 'GET', url, headers: { authorization: 'Bearer E17' } });

describe('a task whose stored envelope is damaged', () => {
  it.each([
    ['truncated', (text: string) => text.slice(0, 50), 'corrupt_task', /cannot be restored: stored data is not JSON/],
    [
      'of an unknown machine version',
      (text: string) => text.replace(/"machineVersion":"[^"]+"/, '"machineVersion":"agent/99"'),
      'unsupported_version',
      /machine version "agent\/99" is not supported/,
    ],
  ])('%s: its routes name the problem; listings leave it out', async (_label, damage, code, message) => {
    const store = new MemoryStore();
    const first = await serviceOn(store);
    for (const taskId of ['refund-1', 'refund-2']) {
      const started = await first.app.inject({
        method: 'POST',
        url: '/api/tasks',
        headers: { authorization: 'Bearer E17' },
        payload: { ...REFUND_START_BODY, taskId },
      });
      expect(started.statusCode).toBe(201);
      await first.orchestrator.settled(started.json().status.taskId as string);
    }
    const row = [...rawRows(store)].find(([taskId]) => taskId.endsWith(':refund-1'))![1];
    row.envelope = damage(row.envelope);
    // Another instance, which holds neither task in memory: it reads them from the store.
    const service = await serviceOn(store);

    for (const url of ['/api/tasks/refund-1', '/api/tasks/refund-1/audit']) {
      const response = await get(service, url);
      expect(response.statusCode, url).toBe(409);
      expect(response.json(), url).toMatchObject({ code, detail: expect.stringMatching(message) });
      expect(response.json().detail, url).toContain('"acme:E17:refund-1"');
    }
    const listed = await get(service, '/api/tasks');
    expect(listed.statusCode).toBe(200);
    expect(listed.json().tasks.map((t: { taskId: string }) => t.taskId)).toEqual(['acme:E17:refund-2']);
    const inbox = await get(service, '/api/inbox');
    expect(inbox.statusCode).toBe(200);
    expect(inbox.json().items.map((t: { taskId: string }) => t.taskId)).toEqual(['acme:E17:refund-2']);
    expect((await get(service, '/api/tasks/refund-2')).statusCode).toBe(200);
  });
});
