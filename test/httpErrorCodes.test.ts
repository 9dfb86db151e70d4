/**
 * The HTTP service answers every error with a code from `AgentErrorCode`: its own refusals, Fastify's parsing
 * failures, the orchestrator's errors passed through, and a refused decision's reply code. The one exception is a
 * host's own `ServiceError` from `startRequest` (the demo's `unknown_request`), which passes through as the host made it.
 * The router's own errors (a malformed %-escape, a path parameter too long) are answered before any plugin runs: as
 * problems only through `problemFrameworkErrors`, the server option the demo sets.
 */
import Fastify from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { problemFrameworkErrors } from '../src/http/index.js';
import { MemoryStore, isAgentErrorCode } from '../src/index.js';
import { ManualClock } from '../src/testing/index.js';

let service: DemoService;
beforeEach(async () => {
  service = await createDemoService({ store: new MemoryStore(), clock: new ManualClock(), expirySweepMs: 0 });
});
afterEach(() => service.close());

type Request = {
  method: 'GET' | 'POST';
  url: string;
  user?: string | null;
  payload?: unknown;
  headers?: Record<string, string>;
};

async function answer({
  method,
  url,
  user = 'E17',
  payload,
  headers = {},
}: Request): Promise<{ statusCode: number; code: unknown; contentType: unknown; body: Record<string, unknown> }> {
  const response = await service.app.inject({
    method,
    url,
    headers: { ...(user ? { authorization: `Bearer ${user}` } : {}), ...headers },
    ...(payload === undefined ? {} : typeof payload === 'string' ? { payload } : { payload: payload as object }),
  });
  const body = response.json() as Record<string, unknown>;
  return { statusCode: response.statusCode, code: body.code, contentType: response.headers['content-type'], body };
}

describe('the error bodies of the HTTP service', () => {
  it('carry only codes of the AgentErrorCode list, each as an RFC 9457 problem', async () => {
    const started = await service.app.inject({
      method: 'POST',
      url: '/api/tasks',
      headers: { authorization: 'Bearer E17' },
      payload: { ...REFUND_START_BODY, taskId: 'refund-1' },
    });
    expect(started.statusCode).toBe(201);
    const status = await service.orchestrator.settled(started.json().status.taskId as string);
    const pending = status.pendingConfirmation!;
    const json = { 'content-type': 'application/json' };
    const requests: Request[] = [
      { method: 'GET', url: '/api/tasks', user: null },
      { method: 'GET', url: '/api/tasks?limit=0' },
      { method: 'GET', url: '/api/tasks/nobody-has-this' },
      { method: 'GET', url: '/api/nothing-here' },
      { method: 'GET', url: '/api/tasks/refund-1/events?lastEventId=abc' },
      { method: 'GET', url: '/api/tasks/refund-1/events?lastEventId=9999' },
      { method: 'POST', url: '/api/tasks', payload: 'goal', headers: { 'content-type': 'text/plain' } },
      { method: 'POST', url: '/api/tasks', payload: '{"goal":', headers: json },
      { method: 'POST', url: '/api/tasks', payload: JSON.stringify({ goal: 'x'.repeat(64 * 1024) }), headers: json },
      { method: 'POST', url: '/api/tasks', payload: { goal: '' } },
      { method: 'POST', url: '/api/tasks', payload: { ...REFUND_START_BODY, limits: { money: 1 } } },
      { method: 'POST', url: '/api/tasks', payload: { ...REFUND_START_BODY, taskId: 'refund-1' } },
      {
        method: 'POST',
        url: '/api/tasks/refund-1/confirm',
        payload: { confirmationId: pending.id, argsHash: pending.argsHash },
        user: null,
        headers: { cookie: 'demo_user=E17' },
      },
      {
        method: 'POST',
        url: '/api/tasks/refund-1/confirm',
        payload: { confirmationId: pending.id, argsHash: 'not-the-hash' },
      },
      {
        method: 'POST',
        url: '/api/tasks/refund-1/confirm',
        payload: { confirmationId: 'not-this-one', argsHash: pending.argsHash },
      },
      { method: 'POST', url: '/api/tasks/refund-1/answer', payload: { text: 'the east building' } },
      { method: 'POST', url: '/api/tasks/refund-1/next', payload: {} },
      { method: 'POST', url: '/api/tasks/refund-1/cancel', payload: { surprise: true } },
    ];
    const answers = [];
    for (const request of requests)
      answers.push({ request: `${request.method} ${request.url}`, ...(await answer(request)) });
    for (const { request, statusCode, code, contentType, body } of answers) {
      expect(statusCode, request).toBeGreaterThanOrEqual(400);
      expect(isAgentErrorCode(code), `${request}: ${String(code)}`).toBe(true);
      expect(contentType, request).toBe('application/problem+json; charset=utf-8');
      expect(body, request).toMatchObject({
        type: `urn:statechart-agent:problem:${String(code)}`,
        title: expect.stringMatching(/^[A-Z][a-z0-9 ]+$/),
        detail: body.message,
        code,
      });
      // The HTTP status, except a refused decision's, which keeps the task's status there (as before).
      if (typeof body.status === 'number') expect(body.status, request).toBe(statusCode);
      else expect(body.status, request).toMatchObject({ taskId: 'acme:E17:refund-1' });
    }
    // Distinct refusals, not one code for all of them.
    expect(new Set(answers.map((a) => a.code)).size).toBeGreaterThanOrEqual(12);
  });

  it("pass a host's own code through unchanged (it is the host's, outside the list)", async () => {
    const refused = await answer({
      method: 'POST',
      url: '/api/tasks',
      payload: { goal: 'refund', input: { request: 'nothing-on-record' } },
    });
    expect(refused).toMatchObject({ statusCode: 400, code: 'unknown_request' });
    expect(refused.body).toMatchObject({ type: 'urn:statechart-agent:problem:unknown_request', status: 400 });
    expect(isAgentErrorCode('unknown_request')).toBe(false);
  });

  it('are documented in the OpenAPI document with codes of the list only', async () => {
    const document = (await service.app.inject({ method: 'GET', url: '/api/openapi.json' })).json() as {
      paths: Record<string, Record<string, { responses: Record<string, { description: string }> }>>;
    };
    const documented = Object.values(document.paths).flatMap((methods) =>
      Object.values(methods).flatMap((operation) =>
        Object.entries(operation.responses)
          .filter(([status]) => Number(status) >= 400)
          .flatMap(([, response]) => response.description.split(', ')),
      ),
    );
    expect(documented.length).toBeGreaterThan(20);
    expect(documented.filter((code) => !isAgentErrorCode(code))).toEqual([]);
  });
});

