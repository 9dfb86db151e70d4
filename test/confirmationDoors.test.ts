/**
 * One confirmation decision by every door: the same confirm/reject requests sent through the HTTP service
 * (`fastify.inject`), the library (`orchestrator.confirm`/`reject`) and the step CLI's decision function get the same
 * answer (accepted, code) and make the same change or none (revision, the pending confirmation after). The only
 * difference is HTTP's: a caller who may not see the task is answered 404 `task_not_found`, so ids leak nothing.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { RefundDesk } from '../examples/booking/refundService.js';
import { demoStartRequest } from '../examples/booking/service.js';
import { refundScript } from '../examples/booking/refundScenario.js';
import { REFUND_GOAL, REFUND_MANDATE, REFUND_SUCCESS } from '../examples/booking/requests.js';
import type { Principal } from '../machines/context.js';
import { sendStepDecision, stepPrincipal } from '../src/cli/stepDecision.js';
import { agentService } from '../src/http/index.js';
import { MemoryStore, type Orchestrator, type UserEventResult, createOrchestrator } from '../src/index.js';
import { ManualClock, scriptedModel } from '../src/testing/index.js';
import { getOrder } from '../tools/getOrder.js';
import { refundMandate } from '../tools/mandates.js';
import { refundDeskAuthority, refundOrder } from '../tools/refundOrder.js';

const ASKER = ['orders:read', 'refunds:write'];
const PEOPLE: Record<string, Principal> = {
  E17: { userId: 'E17', tenantId: 'acme', scopes: ASKER },
  E99: { userId: 'E99', tenantId: 'acme', scopes: ASKER },
  M1: { userId: 'M1', tenantId: 'acme', scopes: ['refunds:approve'] },
  M2: { userId: 'M2', tenantId: 'acme', scopes: ['refunds:approve'] },
  Z5: { userId: 'Z5', tenantId: 'globex', scopes: ASKER },
};

type Door = 'http' | 'library' | 'cli';
type Rule = 'requester' | 'fourEyes';

interface Request {
  kind: 'confirm' | 'reject';
  by: keyof typeof PEOPLE;
  id?: 'right' | 'wrong';
  hash?: 'right' | 'wrong';
}

interface Row {
  name: string;
  rule: Rule;
  /** What happened before the request: the confirmation expired, or M1 approved already. */
  before?: 'expired' | 'M1 approved';
  request: Request;
  /** The same answer by every door, */
  expected: { accepted: boolean; code: string | null; revision: 'changed' | 'same'; pending: 'same' | 'new' | 'none' };
  /** but HTTP's code to a caller who may not see the task (and no door but the library reaches another tenant). */
  http?: { code: string };
  cli?: 'not a door for this';
}

