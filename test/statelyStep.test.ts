/**
 * Time travel in the Stately inspector: `showStep` (what the step CLI's `at N` and the service's replay route call)
 * sends the task as it was at step N of its journal to the task's own actor, `task:<taskId>`, introducing the actor
 * with the chart's definition when the inspector has not seen it in this process. The step CLI's own use is in
 * stepInspect.process.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { REFUND_START_BODY, createDemoService } from '../examples/booking/service.js';
import { replayAudit } from '../src/audit/replayAudit.js';
import { type StepView, createStatelyInspection } from '../src/inspect/statelyInspector.js';
import { stateValueOf } from '../src/inspect/stepFrames.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { ManualClock, reply } from '../src/testing/index.js';
import { CASH_GOAL, CLERK, PAYOUT_SUCCESS, cashDesk, payoutMandate } from './support/domain.js';
import { openViewer } from './support/statelyViewer.js';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

describe('stepping a persisted task in the Stately inspector', () => {
  it('sends the snapshot of step N to the task actor, to the viewers who may see the task', async () => {
    const { orchestrator } = cashDesk({
      script: [
        reply.call('get_balance', { account_id: 'A-1' }),
        reply.call('pay_out', { account_id: 'A-1', amount: 150, memo: 'taxi' }),
      ],
    });
    closers.push(() => orchestrator.close());
    const status = await orchestrator.run({
      principal: CLERK,
      goal: CASH_GOAL,
      mandate: payoutMandate.of({ account_id: 'A-1', max_amount: 200 }),
      success: PAYOUT_SUCCESS,
      limits: { money: 200 },
      taskId: 'payout-9',
    });
    expect(status.state).toBe('waiting_for_confirmation');
    const audit = await orchestrator.audit('payout-9');

    const OTHER = { userId: 'clerk-9', tenantId: 'other-shop', scopes: CLERK.scopes };
    const inspection = await createStatelyInspection({
      port: 0,
      authenticate: (request) => ({ clerk: CLERK, other: OTHER })[String(request.headers['x-user'])] ?? null,
    });
    closers.push(() => inspection.stop());
    const viewer = await openViewer(inspection.url, { headers: { 'x-user': 'clerk' } });
    const outsider = await openViewer(inspection.url, { headers: { 'x-user': 'other' } });

    const steps = [3, audit.length, 1];
    for (const n of steps) inspection.showStep({ taskId: 'payout-9', replayed: replayAudit(audit, n), access: status });
    // The viewer's frames arrive (polled, not a fixed delay), then a while for a frame the outsider must not get.
    await expect.poll(() => viewer.frames.length).toBe(1 + steps.length);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await inspection.stop();
    await Promise.all([viewer.closed, outsider.closed]);

    expect(outsider.frames).toEqual([]);
    const [actor, ...snapshots] = viewer.frames;
    expect(actor).toMatchObject({ type: '@xstate.actor', sessionId: 'task:payout-9', rootId: 'task:payout-9' });
    expect(JSON.parse(actor!.definition as string)).toMatchObject({ id: 'agent' });
    expect(snapshots.map((f) => f.type)).toEqual(steps.map(() => '@xstate.snapshot'));
    for (const [i, n] of steps.entries()) {
      const replayed = replayAudit(audit, n);
      expect(snapshots[i]).toMatchObject({
        sessionId: 'task:payout-9',
        event: { type: 'inspect.step', step: n },
        snapshot: {
          value: stateValueOf(replayed.state),
          context: { taskId: 'payout-9', step: n, turn: replayed.turn },
        },
      });
    }
    expect(snapshots[1]!.snapshot).toMatchObject({ value: { executing: 'awaitingConfirmation' } });
    expect(JSON.stringify(viewer.frames)).not.toContain(CASH_GOAL);
  });

  it("sends the step the live page's replay route returns (the page's step controls)", async () => {
    const shown: StepView[] = [];
    const service = await createDemoService({
      store: new MemoryStore(),
      clock: new ManualClock(),
      expirySweepMs: 0,
      inspector: { showStep: (view) => shown.push(view) },
    });
    closers.push(() => service.close());
    const auth = { authorization: 'Bearer E17' };
    const started = await service.app.inject({
      method: 'POST',
      url: '/api/tasks',
      headers: auth,
      payload: REFUND_START_BODY,
    });
    const taskId = started.json().status.taskId as string;
    await service.orchestrator.settled(taskId);
    const replay = await service.app.inject({ method: 'GET', url: `/api/tasks/${taskId}/replay?at=2`, headers: auth });
    expect(replay.statusCode).toBe(200);
    expect(shown).toHaveLength(1);
    expect(shown[0]!.taskId).toBe(taskId);
    expect(shown[0]!.replayed).toEqual(replay.json().replay);
    expect(shown[0]!.replayed.step).toBe(2);
    expect(shown[0]!.access.principal.userId).toBe('E17');
    // A caller who may not see the task gets 404, and nothing is shown.
    const outsider = await service.app.inject({
      method: 'GET',
      url: `/api/tasks/${taskId}/replay?at=1`,
      headers: { authorization: 'Bearer Z5' },
    });
    expect(outsider.statusCode).toBe(404);
    expect(shown).toHaveLength(1);
  });
});
