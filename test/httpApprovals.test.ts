/**
 * Approvals as people meet them, through the demo service (`fastify.inject`): the shipped four-eyes refund (E17 asks
 * for 450.00 on O-1002, M1 approves), each person's controls (`may`, computed by the rules that decide when they act),
 * the approver's read access to what they decided and its outcome, a reject reason typed by the person and kept in
 * the audit, and what the inbox shows about the money, the mandate, the risk and the earlier proposal.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  APPROVAL_REFUND_START_BODY,
  REFUND_START_BODY,
  type DemoService,
  createDemoService,
} from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';
import { ManualClock } from '../src/testing/index.js';

let service: DemoService;

beforeEach(async () => {
  service = await createDemoService({ store: new MemoryStore(), clock: new ManualClock(), expirySweepMs: 0 });
});
afterEach(() => service.close());

function call(user: string, method: 'GET' | 'POST', url: string, payload?: object) {
  return service.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${user}` },
    ...(payload ? { payload } : {}),
  });
}

/** E17 starts the four-eyes refund; it waits for an approver. */
async function waitingApproval() {
  const started = await call('E17', 'POST', '/api/tasks', APPROVAL_REFUND_START_BODY);
  expect(started.statusCode).toBe(201);
  const taskId = started.json().status.taskId as string;
  const status = await service.orchestrator.settled(taskId);
  expect(status.state).toBe('waiting_for_confirmation');
  return { taskId, pending: status.pendingConfirmation! };
}

describe('the demo four-eyes refund', () => {
  it('waits for M1, not E17: 450.00 is above what E17 refunds alone', async () => {
    const { pending } = await waitingApproval();
    expect(pending).toMatchObject({
      summary: 'Refund 450.00 on order O-1002 (cracked desk top; the customer keeps the desk)',
      userId: 'E17',
      approverScope: 'refunds:approve',
      approvalsRequired: 1,
    });
    expect((await call('E17', 'GET', '/api/inbox')).json().items).toEqual([]);
    expect((await call('E99', 'GET', '/api/inbox')).json().items).toEqual([]);
    expect((await call('M1', 'GET', '/api/inbox')).json().items).toHaveLength(1);
  });

  it('shows the approver the money, the mandate, the risk and reasons, and the change since the refused 600.00', async () => {
    const { taskId } = await waitingApproval();
    const [item] = (await call('M1', 'GET', '/api/inbox')).json().items;
    expect(item).toMatchObject({
      taskId,
      decideAs: 'approver',
      money: { amount: 45_000, used: 0, limit: 45_000 },
      mandate: { kind: 'refund', terms: { order_id: 'O-1002', max_amount_cents: 45_000 } },
      risk: 'writable',
      may: { confirm: true, reject: true, refused: [] },
    });
    expect(item.reasons).toEqual(expect.arrayContaining(['tool_rule', 'moves_money']));
    expect(item.earlier).toHaveLength(1);
    expect(item.earlier[0]).toMatchObject({
      result: 'outside_mandate',
      differences: expect.arrayContaining([{ field: 'amount_cents', was: 60_000, now: 45_000 }]),
    });
  });
});

