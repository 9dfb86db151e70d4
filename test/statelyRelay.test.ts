/**
 * The Stately inspector relay as the service and the step CLI use it: it listens on 127.0.0.1 only, what it streams
 * is the reduced context of the offline stream (no goal, no scopes, no tool output such as the account holder's
 * note), and a task keeps one actor identity (`task:<taskId>`) although it is evicted while it waits and reloaded
 * when the clerk confirms (XState gives the reload a new session id).
 */
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { networkInterfaces } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { createStatelyInspection } from '../src/inspect/statelyInspector.js';
import { reply } from '../src/testing/index.js';
import { CASH_GOAL, CLERK, PAYOUT_SUCCESS, cashDesk, payoutMandate } from './support/domain.js';
import { openViewer, pageToken } from './support/statelyViewer.js';
import { DEMO_USERS } from '../examples/booking/service.js';
import { REFUND_GOAL, REFUND_MANDATE, REFUND_SUCCESS } from '../examples/booking/requests.js';
import { fourEyesOrchestrator } from './support/fourEyes.js';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

type Frame = {
  type: string;
  sessionId: string;
  rootId?: string | null;
  parentId?: string;
  definition?: string;
  snapshot?: { value?: unknown; context?: Record<string, unknown> | null };
};

describe('Stately relay', () => {
  it('listens on 127.0.0.1 only by default', async () => {
    const inspection = await createStatelyInspection({ port: 0 });
    closers.push(() => inspection.stop());
    expect(inspection.url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${inspection.port}/\\?key=[\\w-]{32}$`));
    expect(inspection.origin).toBe(`http://127.0.0.1:${inspection.port}`);
    const outside = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal);
    if (outside) {
      const socket = net.connect(inspection.port, outside.address);
      const [error] = (await once(socket, 'error')) as [NodeJS.ErrnoException];
      expect(error.code).toBe('ECONNREFUSED');
    }
    const local = net.connect(inspection.port, '127.0.0.1');
    await once(local, 'connect');
    local.destroy();
  });

  it('streams one actor per task across reloads, with the reduced context only', async () => {
    const inspection = await createStatelyInspection({ port: 0 });
    closers.push(() => inspection.stop());
    const viewer = await openViewer(inspection.url);
    const frames = viewer.frames as unknown as Frame[];
    const { orchestrator, ledger } = cashDesk({
      script: [
        reply.call('get_balance', { account_id: 'A-1' }),
        reply.call('pay_out', { account_id: 'A-1', amount: 150, memo: 'taxi' }),
        reply.answer('Paid out 150.'),
      ],
      inspect: inspection.inspect,
    });
    closers.push(() => orchestrator.close());
    const mandate = payoutMandate.of({ account_id: 'A-1', max_amount: 200 });
    const waiting = await orchestrator.run({
      principal: CLERK,
      goal: CASH_GOAL,
      mandate,
      success: PAYOUT_SUCCESS,
      limits: { money: 200 },
      taskId: 'refund-7',
    });
    expect(orchestrator.liveTasks).toBe(0); // evicted while it waits
    const pending = waiting.pendingConfirmation!;
    expect((await orchestrator.confirm('refund-7', CLERK, pending)).accepted).toBe(true);
    expect((await orchestrator.settled('refund-7')).state).toBe('done');
    await inspection.stop();
    await viewer.closed;

    const roots = frames.filter((f) => f.type === '@xstate.actor' && f.parentId === undefined);
    // Started, reloaded for the confirmation: the same actor both times.
    expect(roots.length).toBeGreaterThanOrEqual(2);
    expect(new Set(roots.map((f) => f.sessionId))).toEqual(new Set(['task:refund-7']));
    expect(JSON.parse(roots[0]!.definition!)).toMatchObject({ id: 'agent' });
    expect(new Set(frames.map((f) => f.rootId))).toEqual(new Set(['task:refund-7']));
    const children = frames.filter((f) => f.type === '@xstate.actor' && f.parentId !== undefined);
    expect(children.length).toBeGreaterThan(0);
    expect(children.every((f) => f.parentId === 'task:refund-7' && f.sessionId.startsWith('task:refund-7/'))).toBe(
      true,
    );
    const snapshots = frames.filter((f) => f.type === '@xstate.snapshot' && f.sessionId === 'task:refund-7');
    expect(snapshots.at(-1)!.snapshot!.value).toBe('done');
    const context = snapshots.find((f) => f.snapshot?.context?.pendingConfirmation)!.snapshot!.context!;
    expect(Object.keys(context)).not.toContain('goal');
    expect(Object.keys(context)).not.toContain('principal');
    const everything = JSON.stringify(frames);
    expect(everything).not.toContain(CASH_GOAL);
    expect(everything).not.toContain('cash:pay');
    expect(everything).not.toContain(ledger.accounts.get('A-1')!.note);
  });

  it('refuses a page without the access key, a WebSocket from another Origin, and one without a token', async () => {
    const inspection = await createStatelyInspection({ port: 0 });
    closers.push(() => inspection.stop());
    expect((await fetch(inspection.origin)).status).toBe(401);
    expect((await fetch(`${inspection.origin}/?key=wrong`)).status).toBe(401);
    // A page asked for under another name (a DNS-rebound host) is refused, key or not.
    const rebound = await new Promise<number | undefined>((resolve, reject) =>
      http
        .get(inspection.url, { headers: { host: `evil.example:${inspection.port}` } }, (response) => {
          response.resume();
          resolve(response.statusCode);
        })
        .on('error', reject),
    );
    expect(rebound).toBe(421);

    const token = await pageToken(inspection.url);
    await expect(openViewer(inspection.url, { token, origin: 'http://evil.example' })).rejects.toMatchObject({
      status: 403,
    });
    await expect(openViewer(inspection.url, { token, origin: null })).rejects.toMatchObject({ status: 403 });
    await expect(openViewer(inspection.url, { token: '' })).rejects.toMatchObject({ status: 401 });
    await expect(openViewer(inspection.url, { token: 'made-up' })).rejects.toMatchObject({ status: 401 });
    // The refused attempts did not spend the token; it opens one WebSocket, once.
    const viewer = await openViewer(inspection.url, { token });
    await expect(openViewer(inspection.url, { token })).rejects.toMatchObject({ status: 401 });
    viewer.socket.close();
  });

  it("sends a signed-in viewer its tenant's tasks only, and relays nothing a viewer sends", async () => {
    const OTHER = { userId: 'clerk-9', tenantId: 'other-shop', scopes: CLERK.scopes };
    // An operator of the first tenant sees its tasks as over HTTP; a colleague without the scope sees none.
    const OPERATOR = { ...CLERK, userId: 'ops-1', scopes: [...CLERK.scopes, 'tasks:operate'] };
    const COLLEAGUE = { ...CLERK, userId: 'clerk-2' };
    const sessions: Record<string, typeof CLERK> = {
      'clerk-1': CLERK,
      'clerk-9': OTHER,
      'ops-1': OPERATOR,
      'clerk-2': COLLEAGUE,
    };
    const inspection = await createStatelyInspection({
      port: 0,
      operatorScope: 'tasks:operate',
      authenticate: (request) =>
        sessions[/^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1] ?? ''] ?? null,
    });
    closers.push(() => inspection.stop());
    expect((await fetch(inspection.url)).status).toBe(401);
    const shop = await openViewer(inspection.url, { headers: { authorization: 'Bearer clerk-1' } });
    const other = await openViewer(inspection.url, { headers: { authorization: 'Bearer clerk-9' } });
    const operator = await openViewer(inspection.url, { headers: { authorization: 'Bearer ops-1' } });
    const colleague = await openViewer(inspection.url, { headers: { authorization: 'Bearer clerk-2' } });

    for (const [principal, taskId] of [
      [CLERK, 'shop-task'],
      [OTHER, 'other-task'],
    ] as const) {
      const { orchestrator } = cashDesk({ script: [reply.answer('Nothing to pay.')], inspect: inspection.inspect });
      closers.push(() => orchestrator.close());
      const status = await orchestrator.run({ principal, goal: 'Say hello', taskId });
      expect(status.state).toBe('answered');
    }
    // A viewer posing as the producer: its frame must reach nobody.
    const forged = { type: '@xstate.snapshot', sessionId: 'task:forged', rootId: 'task:forged', snapshot: {} };
    shop.socket.send(JSON.stringify(forged));
    other.socket.send(JSON.stringify(forged));
    // A late viewer of the first tenant gets that tenant's backlog only.
    const late = await openViewer(inspection.url, { headers: { authorization: 'Bearer clerk-1' } });
    // The late viewer's backlog arrives (polled, not a fixed delay), then a while for a forged frame to show up.
    await expect.poll(() => late.frames.length).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await inspection.stop();
    await Promise.all([shop.closed, other.closed, late.closed, operator.closed, colleague.closed]);

    const tasksOf = (frames: Record<string, unknown>[]) => new Set(frames.map((f) => f.rootId));
    expect(shop.frames.length).toBeGreaterThan(5);
    expect(tasksOf(shop.frames)).toEqual(new Set(['task:shop-task']));
    expect(tasksOf(other.frames)).toEqual(new Set(['task:other-task']));
    expect(tasksOf(late.frames)).toEqual(new Set(['task:shop-task']));
    expect(tasksOf(operator.frames)).toEqual(new Set(['task:shop-task']));
    expect(operator.frames.map((f) => JSON.stringify(f))).toEqual(shop.frames.map((f) => JSON.stringify(f)));
    expect(colleague.frames).toEqual([]);
    for (const viewer of [shop, other, late, operator])
      expect(JSON.stringify(viewer.frames)).not.toContain('task:forged');
  });

  it('shows an approver the task it must decide, from its first frame, and a colleague nothing', async () => {
    const inspection = await createStatelyInspection({
      port: 0,
      authenticate: (request) => DEMO_USERS[String(request.headers['x-user'])] ?? null,
    });
    closers.push(() => inspection.stop());
    const viewers = Object.fromEntries(
      await Promise.all(
        ['E17', 'M1', 'E99', 'Z5'].map(
          async (user) => [user, await openViewer(inspection.url, { headers: { 'x-user': user } })] as const,
        ),
      ),
    );
    const { orchestrator } = fourEyesOrchestrator({ inspect: inspection.inspect });
    closers.push(() => orchestrator.close());
    const status = await orchestrator.run({
      principal: DEMO_USERS.E17!,
      goal: REFUND_GOAL,
      mandate: REFUND_MANDATE,
      success: REFUND_SUCCESS,
      limits: { money: 19_900 },
      taskId: 'refund-four-eyes',
    });
    expect(status.pendingConfirmation?.approverScope).toBe('refunds:approve');
    // The approver's frames arrive (polled, not a fixed delay), then a while for a frame the others must not get.
    await expect.poll(() => viewers.M1!.frames.length).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await inspection.stop();

    const owner = viewers.E17!.frames;
    const approver = viewers.M1!.frames;
    expect(owner.length).toBeGreaterThan(5);
    // The approver gets the task once it waits on them, with everything before it, in the same order.
    expect(approver.length).toBeGreaterThan(0);
    expect(approver[0]).toMatchObject({ type: '@xstate.actor', sessionId: 'task:refund-four-eyes' });
    expect(approver.map((f) => JSON.stringify(f))).toEqual(
      owner.slice(0, approver.length).map((f) => JSON.stringify(f)),
    );
    expect(viewers.E99!.frames).toEqual([]);
    expect(viewers.Z5!.frames).toEqual([]);
  });
});
