/**
 * The HTTP service (`statechart-agent/fastify`) through `fastify.inject`: sessions, tenancy and visibility, the inbox
 * with the 999.00 vs 199.00 difference, decisions that must change nothing (forged, replayed, expired, other user,
 * other tenant, oversized, cross-site), the approver path, stepping, time travel, and the OpenAPI document.
 */
import Fastify from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  DEMO_USERS,
  REFUND_GOAL,
  REFUND_START_BODY,
  type DemoService,
  createDemoService,
  demoStartRequest,
} from '../examples/booking/service.js';
import { REFUND_MANDATE, REFUND_SUCCESS } from '../examples/booking/requests.js';
import { MemoryStore, createOrchestrator } from '../src/index.js';
import { refundMandate } from '../tools/mandates.js';
import { agentService, callerTaskId } from '../src/http/index.js';
import { fourEyesOrchestrator } from './support/fourEyes.js';
import { ManualClock, scriptedModel } from '../src/testing/index.js';

type Method = 'GET' | 'POST';

let service: DemoService;
let clock: ManualClock;

beforeEach(async () => {
  clock = new ManualClock();
  service = await createDemoService({ store: new MemoryStore(), clock, expirySweepMs: 0 });
});
afterEach(() => service.close());

function call(
  user: string | null,
  method: Method,
  url: string,
  payload?: unknown,
  headers: Record<string, string> = {},
) {
  return service.app.inject({
    method,
    url,
    headers: { ...(user ? { authorization: `Bearer ${user}` } : {}), ...headers },
    ...(payload === undefined ? {} : typeof payload === 'string' ? { payload } : { payload: payload as object }),
  });
}

/** Starts the demo refund as E17 and waits until it asks E17 to confirm 199.00. */
async function waitingRefund() {
  const started = await call('E17', 'POST', '/api/tasks', REFUND_START_BODY);
  expect(started.statusCode).toBe(201);
  const taskId = started.json().status.taskId as string;
  const status = await service.orchestrator.settled(taskId);
  expect(status.state).toBe('waiting_for_confirmation');
  expect(status.pendingConfirmation!.args).toMatchObject({ amount_cents: 19_900 });
  return { taskId, pending: status.pendingConfirmation! };
}

/** The codes of the refused confirmation attempts in the task's audit, in order. */
async function refusedCodes(taskId: string) {
  return (await service.orchestrator.audit(taskId))
    .filter((entry) => entry.kind === 'confirmation' && entry.action === 'refused')
    .map((entry) => (entry.kind === 'confirmation' ? entry.code : null));
}

/** What a refused decision must leave alone: state, revision, the pending confirmation, business rows, the audit. */
async function footprint(taskId: string) {
  const status = await service.orchestrator.status(taskId);
  return {
    state: status.state,
    revision: status.revision,
    pending: status.pendingConfirmation?.id ?? null,
    request: status.pendingConfirmation?.request ?? null,
    audit: (await service.orchestrator.audit(taskId)).length,
    rows: await service.rows(),
  };
}

describe('sessions', () => {
  it('answers 401 unauthenticated without a session or for an unknown user', async () => {
    for (const user of [null, 'nobody']) {
      const response = await call(user, 'GET', '/api/tasks');
      expect(response.statusCode).toBe(401);
      expect(response.json()).toMatchObject({ code: 'unauthenticated' });
    }
  });

  it('gives the caller and a CSRF token bound to them', async () => {
    const e17 = (await call('E17', 'GET', '/api/session')).json();
    const e99 = (await call('E99', 'GET', '/api/session')).json();
    expect(e17.principal).toEqual(DEMO_USERS.E17);
    expect(e17.csrfToken).toMatch(/^[\w-]{20,}$/);
    expect(e17.csrfToken).not.toBe(e99.csrfToken);
  });
});

