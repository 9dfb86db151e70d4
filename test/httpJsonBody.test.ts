/**
 * The HTTP service's JSON bodies: a body with a key that could poison a prototype is refused as itself (400
 * `forbidden_json_key`, naming the key), not as JSON that does not parse; it is refused exactly when Fastify's own
 * parser (secure-json-parse with its defaults) refuses it; empty, broken and oversized bodies are answered as before.
 */
import fc from 'fast-check';
import { parse as secureJsonParse } from 'secure-json-parse';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';
import { parseJsonBody } from '../src/http/jsonBody.js';
import { ManualClock } from '../src/testing/index.js';

let service: DemoService;
beforeEach(async () => {
  service = await createDemoService({ store: new MemoryStore(), clock: new ManualClock(), expirySweepMs: 0 });
});
afterEach(() => service.close());

function start(payload: string) {
  return service.app.inject({
    method: 'POST',
    url: '/api/tasks',
    headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
    payload,
  });
}

describe('a start body with a prototype key', () => {
  it.each([
    ['{"__proto__": {"x": 1}, "goal": "refund"}', '__proto__'],
    ['{"goal": "refund", "input": {"items": [{"\\u005f_proto__": {}}]}}', 'input.items[0].__proto__'],
    ['{"goal": "refund", "input": {"constructor": {"prototype": {"x": 1}}}}', 'input.constructor.prototype'],
  ])('refuses %s with 400 forbidden_json_key naming %s, and starts nothing', async (payload, path) => {
    const response = await start(payload);
    expect(response.statusCode).toBe(400);
    expect(response.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    const body = response.json();
    expect(body).toMatchObject({ code: 'forbidden_json_key', status: 400, detail: body.message });
    expect(body.message).toContain(`the body's key ${path} is refused for safety`);
    expect(body.message).not.toContain('not valid JSON');
    expect(await service.orchestrator.list()).toEqual([]);
  });

  it('starts as before with keys that only look alike ("constructor" without "prototype", "proto")', async () => {
    const body = { ...REFUND_START_BODY, taskId: 'alike' };
    const payload = JSON.stringify(body).replace(/}$/, ',"proto":1,"x":{"constructor":"c"}}');
    // They pass the parser and reach the start body's schema, which knows no such fields.
    const response = await start(payload);
    expect([response.statusCode, response.json().code]).toEqual([400, 'invalid_request']);
    expect(response.json().message).toContain('Unrecognized keys: "proto", "x"');
  });
});

describe('other bodies', () => {
  it('answers an empty body, broken JSON and an oversized one as before', async () => {
    const empty = (await start('')).json();
    expect([empty.code, empty.message]).toEqual(['invalid_request', 'the JSON body is empty']);
    const broken = await start('{"goal": ');
    expect([broken.statusCode, broken.json().code]).toEqual([400, 'invalid_json']);
    // JSON.parse's message quotes the body: it is not repeated to the caller.
    expect(broken.json().message).toBe('the body is not valid JSON');
    const large = await start(JSON.stringify({ goal: 'x'.repeat(64 * 1024) }));
    expect([large.statusCode, large.json().code]).toEqual([413, 'body_too_large']);
    const started = await start(JSON.stringify({ ...REFUND_START_BODY, taskId: 'fine' }));
    expect(started.statusCode).toBe(201);
  });
});

describe('the OpenAPI document', () => {
  it('lists invalid_json and forbidden_json_key under 400 for every route that takes a body', async () => {
    const document = (await service.app.inject({ method: 'GET', url: '/api/openapi.json' })).json() as {
      paths: Record<
        string,
        Record<string, { requestBody?: unknown; responses: Record<string, { description: string }> }>
      >;
    };
    const operations = Object.values(document.paths).flatMap((methods) => Object.values(methods));
    const withBody = operations.filter((operation) => operation.requestBody);
    expect(withBody.length).toBeGreaterThan(3);
    for (const operation of withBody)
      expect(operation.responses['400']!.description.split(', ')).toEqual(
        expect.arrayContaining(['invalid_json', 'forbidden_json_key']),
      );
  });
});

describe('parseJsonBody', () => {
  const keys = fc.constantFrom('__proto__', '\\u005f_proto__', 'constructor', 'prototype', 'proto', 'a', '0');
  const json: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.constantFrom('1', 'null', '"x"', '{}', '[]'),
      fc.array(tie('value'), { maxLength: 3 }).map((items) => `[${items.join(',')}]`),
      fc
        .array(fc.tuple(keys, tie('value')), { maxLength: 3 })
        .map((members) => `{${members.map(([key, value]) => `"${key}":${value}`).join(',')}}`),
    ),
  })).value;

  it("refuses exactly the bodies Fastify's default parser refuses, and reads the others alike", () => {
    fc.assert(
      fc.property(json, (text) => {
        let expected: unknown;
        try {
          expected = { ok: true, value: secureJsonParse(text) };
        } catch {
          expected = { ok: false };
        }
        const ours = parseJsonBody(text);
        expect(ours.ok ? ours : { ok: false }).toEqual(expected);
        if (!ours.ok) expect(ours.error.code).toBe('forbidden_json_key');
      }),
      { numRuns: 500 },
    );
  });

  it('walks a deeply nested body without the stack', () => {
    const deep = `${'['.repeat(5_000)}{"__proto__":1}${']'.repeat(5_000)}`;
    const parsed = parseJsonBody(deep);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error.message).toMatch(/^the body's key \[0\][[\]0]*\.\.\.\.__proto__ is refused/);
  });
});
