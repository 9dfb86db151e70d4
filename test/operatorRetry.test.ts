/**
 * An operator's early retry of a model wait: a task waiting out a model outage (`waiting_for_model`) is asked again
 * now, at an operator's request, instead of at its wake-up time. Only an operator of the task's tenant may, only
 * while it waits for the model, and only when the budget pays for one retry and the turn's reservation; every
 * request is audited with who made it.
 */
import { describe, expect, it } from 'vitest';
import type { Principal } from '../machines/context.js';
import { TransientModelError, type AgentModel } from '../src/model/agentModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { ManualClock, reply } from '../src/testing/index.js';
import { E17, byKind, harness } from './support/harness.js';

const ADMIN = 'tasks:admin';
const OPERATOR: Principal = { userId: 'ops-1', tenantId: E17.tenantId, scopes: [ADMIN] };
const OTHER_TENANT: Principal = { userId: 'ops-2', tenantId: 'globex', scopes: [ADMIN] };

/** A model that fails transiently `failures` times, then answers. */
function flaky(failures: number): AgentModel & { calls: number } {
  const model = {
    name: 'flaky',
    calls: 0,
    decide: async () => {
      model.calls += 1;
      if (model.calls <= failures) throw new TransientModelError('503 service unavailable');
      return reply.answer('All good.');
    },
  };
  return model;
}

async function waitingTask(taskId: string, limits: { modelTurns?: number } = {}, store = new MemoryStore()) {
  const clock = new ManualClock();
  const model = flaky(1);
  const h = harness({
    clock,
    store,
    model,
    expirySweepMs: 0,
    adminScope: ADMIN,
    // The model's own transport retries are off: each failure is one attempt.
    limits: { retries: 0, ...limits },
    policy: { modelOutageMs: 600_000, modelWakeMs: { first: 60_000, longest: 60_000 } },
  });
  const waiting = await h.orchestrator.run({ principal: E17, goal: 'say ok', taskId });
  expect(waiting.state).toBe('waiting_for_model');
  return { ...h, clock, model, waiting };
}

describe('orchestrator.retryModelNow', () => {
  it('asks the model again now for an operator of the tenant, charges one model turn and audits who asked', async () => {
    const { orchestrator, model, waiting } = await waitingTask('r1');
    const result = await orchestrator.retryModelNow('r1', OPERATOR);
    expect(result).toMatchObject({ accepted: true, code: null });
    const status = await orchestrator.settled('r1');
    expect(status).toMatchObject({ state: 'answered', outage: null });
    expect(model.calls).toBe(2);
    // The same turn was asked again (turn 1), charged as one more model turn.
    expect(status.turn).toBe(waiting.turn);
    expect(status.budget.used.modelTurns).toBe(waiting.budget.used.modelTurns + 1);
    const outages = byKind(await orchestrator.audit('r1'), 'model_outage');
    expect(outages.map((e) => [e.action, e.by ?? null])).toEqual([
      ['waiting', null],
      ['retrying', 'acme:ops-1'],
    ]);
  });

  it('refuses the task user, who is no operator, with operator_only', async () => {
    const { orchestrator } = await waitingTask('r2');
    const result = await orchestrator.retryModelNow('r2', E17);
    expect(result).toMatchObject({ accepted: false, code: 'operator_only', status: { state: 'waiting_for_model' } });
  });

  it('refuses an operator of another tenant with wrong_tenant', async () => {
    const { orchestrator } = await waitingTask('r3');
    const result = await orchestrator.retryModelNow('r3', OTHER_TENANT);
    expect(result).toMatchObject({ accepted: false, code: 'wrong_tenant' });
  });

  it('refuses a task that does not wait for the model with not_waiting_for_model', async () => {
    const h = harness({ script: [reply.ask('Which building?')], adminScope: ADMIN, expirySweepMs: 0 });
    await h.orchestrator.run({ principal: E17, goal: 'book', taskId: 'r4' });
    const result = await h.orchestrator.retryModelNow('r4', OPERATOR);
    expect(result).toMatchObject({
      accepted: false,
      code: 'not_waiting_for_model',
      status: { state: 'waiting_for_user' },
    });
  });

  it('refuses with budget_exhausted when no model turn is left, audited, and the task keeps waiting', async () => {
    const { orchestrator, model, clock } = await waitingTask('r5', { modelTurns: 1 });
    const result = await orchestrator.retryModelNow('r5', OPERATOR);
    expect(result).toMatchObject({ accepted: false, code: 'budget_exhausted', status: { state: 'waiting_for_model' } });
    expect(result.message).toContain('modelTurns');
    expect(model.calls).toBe(1);
    const refused = byKind(await orchestrator.audit('r5'), 'model_outage').find((e) => e.action === 'retry_refused');
    expect(refused).toMatchObject({ by: 'acme:ops-1', code: 'budget_exhausted' });
    // The wake-up still applies.
    await clock.advance(60_000);
    expect(await orchestrator.expireDue()).toBe(1);
    expect((await orchestrator.settled('r5')).state).toBe('answered');
  });

  it('takes the retry for a task restored from the store by another process', async () => {
    const store = new MemoryStore();
    const first = await waitingTask('r6', {}, store);
    await first.orchestrator.close();
    const second = harness({
      clock: first.clock,
      store,
      model: first.model,
      expirySweepMs: 0,
      adminScope: ADMIN,
      limits: { retries: 0 },
    });
    const result = await second.orchestrator.retryModelNow('r6', OPERATOR);
    expect(result.accepted).toBe(true);
    expect((await second.orchestrator.settled('r6')).state).toBe('answered');
  });

  it('refuses an event whose actor is not the caller', async () => {
    const { orchestrator } = await waitingTask('r7');
    const events = (orchestrator as unknown as { events: { deliver: (...args: unknown[]) => Promise<unknown> } })
      .events;
    await expect(
      events.deliver('r7', OPERATOR, {
        type: 'operator.retryModel',
        at: 0,
        actor: { userId: 'someone-else', tenantId: 'acme', operator: true },
      }),
    ).rejects.toMatchObject({ code: 'invalid_event' });
  });
});