describe('starting a task', () => {
  it('starts for the signed-in principal with the mandate of the request on record that the body names', async () => {
    const { taskId } = await waitingRefund();
    const view = (await call('E17', 'GET', `/api/tasks/${taskId}`)).json();
    expect(view.access).toBe('owner');
    expect(view.status.principal.userId).toBe('E17');
    // Made for this request (a mandate authorises one task): the demo's terms, its own id.
    expect(view.status.mandate).toEqual({
      kind: REFUND_MANDATE.kind,
      terms: REFUND_MANDATE.terms,
      id: expect.any(String),
    });
    expect(view.status.mandate.id).not.toBe(REFUND_MANDATE.id);
    expect(view.allowed).toEqual(['confirm', 'reject', 'cancel', 'at']);
  });

  it.each([
    ['a blank goal', { goal: '' }, 'invalid_request', /goal/],
    ['an unknown field', { ...REFUND_START_BODY, priority: 'high' }, 'invalid_request', /unrecognized/i],
    ['a task id too long', { ...REFUND_START_BODY, taskId: 'x'.repeat(600) }, 'invalid_request', /taskId/],
  ])('refuses %s with 400 %s', async (_name, body, code, message) => {
    const response = await call('E17', 'POST', '/api/tasks', body);
    expect(response.statusCode).toBe(400);
    expect(response.json().code).toBe(code);
    expect(response.json().message).toMatch(message);
  });

  it.each([
    ['names no request', 'E17', { goal: REFUND_GOAL }, 'invalid_input'],
    [
      'names a request not on record',
      'E17',
      { goal: REFUND_GOAL, input: { request: 'refund-O-9999' } },
      'unknown_request',
    ],
    ["names another tenant's request", 'Z5', REFUND_START_BODY, 'unknown_request'],
  ])('refuses a body that %s (400, the demo host), and starts nothing', async (_name, user, body, code) => {
    const response = await call(user, 'POST', '/api/tasks', body);
    expect([response.statusCode, response.json().code]).toEqual([400, code]);
    expect(await service.orchestrator.list()).toEqual([]);
  });

  it('refuses the demo refund with a mandate of the caller (403 caller_cannot_set_rules), and starts nothing', async () => {
    const response = await call('E17', 'POST', '/api/tasks', {
      ...REFUND_START_BODY,
      mandate: { kind: 'refund', terms: { order_id: 'O-1001', max_amount_cents: 5_000_000 } },
    });
    expect([response.statusCode, response.json().code]).toEqual([403, 'caller_cannot_set_rules']);
    expect(await service.orchestrator.list()).toEqual([]);
  });

  it('refuses a body that is not JSON (400 invalid_json) or not sent as JSON (415)', async () => {
    const broken = await call('E17', 'POST', '/api/tasks', '{"goal": ', { 'content-type': 'application/json' });
    expect([broken.statusCode, broken.json().code]).toEqual([400, 'invalid_json']);
    const text = await call('E17', 'POST', '/api/tasks', 'goal=x', { 'content-type': 'text/plain' });
    expect([text.statusCode, text.json().code]).toEqual([415, 'unsupported_media_type']);
  });

  it('refuses a second task with the same id (409 task_exists)', async () => {
    expect((await call('E17', 'POST', '/api/tasks', { ...REFUND_START_BODY, taskId: 'same' })).statusCode).toBe(201);
    const again = await call('E17', 'POST', '/api/tasks', { ...REFUND_START_BODY, taskId: 'same' });
    expect([again.statusCode, again.json().code]).toEqual([409, 'task_exists']);
  });
});