const ROWS: Row[] = [
  {
    name: 'the right confirmation',
    rule: 'requester',
    request: { kind: 'confirm', by: 'E17' },
    expected: { accepted: true, code: null, revision: 'changed', pending: 'none' },
  },
  {
    name: 'a confirmation for other arguments',
    rule: 'requester',
    request: { kind: 'confirm', by: 'E17', hash: 'wrong' },
    expected: { accepted: false, code: 'arguments_changed', revision: 'changed', pending: 'same' },
  },
  {
    name: 'a confirmation with a wrong id',
    rule: 'requester',
    request: { kind: 'confirm', by: 'E17', id: 'wrong' },
    expected: { accepted: false, code: 'unknown_confirmation', revision: 'changed', pending: 'same' },
  },
  {
    name: 'an expired confirmation',
    rule: 'requester',
    before: 'expired',
    request: { kind: 'confirm', by: 'E17' },
    expected: { accepted: false, code: 'confirmation_expired', revision: 'changed', pending: 'new' },
  },
  {
    name: "another user's confirmation",
    rule: 'requester',
    request: { kind: 'confirm', by: 'E99' },
    expected: { accepted: false, code: 'wrong_user', revision: 'changed', pending: 'same' },
    http: { code: 'task_not_found' },
  },
  {
    name: "another tenant's confirmation",
    rule: 'requester',
    request: { kind: 'confirm', by: 'Z5' },
    expected: { accepted: false, code: 'wrong_tenant', revision: 'same', pending: 'same' },
    http: { code: 'task_not_found' },
    cli: 'not a door for this',
  },
  {
    name: 'the requester approving their own request',
    rule: 'fourEyes',
    request: { kind: 'confirm', by: 'E17' },
    expected: { accepted: false, code: 'self_approval', revision: 'changed', pending: 'same' },
  },
  {
    name: 'an approval by an approver',
    rule: 'fourEyes',
    request: { kind: 'confirm', by: 'M1' },
    expected: { accepted: true, code: 'approval_recorded', revision: 'changed', pending: 'same' },
  },
  {
    name: 'a second approval by the same approver',
    rule: 'fourEyes',
    before: 'M1 approved',
    request: { kind: 'confirm', by: 'M1' },
    expected: { accepted: false, code: 'already_approved', revision: 'changed', pending: 'same' },
  },
  {
    name: 'the approval that completes them',
    rule: 'fourEyes',
    before: 'M1 approved',
    request: { kind: 'confirm', by: 'M2' },
    expected: { accepted: true, code: null, revision: 'changed', pending: 'none' },
  },
  {
    name: 'the right rejection',
    rule: 'requester',
    request: { kind: 'reject', by: 'E17' },
    // The model is told, and the demo's script proposes the refund again: a new request.
    expected: { accepted: true, code: null, revision: 'changed', pending: 'new' },
  },
  {
    name: 'a rejection with a wrong id',
    rule: 'requester',
    request: { kind: 'reject', by: 'E17', id: 'wrong' },
    expected: { accepted: false, code: 'unknown_confirmation', revision: 'changed', pending: 'same' },
  },
  {
    name: 'a rejection after the expiry (a "no" authorizes nothing: taken)',
    rule: 'requester',
    before: 'expired',
    request: { kind: 'reject', by: 'E17' },
    expected: { accepted: true, code: null, revision: 'changed', pending: 'new' },
  },
  {
    name: "another user's rejection",
    rule: 'requester',
    request: { kind: 'reject', by: 'E99' },
    expected: { accepted: false, code: 'wrong_user', revision: 'changed', pending: 'same' },
    http: { code: 'task_not_found' },
  },
  {
    name: "another tenant's rejection",
    rule: 'requester',
    request: { kind: 'reject', by: 'Z5' },
    expected: { accepted: false, code: 'wrong_tenant', revision: 'same', pending: 'same' },
    http: { code: 'task_not_found' },
    cli: 'not a door for this',
  },
  {
    name: 'a rejection by someone without the approver scope',
    rule: 'fourEyes',
    request: { kind: 'reject', by: 'E99' },
    expected: { accepted: false, code: 'missing_approver_scope', revision: 'changed', pending: 'same' },
    http: { code: 'task_not_found' },
  },
];

/** The demo's refund of 199.00, waiting for E17's confirmation or (four eyes) for two approvers. */
async function waitingRefund(rule: Rule) {
  const clock = new ManualClock();
  const desk = new RefundDesk();
  const orchestrator = createOrchestrator({
    tools: [
      getOrder(desk),
      refundOrder(desk, {
        confirmAboveCents: 10_000,
        ...(rule === 'fourEyes' ? { approveAboveCents: 10_000, approvals: 2 } : {}),
      }),
    ],
    loosen: refundDeskAuthority,
    mandates: [refundMandate],
    model: scriptedModel(refundScript()),
    store: new MemoryStore(),
    clock,
    expirySweepMs: 0,
  });
  await orchestrator.run({
    principal: PEOPLE.E17!,
    goal: REFUND_GOAL,
    mandate: REFUND_MANDATE,
    success: REFUND_SUCCESS,
    limits: { money: 19_900 },
    taskId: 'refund',
  });
  const status = await orchestrator.settled('refund');
  expect(status.state).toBe('waiting_for_confirmation');
  return { orchestrator, clock, desk, pending: status.pendingConfirmation! };
}

