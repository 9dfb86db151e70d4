/**
 * Adversarial checks of an operator's early model retry: two clicks at once spend one model turn.
 */
import { describe, expect, it } from 'vitest';
import type { Principal } from '../machines/context.js';
import { TransientModelError } from '../src/model/agentModel.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { ManualClock } from '../src/testing/index.js';
import { E17, harness } from './support/harness.js';

const ADMIN = 'tasks:admin';
const OPERATOR: Principal = { userId: 'ops-1', tenantId: E17.tenantId, scopes: [ADMIN] };

describe('retry double click', () => {
  it('spends one model turn for two clicks at once', async () => {
    const clock = new ManualClock();
    let calls = 0;
    // The retried turn answers only once both clicks were handled: the second click surely finds the task asking the
    // model (how many microtasks a failing turn takes to come back is not what this test is about).
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const h = harness({
      clock,
      store: new MemoryStore(),
      model: {
        name: 'down',
        decide: async () => {
          calls += 1;
          if (calls > 1) await released;
          throw new TransientModelError('503 service unavailable');
        },
      },
      expirySweepMs: 0,
      adminScope: ADMIN,
      limits: { retries: 0 },
      policy: { modelOutageMs: 600_000, modelWakeMs: { first: 60_000, longest: 60_000 } },
    });
    const waiting = await h.orchestrator.run({ principal: E17, goal: 'say ok', taskId: 'd1' });
    expect(waiting.state).toBe('waiting_for_model');
    const results = await Promise.all([
      h.orchestrator.retryModelNow('d1', OPERATOR),
      h.orchestrator.retryModelNow('d1', OPERATOR),
    ]);
    release();
    const status = await h.orchestrator.settled('d1');
    // The second click finds the task asking the model already: refused, nothing spent for it.
    expect(results.map((r) => [r.accepted, r.code])).toEqual([
      [true, null],
      [false, 'not_waiting_for_model'],
    ]);
    expect(calls).toBe(2);
    expect(status.budget.used.modelTurns).toBe(waiting.budget.used.modelTurns + 1);
  });
});