describe('who sees what', () => {
  it('shows E17 their task, and nothing of it to E99 (same tenant) or Z5 (another tenant)', async () => {
    const { taskId } = await waitingRefund();
    expect((await call('E17', 'GET', '/api/tasks')).json().tasks.map((t: { taskId: string }) => t.taskId)).toEqual([
      taskId,
    ]);
    for (const user of ['E99', 'Z5', 'M1']) {
      expect((await call(user, 'GET', '/api/tasks')).json().tasks).toEqual([]);
      expect((await call(user, 'GET', '/api/inbox')).json().items).toEqual([]);
      for (const path of ['', '/audit', '/events', '/replay']) {
        const response = await call(user, 'GET', `/api/tasks/${taskId}${path}`);
        expect([path, response.statusCode, response.json().code]).toEqual([path, 404, 'task_not_found']);
      }
    }
    // The same answer as for a task that does not exist: ids leak nothing.
    const missing = await call('E99', 'GET', '/api/tasks/no-such-task');
    const hidden = await call('E99', 'GET', `/api/tasks/${taskId}`);
    expect([missing.statusCode, missing.json().code]).toEqual([hidden.statusCode, hidden.json().code]);
  });

  it('filters by state and by "waiting for me", and refuses an unknown state', async () => {
    const { taskId } = await waitingRefund();
    const ids = async (query: string) =>
      (await call('E17', 'GET', `/api/tasks?${query}`)).json().tasks.map((t: { taskId: string }) => t.taskId);
    expect(await ids('state=waiting_for_confirmation')).toEqual([taskId]);
    expect(await ids('state=done,failed')).toEqual([]);
    expect(await ids('waiting=me')).toEqual([taskId]);
    const bad = await call('E17', 'GET', '/api/tasks?state=sleeping');
    expect([bad.statusCode, bad.json().code]).toEqual([400, 'invalid_query']);
    expect(bad.json().message).toMatch(/state/);
  });

  it("puts the 199.00 refund in E17's inbox with the earlier 999.00 proposal and what differs", async () => {
    const { taskId, pending } = await waitingRefund();
    const [item] = (await call('E17', 'GET', '/api/inbox')).json().items;
    expect(item).toMatchObject({
      taskId,
      confirmationId: pending.id,
      argsHash: pending.argsHash,
      tool: 'refund_order',
      args: { order_id: 'O-1001', amount_cents: 19_900 },
      summary: 'Refund 199.00 on order O-1001 (projector arrived broken)',
      requestedBy: 'E17',
      decideAs: 'requester',
      timeLeftMs: pending.expiresAt - clock.now(),
      // Why the host asks: the tool's threshold, and money above what the desk may move unconfirmed.
      reasons: ['tool_rule', 'moves_money'],
      risk: 'writable',
    });
    expect(item.earlier).toHaveLength(1);
    expect(item.earlier[0]).toMatchObject({ result: 'outside_mandate', args: { amount_cents: 99_900 } });
    expect(item.earlier[0].differences).toContainEqual({ field: 'amount_cents', was: 99_900, now: 19_900 });
  });
});

