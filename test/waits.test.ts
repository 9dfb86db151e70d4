/**
 * Waits that end by time: a question nobody answers (the policy stops the task or lets the model go on), and a model
 * outage longer than the retry budget (the task waits, persisted, and tries again with backoff until the policy's
 * outage limit). Both are delivered by the timer sweep from the store's index of wake-up times, so they also happen
 * in a process that did not run the task.
 */
import { describe, expect, it } from 'vitest';
import { TransientModelError, type AgentModel } from '../src/model/agentModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { ManualClock, reply } from '../src/testing/index.js';
import { E17, byKind, harness } from './support/harness.js';

describe('a question nobody answers', () => {
  it('ends the task with no_answer once it expires (the default policy)', async () => {
    const clock = new ManualClock();
    const h = harness({
      clock,
      script: [reply.ask('Which building?'), reply.answer('x')],
      expirySweepMs: 0,
      policy: { answerTtlMs: 60_000 },
    });
    const waiting = await h.orchestrator.run({ principal: E17, goal: 'book', taskId: 'q' });
    expect(waiting).toMatchObject({
      state: 'waiting_for_user',
      question: 'Which building?',
      questionExpiresAt: clock.now() + 60_000,
    });
    const [listed] = await h.store.list({ states: ['waiting_for_user'] });
    expect(listed?.wakeAt).toBe(clock.now() + 60_000);
    await clock.advance(59_999);
    expect(await h.orchestrator.expireDue()).toBe(0);
    await clock.advance(1);
    expect(await h.orchestrator.expireDue()).toBe(1);
    const status = await h.orchestrator.status('q');
    expect(status).toMatchObject({
      state: 'failed',
      outcome: { reason: { code: 'no_answer', message: 'nobody answered the question in time: Which building?' } },
    });
  });

  it('goes back to the model, which is told nobody answered, when the policy says replan', async () => {
    const clock = new ManualClock();
    const seen: string[] = [];
    const model: AgentModel = {
      name: 'asks-once',
      decide: async (request) => {
        if (request.turn === 1) return reply.ask('Which building?');
        seen.push(JSON.stringify((await request.transcript()).at(-1)));
        return reply.answer('Booked in the main building, as nobody said otherwise.');
      },
    };
    const h = harness({ clock, model, expirySweepMs: 0, policy: { answerTtlMs: 1_000, onAnswerExpiry: 'replan' } });
    await h.orchestrator.run({ principal: E17, goal: 'book', taskId: 'q2' });
    await clock.advance(1_000);
    await h.orchestrator.expireDue();
    const status = await h.orchestrator.settled('q2');
    expect(status.state).toBe('answered');
    expect(seen[0]).toContain('"kind":"no_answer"');
    expect(byKind(await h.orchestrator.audit('q2'), 'question_expired')).toHaveLength(1);
  });

  it('takes an answer given in time, and the timer then has nothing to do', async () => {
    const clock = new ManualClock();
    const h = harness({
      clock,
      script: [reply.ask('Which building?'), reply.answer('ok')],
      expirySweepMs: 0,
      policy: { answerTtlMs: 1_000 },
    });
    await h.orchestrator.run({ principal: E17, goal: 'book', taskId: 'q3' });
    await h.orchestrator.answer('q3', E17, 'Main');
    expect((await h.orchestrator.settled('q3')).state).toBe('answered');
    await clock.advance(5_000);
    expect(await h.orchestrator.expireDue()).toBe(0);
  });

  it('refuses an answer given after answerTtlMs even when the sweep has not run yet', async () => {
    const clock = new ManualClock();
    const h = harness({
      clock,
      script: [reply.ask('Which building?'), reply.answer('x')],
      expirySweepMs: 0,
      policy: { answerTtlMs: 60_000 },
    });
    await h.orchestrator.run({ principal: E17, goal: 'book', taskId: 'late-answer' });
    await clock.advance(24 * 60 * 60_000);
    const late = await h.orchestrator.answer('late-answer', E17, 'Main');
    // The answer is compared with the question's expiry when it arrives (as confirmations are), so whether it
    // expired does not depend on when a sweep happened to run.
    expect(late.accepted).toBe(false);
  });
});

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

describe('a model outage longer than the retry budget', () => {
  it('waits, persisted, survives a restart, wakes up with backoff and finishes when the model is back', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore();
    const model = flaky(3);
    const policy = { modelOutageMs: 60_000, modelWakeMs: { first: 1_000, longest: 1_500 } };
    const first = harness({ clock, store, model, expirySweepMs: 0, limits: { retries: 0 }, policy });
    const waiting = await first.orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'o' });
    expect(waiting).toMatchObject({ state: 'waiting_for_model', outage: { attempts: 1, wakeAt: clock.now() + 1_000 } });
    await first.orchestrator.close();

    // Another process picks it up from the store's wake-up index.
    const second = harness({ clock, store, model, expirySweepMs: 0, limits: { retries: 0 }, policy });
    expect(await second.orchestrator.expireDue()).toBe(0);
    await clock.advance(1_000);
    expect(await second.orchestrator.expireDue()).toBe(1);
    let status = await second.orchestrator.settled('o');
    // Second failure: the wait doubles, up to the longest.
    expect(status).toMatchObject({ state: 'waiting_for_model', outage: { attempts: 2, wakeAt: clock.now() + 1_500 } });
    await clock.advance(1_500);
    await second.orchestrator.expireDue();
    status = await second.orchestrator.settled('o');
    expect(status.outage?.attempts).toBe(3);
    await clock.advance(1_500);
    await second.orchestrator.expireDue();
    status = await second.orchestrator.settled('o');
    expect(status).toMatchObject({ state: 'answered', outage: null });
    expect(model.calls).toBe(4);
    // Waiting did not spend the wall-clock budget, nor more than the one model turn.
    expect(status.budget.used.modelTurns).toBe(1);
    expect(status.budget.deadlineAt).toBe(waiting.budget.deadlineAt + 4_000);
  });

  it('can be cancelled while it waits', async () => {
    const clock = new ManualClock();
    const h = harness({ clock, model: flaky(100), expirySweepMs: 0, limits: { retries: 0 } });
    await h.orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'oc' });
    const result = await h.orchestrator.cancel('oc', E17, 'no longer needed');
    expect(result.status).toMatchObject({ state: 'cancelled', outage: { attempts: 1 } });
  });

  it('fails at once on a refused request: that is not an outage', async () => {
    const refused: AgentModel = {
      name: 'refused',
      decide: async () => {
        throw new Error('400 bad request');
      },
    };
    const h = harness({ model: refused, limits: { retries: 0 } });
    const status = await h.orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'bad' });
    expect(status).toMatchObject({ state: 'failed', outcome: { reason: { code: 'model_unavailable' } } });
  });
});