describe("each person's controls (may)", () => {
  it('gives the requester reject and cancel but not confirm, and says why', async () => {
    const { taskId, pending } = await waitingApproval();
    const view = (await call('E17', 'GET', `/api/tasks/${taskId}`)).json();
    expect(view.allowed).toEqual(['confirm', 'reject', 'cancel', 'at']);
    expect(view.may).toMatchObject({ confirm: false, reject: true, cancel: true, answer: false, next: false });
    expect(view.may.refused).toEqual([{ action: 'confirm', code: 'self_approval', message: expect.any(String) }]);
    expect(view.may.refused[0].message).toContain('refunds:approve');
    // The answer the page no longer offers is the one the service gives.
    const self = await call('E17', 'POST', `/api/tasks/${taskId}/confirm`, {
      confirmationId: pending.id,
      argsHash: pending.argsHash,
    });
    expect([self.statusCode, self.json().code]).toEqual([403, 'self_approval']);
  });

  it('gives the approver confirm and reject but not cancel, and says why', async () => {
    const { taskId } = await waitingApproval();
    const view = (await call('M1', 'GET', `/api/tasks/${taskId}`)).json();
    expect(view.access).toBe('approver');
    expect(view.may).toMatchObject({ confirm: true, reject: true, cancel: false, answer: false, next: false });
    expect(view.may.refused).toEqual([{ action: 'cancel', code: 'wrong_user', message: expect.any(String) }]);
    const cancel = await call('M1', 'POST', `/api/tasks/${taskId}/cancel`, { reason: 'not mine' });
    expect([cancel.statusCode, cancel.json().code]).toEqual([403, 'wrong_user']);
    expect((await service.orchestrator.status(taskId)).state).toBe('waiting_for_confirmation');
  });

  it('gives the requester confirm when they confirm alone (199.00)', async () => {
    const started = (await call('E17', 'POST', '/api/tasks', REFUND_START_BODY)).json();
    const status = await service.orchestrator.settled(started.status.taskId);
    expect(status.pendingConfirmation?.approverScope).toBeNull();
    const view = (await call('E17', 'GET', `/api/tasks/${status.taskId}`)).json();
    expect(view.may).toMatchObject({ confirm: true, reject: true, cancel: true, refused: [] });
  });

  it('offers nothing once the task ended', async () => {
    const { taskId } = await waitingApproval();
    await call('E17', 'POST', `/api/tasks/${taskId}/cancel`, { reason: 'customer withdrew' });
    const view = (await call('E17', 'GET', `/api/tasks/${taskId}`)).json();
    expect(view.status.state).toBe('cancelled');
    expect(view.may).toEqual({ confirm: false, reject: false, cancel: false, answer: false, next: false, refused: [] });
  });
});

describe('the approver after deciding', () => {
  it('keeps reading the task they approved, and sees its outcome', async () => {
    const { taskId, pending } = await waitingApproval();
    const approved = await call('M1', 'POST', `/api/tasks/${taskId}/confirm`, {
      confirmationId: pending.id,
      argsHash: pending.argsHash,
    });
    expect(approved.statusCode).toBe(200);
    expect((await service.orchestrator.settled(taskId)).state).toBe('done');
    const view = await call('M1', 'GET', `/api/tasks/${taskId}`);
    expect(view.statusCode).toBe(200);
    expect(view.json()).toMatchObject({
      access: 'decided',
      status: { state: 'done', outcome: { status: 'done' } },
      may: { confirm: false, reject: false, cancel: false },
    });
    expect((await call('M1', 'GET', `/api/tasks/${taskId}/audit`)).statusCode).toBe(200);
    expect((await service.rows()).filter((row) => row.includes('O-1002'))).toEqual([
      expect.stringMatching(/^refund TX-\d+ O-1002 450\.00 by E17$/),
    ]);
    // Deciding gives access to that task only: a colleague, or another task, still answers 404.
    expect((await call('E99', 'GET', `/api/tasks/${taskId}`)).statusCode).toBe(404);
    const other = (await call('E17', 'POST', '/api/tasks', REFUND_START_BODY)).json().status.taskId;
    expect((await call('M1', 'GET', `/api/tasks/${other}`)).statusCode).toBe(404);
  });

  it('keeps the reason an approver typed to reject, in the audit and for the model', async () => {
    const { taskId, pending } = await waitingApproval();
    const reason = 'only the desk top is damaged: refund the top, 180.00';
    const rejected = await call('M1', 'POST', `/api/tasks/${taskId}/reject`, { confirmationId: pending.id, reason });
    expect(rejected.statusCode).toBe(200);
    const status = await service.orchestrator.settled(taskId);
    const entry = (await service.orchestrator.audit(taskId)).find(
      (e) => e.kind === 'confirmation' && e.action === 'rejected',
    );
    expect(entry).toMatchObject({ userId: 'M1', decidedAs: 'approver', reason });
    const told = (await service.orchestrator.transcript(taskId)).find(
      (e) => e.kind === 'result' && !e.observation.ok && e.observation.code === 'confirmation_rejected',
    );
    expect(JSON.stringify(told)).toContain(reason);
    // The approver still sees what the rejection led to.
    const view = (await call('M1', 'GET', `/api/tasks/${taskId}`)).json();
    expect(view).toMatchObject({ access: 'decided', status: { state: status.state } });
    expect(status.outcome).not.toBeNull();
  });
});
