/**
 * The operator console's API: the list's filters by what a task waits for and on which tool (in the library's
 * `search` and over HTTP), a task's full history, and the operator's actions (resolve a review, erase), each refused
 * to a non-operator of the tenant (403 when they may see the task, else 404) and to another tenant's operator (404),
 * CSRF-checked for browser sessions, and recorded with who took it.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PROBLEM_MEDIA_TYPE } from '../src/http/index.js';
import { historyOf } from '../src/http/operatorRoutes.js';
import { historySchema, summarySchema } from '../src/http/schemas.js';
import { type OperatorDesk, operatorDesk } from './support/operatorDesk.js';

let desk: OperatorDesk;

beforeEach(async () => {
  desk = await operatorDesk();
});
afterEach(() => desk.close());

const call = (user: string, method: 'GET' | 'POST', url: string, payload?: object) =>
  desk.app.inject({ method, url, headers: { authorization: `Bearer ${user}` }, ...(payload ? { payload } : {}) });
const ids = (response: { json(): unknown }) =>
  ((response.json() as { tasks: { taskId: string }[] }).tasks ?? []).map((t) => t.taskId).sort();

describe('the list filters', () => {
  it('finds tasks by what they wait for and the tool they wait on, in the library and over HTTP', async () => {
    await desk.refund('refund-1');
    await desk.heldBooking('booking-1', 'E99');
    expect((await desk.orchestrator.search({ tenantId: 'acme', waitingFor: ['review'] })).map((t) => t.taskId)).toEqual(
      ['booking-1'],
    );
    expect(
      (await desk.orchestrator.search({ tenantId: 'acme', tool: 'refund_order' })).map((t) => [t.taskId, t.waitingFor]),
    ).toEqual([['refund-1', 'confirmation']]);
    expect(await desk.orchestrator.search({ tenantId: 'globex' })).toEqual([]);
    const all = (await desk.orchestrator.search({ tenantId: 'acme' })).map((t) => t.taskId);
    expect(all).toHaveLength(2);
    const page = [
      ...(await desk.orchestrator.search({ tenantId: 'acme', limit: 1 })),
      ...(await desk.orchestrator.search({ tenantId: 'acme', limit: 1, offset: 1 })),
    ];
    expect(page.map((t) => t.taskId)).toEqual(all);
    const oldest = Math.min(...(await desk.orchestrator.search({ tenantId: 'acme' })).map((t) => t.createdAt));
    expect(await desk.orchestrator.search({ tenantId: 'acme', createdAtMost: oldest - 1 })).toEqual([]);

    expect(ids(await call('O1', 'GET', '/api/tasks?waitingFor=review'))).toEqual(['booking-1']);
    expect(ids(await call('O1', 'GET', '/api/tasks?waitingFor=confirmation,review'))).toEqual([
      'booking-1',
      'refund-1',
    ]);
    expect(ids(await call('O1', 'GET', '/api/tasks?tool=reserve_room'))).toEqual(['booking-1']);
    expect(ids(await call('O1', 'GET', '/api/tasks?tool=reserve_room&waitingFor=confirmation'))).toEqual([]);
    expect(ids(await call('O1', 'GET', '/api/tasks?waitingFor=approval'))).toEqual([]);
    const rows = (await call('O1', 'GET', '/api/tasks')).json().tasks as Record<string, unknown>[];
    expect(rows.find((t) => t.taskId === 'booking-1')).toMatchObject({ waitingFor: 'review', tool: 'reserve_room' });
    // What the OpenAPI document says a row is, exactly.
    for (const row of rows) expect(summarySchema.safeParse(row).error).toBeUndefined();
    // Another tenant's operator sees none of acme's.
    expect(ids(await call('G1', 'GET', '/api/tasks?waitingFor=review'))).toEqual([]);
    const bad = await call('O1', 'GET', '/api/tasks?waitingFor=coffee');
    expect(bad.statusCode).toBe(400);
    expect(bad.headers['content-type']).toContain(PROBLEM_MEDIA_TYPE);
    expect(bad.json()).toMatchObject({ code: 'invalid_query' });
  });
});

describe("a task's history", () => {
  it('shows the operator each turn, the tool outputs and the call whose outcome is unknown', async () => {
    await desk.heldBooking('booking-2', 'E99');
    const history = await call('O1', 'GET', '/api/tasks/booking-2/history');
    expect(history.statusCode).toBe(200);
    const body = history.json();
    expect(historySchema.safeParse(body).error).toBeUndefined();
    expect(body.turns.length).toBeGreaterThanOrEqual(1);
    expect(body.turns[0].entries[0]).toMatchObject({ kind: 'goal' });
    expect(body.calls).toEqual([
      expect.objectContaining({ tool: 'reserve_room', phase: 'outcome_unknown', result: null }),
    ]);
    expect(body.audit.some((e: { kind: string }) => e.kind === 'review')).toBe(true);
    // The same history as the library's journals: nothing added, nothing unredacted.
    expect(body.audit).toEqual(JSON.parse(JSON.stringify(await desk.orchestrator.audit('booking-2'))));
  });

  it("is its user's too, and refused to a colleague and to another tenant's operator (404)", async () => {
    await desk.refund('refund-2');
    expect((await call('E99', 'GET', '/api/tasks/refund-2/history')).statusCode).toBe(404);
    expect((await call('G1', 'GET', '/api/tasks/refund-2/history')).statusCode).toBe(404);
    expect((await call('E17', 'GET', '/api/tasks/refund-2/history')).statusCode).toBe(200);
    const pending = (await call('E17', 'GET', '/api/tasks/refund-2/history')).json().calls;
    expect(pending.at(-1)).toMatchObject({ tool: 'refund_order', phase: 'awaiting_confirmation' });
  });
});

describe('retrying a model wait over HTTP', () => {
  it('asks the model again now for the operator, audited as theirs', async () => {
    await desk.outage('outage-1');
    desk.modelDown = false;
    const retried = await call('O1', 'POST', '/api/tasks/outage-1/retry-model', {});
    expect(retried.statusCode).toBe(200);
    expect(retried.json()).toMatchObject({ accepted: true });
    expect((await desk.orchestrator.settled('outage-1')).state).toBe('answered');
    const audit = await desk.orchestrator.audit('outage-1');
    expect(audit.filter((e) => e.kind === 'model_outage').at(-1)).toMatchObject({
      action: 'retrying',
      by: 'acme:O1',
    });
  });

  it('is refused to the task user (403), a colleague and another tenant (404), and when not waiting (409)', async () => {
    await desk.outage('outage-2');
    const own = await call('E17', 'POST', '/api/tasks/outage-2/retry-model', {});
    expect(own.statusCode).toBe(403);
    expect(own.headers['content-type']).toContain(PROBLEM_MEDIA_TYPE);
    expect(own.json()).toMatchObject({ code: 'operator_only' });
    expect((await call('E99', 'POST', '/api/tasks/outage-2/retry-model', {})).statusCode).toBe(404);
    expect((await call('G1', 'POST', '/api/tasks/outage-2/retry-model', {})).statusCode).toBe(404);
    expect((await call('O1', 'POST', '/api/tasks/outage-2/retry-model', { by: 'someone' })).statusCode).toBe(400);
    await desk.refund('refund-9');
    const notWaiting = await call('O1', 'POST', '/api/tasks/refund-9/retry-model', {});
    expect(notWaiting.statusCode).toBe(409);
    expect(notWaiting.json()).toMatchObject({ code: 'not_waiting_for_model' });
    expect((await desk.orchestrator.status('outage-2')).state).toBe('waiting_for_model');
  });
});

describe('forking a task over HTTP', () => {
  it('copies a task without a mandate for the operator (201, forkedFrom); refuses a mandate (409), the user (403)', async () => {
    await desk.outage('outage-3');
    desk.modelDown = false;
    const forked = await call('O1', 'POST', '/api/tasks/outage-3/fork', { step: 1 });
    expect(forked.statusCode).toBe(201);
    const { status } = forked.json();
    expect(status).toMatchObject({ forkedFrom: { taskId: 'outage-3', step: 1 }, principal: { userId: 'O1' } });
    expect((await desk.orchestrator.settled(status.taskId)).state).toBe('answered');
    const view = (await call('O1', 'GET', `/api/tasks/${encodeURIComponent(status.taskId)}`)).json();
    expect(view.status.forkedFrom).toEqual({ taskId: 'outage-3', step: 1 });

    await desk.refund('refund-8');
    const mandate = await call('O1', 'POST', '/api/tasks/refund-8/fork', { step: 1 });
    expect(mandate.statusCode).toBe(409);
    expect(mandate.headers['content-type']).toContain(PROBLEM_MEDIA_TYPE);
    expect(mandate.json()).toMatchObject({ code: 'fork_not_allowed' });
    expect(mandate.json().message).toContain('(mandate)');
    expect((await call('E17', 'POST', '/api/tasks/outage-3/fork', { step: 1 })).json()).toMatchObject({
      code: 'operator_only',
    });
    expect((await call('G1', 'POST', '/api/tasks/outage-3/fork', { step: 1 })).statusCode).toBe(404);
    expect((await call('O1', 'POST', '/api/tasks/outage-3/fork', { step: 0 })).statusCode).toBe(400);
  });
});

describe('resolving a review over HTTP', () => {
  it('is taken from the operator and audited as theirs; the write then counts as done', async () => {
    await desk.heldBooking('booking-3', 'E99');
    const resolved = await call('O1', 'POST', '/api/tasks/booking-3/review', { resolution: 'not_happened' });
    expect(resolved.statusCode).toBe(200);
    const status = await desk.orchestrator.settled('booking-3');
    expect(status.state).not.toBe('review_required');
    const audit = await desk.orchestrator.audit('booking-3');
    expect(audit.filter((e) => e.kind === 'review').at(-1)).toMatchObject({ userId: 'O1' });
  });

  it('is refused to the task user (403 operator_only), a colleague (404) and another tenant (404)', async () => {
    await desk.heldBooking('booking-4', 'E99');
    const own = await call('E99', 'POST', '/api/tasks/booking-4/review', { resolution: 'not_happened' });
    expect(own.statusCode).toBe(403);
    expect(own.json()).toMatchObject({ code: 'operator_only' });
    expect((await call('E17', 'POST', '/api/tasks/booking-4/review', { resolution: 'not_happened' })).statusCode).toBe(
      404,
    );
    expect((await call('G1', 'POST', '/api/tasks/booking-4/review', { resolution: 'not_happened' })).statusCode).toBe(
      404,
    );
    const incomplete = await call('O1', 'POST', '/api/tasks/booking-4/review', { resolution: 'happened' });
    expect(incomplete.statusCode).toBe(400);
    expect((await desk.orchestrator.status('booking-4')).state).toBe('review_required');
  });

  it('answers a task that is not held with the chart refusal, as problem+json', async () => {
    await desk.refund('refund-3');
    const refused = await call('O1', 'POST', '/api/tasks/refund-3/review', { resolution: 'retry' });
    expect(refused.statusCode).toBe(409);
    expect(refused.headers['content-type']).toContain(PROBLEM_MEDIA_TYPE);
    expect(refused.json()).toMatchObject({ code: 'not_waiting_for_review' });
  });

  it('needs the CSRF token from a browser session', async () => {
    await desk.heldBooking('booking-5', 'E99');
    const cookie = { cookie: 'demo_user=O1', 'content-type': 'application/json' };
    const without = await desk.app.inject({
      method: 'POST',
      url: '/api/tasks/booking-5/review',
      headers: cookie,
      payload: { resolution: 'not_happened' },
    });
    expect(without.statusCode).toBe(403);
    expect(without.json()).toMatchObject({ code: 'csrf_token_invalid' });
    const token = (await desk.app.inject({ method: 'GET', url: '/api/session', headers: cookie })).json().csrfToken;
    const withToken = await desk.app.inject({
      method: 'POST',
      url: '/api/tasks/booking-5/review',
      headers: { ...cookie, 'x-csrf-token': token },
      payload: { resolution: 'not_happened' },
    });
    expect(withToken.statusCode).toBe(200);
  });
});

describe('erasing over HTTP', () => {
  it('erases for the operator, with a tombstone naming them; the task is gone for everyone', async () => {
    await desk.refund('refund-4');
    expect((await call('E17', 'POST', '/api/tasks/refund-4/erase', { reason: 'gdpr_erasure' })).json()).toMatchObject({
      code: 'operator_only',
    });
    expect((await call('G1', 'POST', '/api/tasks/refund-4/erase', { reason: 'gdpr_erasure' })).statusCode).toBe(404);
    const erased = await call('O1', 'POST', '/api/tasks/refund-4/erase', { reason: 'gdpr_erasure' });
    expect(erased.statusCode).toBe(200);
    expect(erased.json().tombstone).toMatchObject({ taskId: 'refund-4', reason: 'gdpr_erasure', by: 'acme:O1' });
    expect((await desk.orchestrator.tombstone('refund-4'))?.by).toBe('acme:O1');
    expect((await call('E17', 'GET', '/api/tasks/refund-4')).statusCode).toBe(404);
    expect(ids(await call('O1', 'GET', '/api/tasks'))).toEqual([]);
  });

  it('refuses a reason that is not a short code', async () => {
    await desk.refund('refund-5');
    const bad = await call('O1', 'POST', '/api/tasks/refund-5/erase', { reason: 'Jane Doe asked' });
    expect(bad.statusCode).toBe(400);
    expect((await desk.orchestrator.status('refund-5')).state).toBe('waiting_for_confirmation');
  });
});

describe('historyOf', () => {
  const proposal = (turn: number, ...callIds: string[]) => ({
    kind: 'proposal' as const,
    at: turn,
    turn,
    text: null,
    calls: callIds.map((callId) => ({ callId, tool: 'reserve_room', arguments: '{}' })),
  });
  const result = (turn: number, callId: string) => ({
    kind: 'result' as const,
    at: turn,
    turn,
    observation: { callId, tool: 'reserve_room', ok: true as const, data: { ok: 1 }, truncated: false },
  });
  const none = { pendingConfirmation: null, review: null, outcome: null };

  it.each([
    ['finished', [proposal(1, 'a'), result(1, 'a')], none],
    ['pending', [proposal(1, 'a')], none],
    ['awaiting_confirmation', [proposal(1, 'a')], { ...none, pendingConfirmation: { callId: 'a' } }],
    ['outcome_unknown', [proposal(1, 'a')], { ...none, review: { callId: 'a' } }],
    ['not_run', [proposal(1, 'a')], { ...none, outcome: { status: 'cancelled' } }],
  ])('says a call is %s', (phase, transcript, status) => {
    const { calls } = historyOf(transcript, status as unknown as Parameters<typeof historyOf>[1]);
    expect(calls.map((c) => c.phase)).toEqual([phase]);
  });

  it('puts the goal in turn 0 and each later entry in its own turn', () => {
    const { turns } = historyOf(
      [{ kind: 'goal', at: 0, text: 'book' }, proposal(1, 'a'), result(1, 'a'), proposal(2, 'b')],
      none,
    );
    expect(turns.map((t) => [t.turn, t.entries.map((e) => e.kind)])).toEqual([
      [0, ['goal']],
      [1, ['proposal', 'result']],
      [2, ['proposal']],
    ]);
  });
});
