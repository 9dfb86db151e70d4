/**
 * The service's OpenAPI document: it lints clean with Redocly's recommended rules, names every operation, documents
 * the status codes the routes really answer with, declares how callers sign in, and types the task status from the
 * core's own schemas, so what a real response carries validates against what the document says.
 */
import { createConfig, lintFromString } from '@redocly/openapi-core';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { agentService, taskStatusSchema } from '../src/http/index.js';
import { MemoryStore } from '../src/index.js';
import { CASH_GOAL, CLERK, cashDesk, payoutMandate } from './support/domain.js';

interface Problem {
  severity: string;
  ruleId: string;
  message: string;
}

async function lint(document: unknown): Promise<string[]> {
  const config = await createConfig({ extends: ['recommended'] });
  const problems = (await lintFromString({
    source: JSON.stringify(document),
    absoluteRef: 'openapi.json',
    config,
  })) as Problem[];
  return problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message}`);
}

/** The service on the cash desk, with only the options a host must give. */
async function cashService(options: Partial<Parameters<typeof agentService>[1]> = {}) {
  const { orchestrator } = cashDesk();
  const app = Fastify();
  await app.register(agentService, {
    orchestrator,
    authenticate: async () => CLERK,
    startRequest: (body) => ({
      goal: body.goal,
      ...(body.taskId ? { taskId: body.taskId } : {}),
      mandate: payoutMandate.of({ account_id: 'A-1', max_amount: 150 }),
    }),
    ...options,
  });
  return { app, orchestrator };
}

let demo: DemoService;
let document: {
  paths: Record<string, Record<string, { operationId: string; responses: Record<string, unknown> }>>;
  components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> };
  security: unknown[];
};
beforeAll(async () => {
  demo = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0 });
  document = (await demo.app.inject({ url: '/api/openapi.json' })).json();
});
afterAll(() => demo.close());

describe('the OpenAPI document', () => {
  it('lints clean with the recommended rules (the demo names its license)', async () => {
    expect(await lint(document)).toEqual([]);
  });

  it("of a host that says nothing more lints without an error (only the host's license is missing)", async () => {
    const { app, orchestrator } = await cashService();
    const bare = (await app.inject({ url: '/api/openapi.json' })).json();
    expect(await lint(bare)).toEqual(['warn info-license: Info object should contain `license` field.']);
    await app.close();
    await orchestrator.close();
  });

  it('names every operation once, and documents 201 for a start', () => {
    const operations = Object.values(document.paths).flatMap((path) => Object.values(path));
    const ids = operations.map((operation) => operation.operationId);
    expect(ids.length).toBeGreaterThanOrEqual(14);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every((id) => /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    const start = document.paths['/api/tasks']!.post!;
    expect(start.operationId).toBe('startTask');
    expect(Object.keys(start.responses)).toContain('201');
    expect(Object.keys(start.responses)).not.toContain('200');
  });

  it("documents the operator's routes and list filters with the codes they answer", () => {
    const paths = document.paths as unknown as Record<
      string,
      Record<
        string,
        { operationId: string; responses: Record<string, { description: string }>; parameters?: { name: string }[] }
      >
    >;
    expect(paths['/api/tasks/{taskId}/history']!.get!.operationId).toBe('getTaskHistory');
    expect(paths['/api/tasks/{taskId}/review']!.post!.responses['403']!.description).toContain('operator_only');
    const erase = paths['/api/tasks/{taskId}/erase']!.post!;
    expect(erase.operationId).toBe('eraseTask');
    expect(Object.keys(erase.responses)).toEqual(expect.arrayContaining(['200', '403', '404', '409', '501']));
    const filters = paths['/api/tasks']!.get!.parameters!.map((p) => p.name);
    expect(filters).toEqual(expect.arrayContaining(['state', 'waitingFor', 'tool', 'user', 'q', 'olderThanMs']));
  });

  it('types every error response as an RFC 9457 problem (application/problem+json)', async () => {
    const errors = Object.values(document.paths)
      .flatMap((path) => Object.values(path))
      .flatMap((operation) => Object.entries(operation.responses).filter(([status]) => Number(status) >= 400))
      .map(([, response]) => response as { content: Record<string, { schema: unknown }> });
    expect(errors.length).toBeGreaterThan(20);
    for (const response of errors)
      expect(response.content).toEqual({
        'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } },
      });
    const problem = document.components.schemas.Problem as { required: string[] };
    expect(problem.required).toEqual(expect.arrayContaining(['type', 'title', 'status', 'detail', 'code', 'message']));
    const missing = await demo.app.inject({
      url: '/api/tasks/nobody-has-this',
      headers: { authorization: 'Bearer E17' },
    });
    expect(missing.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(missing.json()).toEqual({
      type: 'urn:statechart-agent:problem:task_not_found',
      title: 'Task not found',
      status: 404,
      detail: 'no task nobody-has-this that this session may see',
      code: 'task_not_found',
      message: 'no task nobody-has-this that this session may see',
    });
  });

  it('declares how callers sign in: a bearer session by default, the host’s own scheme when it names one', async () => {
    expect(document.security).toEqual([{ session: [] }]);
    expect(document.components.securitySchemes).toEqual({
      session: expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    });
    const cookie = { type: 'apiKey', in: 'cookie', name: 'sid' };
    const { app, orchestrator } = await cashService({ openapi: { securitySchemes: { cookieSession: cookie } } });
    const custom = (await app.inject({ url: '/api/openapi.json' })).json();
    expect(custom.security).toEqual([{ cookieSession: [] }]);
    expect(custom.components.securitySchemes).toEqual({ cookieSession: cookie });
    await app.close();
    await orchestrator.close();
  });

  it('types the task status, and a real response validates against it', async () => {
    const schema = document.components.schemas.TaskStatus as { required: string[]; properties: object };
    expect(schema.required).toEqual(expect.arrayContaining(['taskId', 'state', 'pendingConfirmation', 'budget']));
    const start = document.paths['/api/tasks']!.post!.responses['201'] as {
      content: { 'application/json': { schema: { properties: { status: unknown } } } };
    };
    expect(start.content['application/json'].schema.properties.status).toEqual({
      $ref: '#/components/schemas/TaskStatus',
    });
    // A real start, then the task as the API shows it: every field the document names, none it does not.
    const response = await demo.app.inject({
      method: 'POST',
      url: '/api/tasks',
      headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
      payload: REFUND_START_BODY,
    });
    expect(response.statusCode).toBe(201);
    const { status } = response.json() as { status: { taskId: string } };
    expect(taskStatusSchema.safeParse(status).error).toBeUndefined();
    const settled = await demo.orchestrator.settled(status.taskId);
    const shown = await demo.app.inject({
      url: `/api/tasks/${status.taskId}`,
      headers: { authorization: 'Bearer E17' },
    });
    expect(taskStatusSchema.safeParse(shown.json().status).error).toBeUndefined();
    expect(shown.json().status.state).toBe(settled.state);
  });

  it('validates the status of a task the library started, and refuses a field it does not know', async () => {
    const { orchestrator } = cashDesk({ script: [] });
    const status = await orchestrator.start({ principal: CLERK, goal: CASH_GOAL });
    expect(taskStatusSchema.safeParse(status).error).toBeUndefined();
    expect(taskStatusSchema.safeParse({ ...status, extra: 1 }).success).toBe(false);
    await orchestrator.close();
  });
});
