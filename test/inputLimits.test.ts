/**
 * One set of bounds on what a host gives a task (`INPUT_LIMITS`): the HTTP service accepts exactly what the
 * orchestrator accepts, at the boundary: a goal or an answer of the longest length is taken by both, one character
 * more is refused by both, with a specific error naming the field.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { DEMO_USERS } from '../examples/booking/service.js';
import { HostRequestError, INPUT_LIMITS, MemoryStore, type Orchestrator, createOrchestrator } from '../src/index.js';
import { agentService, callerTaskId } from '../src/http/index.js';
import { agentContextSchema } from '../machines/context.js';
import { reply, scriptedModel } from '../src/testing/index.js';

const E17 = DEMO_USERS.E17!;

let app: FastifyInstance | null = null;
let orchestrator: Orchestrator | null = null;
afterEach(async () => {
  await app?.close();
  await orchestrator?.close();
  app = orchestrator = null;
});

/** A service whose model asks the user a question on every task, and leaves it waiting for the answer. */
async function askingService() {
  orchestrator = createOrchestrator({
    tools: [],
    model: scriptedModel(Array.from({ length: 8 }, () => reply.ask('Which building?'))),
    store: new MemoryStore(),
    expirySweepMs: 0,
  });
  app = Fastify();
  await app.register(agentService, {
    orchestrator,
    authenticate: (request) => DEMO_USERS[String(request.headers['x-user'])] ?? null,
    startRequest: (body, principal) => ({
      principal,
      goal: body.goal,
      ...(body.taskId ? { taskId: body.taskId } : {}),
    }),
    pages: false,
    bodyLimit: 1024 * 1024,
  });
  const post = (url: string, payload: object) =>
    app!.inject({ method: 'POST', url, headers: { 'x-user': 'E17' }, payload });
  return { orchestrator, post };
}

/** What the orchestrator says to a request, as the HTTP layer would carry it: accepted, or the error's code and message. */
async function outcome(work: () => Promise<unknown>): Promise<{ accepted: true } | { code: string; message: string }> {
  try {
    await work();
    return { accepted: true };
  } catch (error) {
    expect(error).toBeInstanceOf(HostRequestError);
    return { code: (error as HostRequestError).code, message: (error as Error).message };
  }
}

describe('the goal', () => {
  const longest = 'g'.repeat(INPUT_LIMITS.goal);
  const tooLong = `${longest}g`;

  it('of the longest length starts a task, through the orchestrator and over HTTP', async () => {
    const { orchestrator, post } = await askingService();
    expect(await outcome(() => orchestrator.run({ principal: E17, goal: longest, taskId: 'direct' }))).toEqual({
      accepted: true,
    });
    const started = await post('/api/tasks', { goal: longest, taskId: 'over-http' });
    expect(started.statusCode).toBe(201);
    // Started over HTTP, it is stored under its caller (src/http/start.ts).
    expect((await orchestrator.settled(callerTaskId(E17, 'over-http'))).state).toBe('waiting_for_user');
  });

  it('one character longer is refused by both with invalid_request naming the goal, and nothing starts', async () => {
    const { orchestrator, post } = await askingService();
    const direct = await outcome(() => orchestrator.run({ principal: E17, goal: tooLong, taskId: 'direct' }));
    expect(direct).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/^start: goal: /) });
    const refused = await post('/api/tasks', { goal: tooLong, taskId: 'over-http' });
    expect([refused.statusCode, refused.json().code]).toEqual([400, 'invalid_request']);
    expect(refused.json().message).toMatch(/^body: goal: .*16384/);
    expect(await orchestrator.list()).toEqual([]);
  });

  it('is stored within the context bound, which leaves room for sealing', () => {
    expect(INPUT_LIMITS.storedGoal).toBeGreaterThan(INPUT_LIMITS.goal);
    expect(agentContextSchema.shape.goal.safeParse(longest).success).toBe(true);
  });
});

describe("the answer to the model's question", () => {
  const longest = 'a'.repeat(INPUT_LIMITS.eventText);
  const tooLong = `${longest}a`;

  it('of the longest length is taken, one character more is refused by both with invalid_request naming the text', async () => {
    const { orchestrator, post } = await askingService();
    for (const taskId of ['direct', 'over-http']) {
      await orchestrator.run({ principal: E17, goal: 'book a room', taskId });
    }
    expect(await outcome(() => orchestrator.answer('direct', E17, tooLong))).toMatchObject({
      code: 'invalid_request',
      message: expect.stringMatching(/^user\.answered: text: /),
    });
    const refused = await post('/api/tasks/over-http/answer', { text: tooLong });
    expect([refused.statusCode, refused.json().code]).toEqual([400, 'invalid_request']);
    expect(refused.json().message).toMatch(/^body: text: .*16384/);

    expect((await orchestrator.answer('direct', E17, longest)).accepted).toBe(true);
    const answered = await post('/api/tasks/over-http/answer', { text: longest });
    expect(answered.statusCode).toBe(200);
    expect(answered.json()).toMatchObject({ accepted: true });
  });
});