describe("the router's own errors, with problemFrameworkErrors (Fastify's frameworkErrors, as the demo sets it)", () => {
  it.each([
    ['a malformed %-escape in a task id', '/api/tasks/ab%ZZ', 400, 'invalid_url_encoding'],
    ['bytes that are not UTF-8 in a task id', '/api/tasks/%E0%A4%A/audit', 400, 'invalid_url_encoding'],
    ['a malformed %-escape outside any route', '/api/nothing%ZZ', 400, 'invalid_url_encoding'],
    ['a task id longer than maxParamLength', `/api/tasks/${'x'.repeat(101)}`, 414, 'path_param_too_long'],
    ['the same under a route below it', `/api/tasks/${'x'.repeat(101)}/events`, 414, 'path_param_too_long'],
  ])('answers %s as a problem', async (_what, url, statusCode, code) => {
    const response = await answer({ method: 'GET', url });
    expect([response.statusCode, response.code, response.contentType]).toEqual([
      statusCode,
      code,
      'application/problem+json; charset=utf-8',
    ]);
    expect(isAgentErrorCode(code)).toBe(true);
    expect(response.body).toMatchObject({
      type: `urn:statechart-agent:problem:${code}`,
      status: statusCode,
      detail: response.body.message,
    });
    // The caller's path is not repeated back.
    expect(response.body.message).not.toContain('ZZ');
    expect(response.body.message).not.toContain('xxxx');
    if (statusCode === 414)
      expect(response.body.message).toContain(
        "(100 characters as sent, percent-escapes included: Fastify's maxParamLength)",
      );
  });

  it("names the app's own maxParamLength", async () => {
    const app = Fastify({ frameworkErrors: problemFrameworkErrors, routerOptions: { maxParamLength: 20 } });
    app.get('/tasks/:taskId', async () => ({}));
    const response = await app.inject({ url: `/tasks/${'x'.repeat(21)}` });
    expect([response.statusCode, response.json().code]).toEqual([414, 'path_param_too_long']);
    expect(response.json().message).toContain('(20 characters');
    await app.close();
  });
});
