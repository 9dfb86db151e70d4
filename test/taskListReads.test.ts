/**
 * What `GET /api/tasks` reads for a caller who is no operator: the tenant's listing, and a status only for a task the
 * caller might see (theirs, or a confirmation that may wait for them). Another user's waiting tasks are skipped on
 * their summary: any signed-in user must not make the service load every waiting task of the tenant.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { agentService } from '../src/http/index.js';
import { reply } from '../src/testing/index.js';
import { SUPPORT, harness } from './support/harness.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

describe('the task list of a user who is no operator', () => {
  it("reads no status of another user's waiting tasks", async () => {
    const others = 12;
    const { orchestrator } = harness({
      script: [...Array.from({ length: others }, () => reply.ask('which order?')), reply.ask('which one?')],
    });
    const U2 = { userId: 'U2', tenantId: 'acme', scopes: ['orders:read'] };
    for (let i = 0; i < others; i++) {
      const status = await orchestrator.run({ principal: U2, goal: 'find my order', taskId: `u2-${i}` });
      expect(status.state).toBe('waiting_for_user');
    }
    expect((await orchestrator.run({ principal: SUPPORT, goal: 'find it', taskId: 'e17-1' })).state).toBe(
      'waiting_for_user',
    );
    app = Fastify();
    await agentService(app, {
      orchestrator,
      authenticate: () => SUPPORT,
      startRequest: () => {
        throw new Error('not used');
      },
      pages: false,
    });
    const read: string[] = [];
    const status = orchestrator.status.bind(orchestrator);
    orchestrator.status = (taskId: string) => {
      read.push(taskId);
      return status(taskId);
    };
    const listed = await app.inject({ method: 'GET', url: '/api/tasks' });
    expect(listed.statusCode).toBe(200);
    expect(listed.json().tasks.map((t: { taskId: string }) => t.taskId)).toEqual(['e17-1']);
    expect(read.filter((id) => id.startsWith('u2-'))).toEqual([]);
  });
});