async function serviceOf(orchestrator: Orchestrator): Promise<FastifyInstance> {
  const app = Fastify();
  await app.register(agentService, {
    orchestrator,
    authenticate: (request) => PEOPLE[String(request.headers['x-user'])] ?? null,
    startRequest: demoStartRequest,
    pages: false,
  });
  return app;
}

interface Answer {
  accepted: boolean;
  code: string | null;
}

/** Sends `request` through `door`; the answer in the door's own terms, read back as accepted and code. */
async function send(
  door: Door,
  orchestrator: Orchestrator,
  request: Request,
  named: { id: string; argsHash: string },
): Promise<Answer> {
  const by = PEOPLE[request.by]!;
  if (door === 'library') {
    const result: UserEventResult =
      request.kind === 'confirm'
        ? await orchestrator.confirm('refund', by, named)
        : await orchestrator.reject('refund', by, { id: named.id });
    return { accepted: result.accepted, code: result.code };
  }
  if (door === 'cli') {
    const status = await orchestrator.status('refund');
    const principal = stepPrincipal(status, request.by, by.scopes);
    const text = request.kind === 'confirm' ? `${named.id} ${named.argsHash}` : `--id ${named.id}`;
    const result = await sendStepDecision(orchestrator, status, principal, request.kind, text);
    return { accepted: result.accepted, code: result.code };
  }
  const app = await serviceOf(orchestrator);
  try {
    const response = await app.inject({
      method: 'POST',
      url: `/api/tasks/refund/${request.kind}`,
      headers: { 'x-user': request.by },
      payload:
        request.kind === 'confirm'
          ? { confirmationId: named.id, argsHash: named.argsHash }
          : { confirmationId: named.id },
    });
    const body = response.json();
    expect(response.statusCode === 200, `HTTP ${response.statusCode} ${body.code}`).toBe(body.accepted === true);
    return { accepted: response.statusCode === 200, code: body.code ?? null };
  } finally {
    await app.close();
  }
}

describe('one confirmation decision by every door', () => {
  const cases = ROWS.flatMap((row) =>
    (['http', 'library', 'cli'] as const)
      .filter((door) => !(door === 'cli' && row.cli))
      .map((door) => [row.name, door, row] as const),
  );

  it.each(cases)('%s, through %s', async (_name, door, row) => {
    const { orchestrator, clock, pending, desk } = await waitingRefund(row.rule);
    try {
      if (row.before === 'expired') await clock.advance(pending.expiresAt - clock.now() + 1);
      if (row.before === 'M1 approved')
        expect((await orchestrator.confirm('refund', PEOPLE.M1!, pending)).code).toBe('approval_recorded');
      const before = await orchestrator.status('refund');
      const named = {
        id: row.request.id === 'wrong' ? `${pending.id}x` : pending.id,
        argsHash: row.request.hash === 'wrong' ? `sha256:${'0'.repeat(64)}` : pending.argsHash,
      };
      const answer = await send(door, orchestrator, row.request, named);
      const after = await orchestrator.settled('refund');
      const afterPending = after.pendingConfirmation?.id ?? null;
      const outcome = {
        accepted: answer.accepted,
        code: answer.code,
        revision: after.revision === before.revision ? 'same' : 'changed',
        pending: afterPending === null ? 'none' : afterPending === pending.id ? 'same' : 'new',
      };
      const code = door === 'http' && row.http ? row.http.code : row.expected.code;
      expect(outcome).toEqual({ ...row.expected, code });
      // Nothing ran but what the accepted decisions allow: a refund only once confirmed or approved by enough.
      const refunded = row.expected.accepted && row.expected.pending === 'none';
      expect(desk.refunds.length).toBe(refunded ? 1 : 0);
    } finally {
      await orchestrator.close();
    }
  });
});