describe('decisions that change nothing', () => {
  it('refuses a forged arguments hash (409 arguments_changed) and an unknown confirmation (409 unknown_confirmation)', async () => {
    const { taskId, pending } = await waitingRefund();
    const before = await footprint(taskId);
    const forged = await call('E17', 'POST', `/api/tasks/${taskId}/confirm`, {
      confirmationId: pending.id,
      argsHash: `sha256:${'0'.repeat(64)}`,
    });
    expect([forged.statusCode, forged.json().code]).toEqual([409, 'arguments_changed']);
    const unknown = await call('E17', 'POST', `/api/tasks/${taskId}/confirm`, {
      confirmationId: `${pending.id}x`,
      argsHash: pending.argsHash,
    });
    expect([unknown.statusCode, unknown.json().code]).toEqual([409, 'unknown_confirmation']);
    // Decided by the chart: nothing changes but the audit, which records both attempts.
    expect(await footprint(taskId)).toEqual({ ...before, revision: before.revision + 2, audit: before.audit + 2 });
    expect(await refusedCodes(taskId)).toEqual(['arguments_changed', 'unknown_confirmation']);
  });

  it('refuses E99 (same tenant) and Z5 (another tenant) with 404, even with the right id and hash', async () => {
    const { taskId, pending } = await waitingRefund();
    const before = await footprint(taskId);
    for (const user of ['E99', 'Z5', 'M1']) {
      for (const [kind, body] of [
        ['confirm', { confirmationId: pending.id, argsHash: pending.argsHash }],
        ['reject', { confirmationId: pending.id }],
        ['cancel', {}],
      ] as const) {
        const response = await call(user, 'POST', `/api/tasks/${taskId}/${kind}`, body);
        expect([user, kind, response.statusCode, response.json().code]).toEqual([user, kind, 404, 'task_not_found']);
        expect(response.json().status).toBe(404); // the HTTP status, not the task's
      }
    }
    // The chart refused the same-tenant attempts (audited, as through the library); another tenant's never reached it.
    const after = await footprint(taskId);
    expect({ ...after, revision: before.revision, audit: before.audit }).toEqual(before);
    expect(await refusedCodes(taskId)).toEqual(['wrong_user', 'wrong_user', 'wrong_user', 'wrong_user']);
  });

  it('refuses an expired confirmation (410 confirmation_expired) and asks again, as the expiry timer would', async () => {
    const { taskId, pending } = await waitingRefund();
    await clock.advance(pending.expiresAt - clock.now() + 1);
    const late = await call('E17', 'POST', `/api/tasks/${taskId}/confirm`, {
      confirmationId: pending.id,
      argsHash: pending.argsHash,
    });
    expect([late.statusCode, late.json().code]).toEqual([410, 'confirmation_expired']);
    const again = late.json().status.pendingConfirmation;
    expect(late.json().status.state).toBe('waiting_for_confirmation');
    expect(again).toMatchObject({ request: 2, argsHash: pending.argsHash });
    expect(again.id).not.toBe(pending.id);
    expect(await service.rows()).toEqual([]);
  });

  it('refuses an oversized body (413 body_too_large)', async () => {
    const { taskId, pending } = await waitingRefund();
    const before = await footprint(taskId);
    const big = await call('E17', 'POST', `/api/tasks/${taskId}/reject`, {
      confirmationId: pending.id,
      reason: 'x'.repeat(20_000),
    });
    expect([big.statusCode, big.json().code]).toEqual([413, 'body_too_large']);
    const bigStart = await call('E17', 'POST', '/api/tasks', { goal: 'y'.repeat(20_000) });
    expect([bigStart.statusCode, bigStart.json().code]).toEqual([413, 'body_too_large']);
    expect(await footprint(taskId)).toEqual(before);
  });

  it('refuses a browser request without the CSRF token (403) and one from another origin (403 cross_origin)', async () => {
    const { taskId, pending } = await waitingRefund();
    const before = await footprint(taskId);
    const body = { confirmationId: pending.id, argsHash: pending.argsHash };
    const cookie = { cookie: 'demo_user=E17' };
    const noToken = await service.app.inject({
      method: 'POST',
      url: `/api/tasks/${taskId}/confirm`,
      headers: cookie,
      payload: body,
    });
    expect([noToken.statusCode, noToken.json().code]).toEqual([403, 'csrf_token_invalid']);
    const { csrfToken } = (await service.app.inject({ method: 'GET', url: '/api/session', headers: cookie })).json();
    const otherUsersToken = (await call('E99', 'GET', '/api/session')).json().csrfToken;
    const wrong = await service.app.inject({
      method: 'POST',
      url: `/api/tasks/${taskId}/confirm`,
      headers: { ...cookie, 'x-csrf-token': otherUsersToken },
      payload: body,
    });
    expect([wrong.statusCode, wrong.json().code]).toEqual([403, 'csrf_token_invalid']);
    const crossSite = await service.app.inject({
      method: 'POST',
      url: `/api/tasks/${taskId}/confirm`,
      headers: { ...cookie, 'x-csrf-token': csrfToken, origin: 'https://evil.example', host: 'localhost:80' },
      payload: body,
    });
    expect([crossSite.statusCode, crossSite.json().code]).toEqual([403, 'cross_origin']);
    expect(await footprint(taskId)).toEqual(before);
    // With its token, from its own page, E17's browser decides.
    const ok = await service.app.inject({
      method: 'POST',
      url: `/api/tasks/${taskId}/confirm`,
      headers: { ...cookie, 'x-csrf-token': csrfToken },
      payload: body,
    });
    expect(ok.statusCode).toBe(200);
  });

  it('takes E17 confirming exactly 199.00 once; the same confirmation replayed gets 409 and refunds nothing more', async () => {
    const { taskId, pending } = await waitingRefund();
    const body = { confirmationId: pending.id, argsHash: pending.argsHash };
    const ok = await call('E17', 'POST', `/api/tasks/${taskId}/confirm`, body);
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ accepted: true });
    expect((await service.orchestrator.settled(taskId)).state).toBe('done');
    const rows = await service.rows();
    expect(rows).toEqual([expect.stringMatching(/^refund \S+ O-1001 199\.00 by E17$/)]);
    const replayed = await call('E17', 'POST', `/api/tasks/${taskId}/confirm`, body);
    expect([replayed.statusCode, replayed.json().code]).toEqual([409, 'task_finished']);
    expect(await service.rows()).toEqual(rows);
  });

  it('answers 409 with the reason for decisions the task is not waiting for', async () => {
    const { taskId } = await waitingRefund();
    const answer = await call('E17', 'POST', `/api/tasks/${taskId}/answer`, { text: 'yes' });
    expect([answer.statusCode, answer.json().code]).toEqual([409, 'not_waiting_for_answer']);
    const next = await call('E17', 'POST', `/api/tasks/${taskId}/next`, {});
    expect([next.statusCode, next.json().code]).toEqual([409, 'not_stepping']);
    const cancel = await call('E17', 'POST', `/api/tasks/${taskId}/cancel`, { reason: 'changed my mind' });
    expect(cancel.statusCode).toBe(200);
    expect(cancel.json().status.state).toBe('cancelled');
    expect(await service.rows()).toEqual([]);
  });
});

describe('with a four-eyes rule', () => {
  it('shows the refund to M1 (approver scope) and not to E17 as a decision; M1 approves it', async () => {
    const { orchestrator, desk } = fourEyesOrchestrator();
    const app = Fastify();
    await app.register(agentService, {
      orchestrator,
      authenticate: (request) => DEMO_USERS[String(request.headers['x-user'])] ?? null,
      startRequest: demoStartRequest,
      pages: false,
    });
    try {
      const { taskId } = await orchestrator.run({
        principal: DEMO_USERS.E17!,
        goal: REFUND_GOAL,
        mandate: REFUND_MANDATE,
        success: REFUND_SUCCESS,
        limits: { money: 19_900 },
      });
      const as = (user: string, method: Method, url: string, payload?: object) =>
        app.inject({ method, url, headers: { 'x-user': user }, ...(payload ? { payload } : {}) });
      expect((await as('E17', 'GET', '/api/inbox')).json().items).toEqual([]);
      const [item] = (await as('M1', 'GET', '/api/inbox')).json().items;
      expect(item).toMatchObject({
        taskId,
        decideAs: 'approver',
        approverScope: 'refunds:approve',
        approvals: { given: 0, required: 1 },
      });
      expect((await as('M1', 'GET', `/api/tasks/${taskId}`)).json().access).toBe('approver');
      expect((await as('E99', 'GET', `/api/tasks/${taskId}`)).statusCode).toBe(404);
      const self = await as('E17', 'POST', `/api/tasks/${taskId}/confirm`, {
        confirmationId: item.confirmationId,
        argsHash: item.argsHash,
      });
      expect([self.statusCode, self.json().code]).toEqual([403, 'self_approval']);
      const approved = await as('M1', 'POST', `/api/tasks/${taskId}/confirm`, {
        confirmationId: item.confirmationId,
        argsHash: item.argsHash,
      });
      expect(approved.statusCode).toBe(200);
      expect((await orchestrator.settled(taskId)).state).toBe('done');
      // Once decided, M1 keeps reading it (as the approver who decided) and sees what the approval did.
      expect((await as('M1', 'GET', `/api/tasks/${taskId}`)).json()).toMatchObject({
        access: 'decided',
        status: { state: 'done' },
      });
      expect((await as('E99', 'GET', `/api/tasks/${taskId}`)).statusCode).toBe(404);
      expect(desk.refunds).toHaveLength(1);
    } finally {
      await app.close();
      await orchestrator.close();
    }
  });
});

describe('stepping and time travel', () => {
  it('lets the model take one turn per next, and replays the task at step N', async () => {
    await service.close();
    service = await createDemoService({ store: new MemoryStore(), clock, expirySweepMs: 0, step: true });
    const started = (await call('E17', 'POST', '/api/tasks', REFUND_START_BODY)).json();
    const taskId = started.status.taskId as string;
    await service.stepper!.whenWaiting(taskId);
    expect((await call('E17', 'GET', `/api/tasks/${taskId}`)).json()).toMatchObject({
      modelWaiting: true,
      allowed: ['next', 'cancel', 'at'],
    });
    const byE99 = await call('E99', 'POST', `/api/tasks/${taskId}/next`, {});
    expect(byE99.statusCode).toBe(404);
    const turns = [];
    for (let i = 0; i < 3; i++) {
      const next = await call('E17', 'POST', `/api/tasks/${taskId}/next`, {});
      expect(next.statusCode).toBe(200);
      turns.push(next.json().status.state);
    }
    expect(turns).toEqual(['running', 'running', 'waiting_for_confirmation']);
    const audit = await service.orchestrator.audit(taskId);
    const at3 = (await call('E17', 'GET', `/api/tasks/${taskId}/replay?at=3`)).json();
    expect(at3.auditLength).toBe(audit.length);
    expect(at3.replay).toMatchObject({ step: 3, state: 'thinking', status: 'running' });
    const now = (await call('E17', 'GET', `/api/tasks/${taskId}/replay`)).json().replay;
    expect(now).toMatchObject({ state: 'executing.awaitingConfirmation', status: 'waiting_for_confirmation' });
    const from = (await call('E17', 'GET', `/api/tasks/${taskId}/audit?from=${audit.length - 2}`)).json().entries;
    expect(from.map((e: { seq: number }) => e.seq)).toEqual([audit.length - 2, audit.length - 1]);
    const bad = await call('E17', 'GET', `/api/tasks/${taskId}/replay?at=-1`);
    expect([bad.statusCode, bad.json().code]).toEqual([400, 'invalid_query']);
  });
});

describe('documents and pages', () => {
  it('serves an OpenAPI document generated from the request schemas', async () => {
    const document = (await call(null, 'GET', '/api/openapi.json')).json();
    expect(document.openapi).toBe('3.1.0');
    const confirm = document.paths['/api/tasks/{taskId}/confirm'].post;
    expect(confirm.requestBody.content['application/json'].schema).toMatchObject({
      required: ['confirmationId', 'argsHash'],
      additionalProperties: false,
    });
    expect(confirm.responses['410'].description).toContain('confirmation_expired');
    expect(Object.keys(document.paths)).toEqual(
      expect.arrayContaining(['/api/tasks', '/api/tasks/{taskId}/events', '/api/inbox', '/api/tasks/{taskId}/next']),
    );
  });

  it('serves the pages with a strict content security policy and only scripts of its own', async () => {
    for (const url of ['/inbox', '/console', '/tasks/some-task']) {
      const page = await call(null, 'GET', url);
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-security-policy']).toContain("script-src 'self'");
      expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      const sources = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
      expect(sources.every((s) => s!.startsWith('/assets/') || s === 'data:,')).toBe(true);
    }
    for (const asset of ['common.js', 'inbox.js', 'task.js', 'chart.js', 'console.js', 'operator.js', 'style.css']) {
      const response = await call(null, 'GET', `/assets/${asset}`);
      expect([asset, response.statusCode]).toEqual([asset, 200]);
      // Nothing loaded from elsewhere (the SVG namespace URI is a name, not a load).
      expect(response.body).not.toMatch(/(?:import|from|fetch\(|url\()\s*['"(]?\s*(?:https?:)?\/\//);
    }
    expect((await call(null, 'GET', '/assets/..%2Fpages.ts')).statusCode).toBe(404);
  });
});

describe('refusals of the safe defaults', () => {
  const principal = DEMO_USERS.E17!;
  const bearer = (request: { headers: { authorization?: string } }) =>
    request.headers.authorization === 'Bearer E17' ? principal : null;

  it('answers 409 mandate_used to a second start with the same mandate, and 503 catalog_mismatch to an instance without the task’s tools', async () => {
    const store = new MemoryStore();
    const mandate = refundMandate.of({ order_id: 'O-1001', max_amount_cents: 19_900 });
    const withTools = await createDemoService({ store, clock, expirySweepMs: 0 });
    const app = Fastify();
    await app.register(agentService, {
      orchestrator: withTools.orchestrator,
      authenticate: bearer,
      startRequest: (body, who) => ({
        principal: who,
        goal: body.goal,
        mandate,
        ...(body.taskId ? { taskId: body.taskId } : {}),
      }),
      pages: false,
    });
    const start = (taskId: string) =>
      app.inject({
        method: 'POST',
        url: '/api/tasks',
        headers: { authorization: 'Bearer E17' },
        payload: { goal: REFUND_GOAL, taskId },
      });
    expect((await start('first')).statusCode).toBe(201);
    const second = await start('second');
    expect([second.statusCode, second.json().code]).toEqual([409, 'mandate_used']);
    expect((await withTools.orchestrator.settled(callerTaskId(DEMO_USERS.E17!, 'first'))).state).toBe(
      'waiting_for_confirmation',
    );

    // Another instance on the same store, built without the refund tool.
    const bare = createOrchestrator({ tools: [], model: scriptedModel([]), store, clock, expirySweepMs: 0 });
    const other = Fastify();
    await other.register(agentService, {
      orchestrator: bare,
      authenticate: bearer,
      startRequest: (body) => ({ goal: body.goal }),
      pages: false,
    });
    const cancel = await other.inject({
      method: 'POST',
      url: '/api/tasks/first/cancel',
      headers: { authorization: 'Bearer E17' },
      payload: {},
    });
    expect([cancel.statusCode, cancel.json().code]).toEqual([503, 'catalog_mismatch']);
    expect(cancel.json().message).toContain('refund_order is not installed');
    expect((await withTools.orchestrator.status(callerTaskId(DEMO_USERS.E17!, 'first'))).state).toBe(
      'waiting_for_confirmation',
    );
    await app.close();
    await other.close();
    await bare.close();
    await withTools.close();
  });
});
