/**
 * The bench's workload, the same for every system: a scripted model proposes one read-only no-op tool call per
 * round (its result is about 200 B of JSON), K rounds, then an answer. This file holds this project's side of it:
 * the tool with every gate it can have (scope, business validation, resource permission, rate limit), the model,
 * and the orchestrator options (leases and audit on: they cannot be turned off).
 */
import { z } from 'zod';
import type { AgentModel, OrchestratorOptions, Principal, TaskStore, Tool } from '../../src/index.js';
import { LOCAL_API, type ProjectApi } from './projectApi.js';

/** The text in every tool result: with the round number, about 200 B of JSON. */
export const RESULT_TEXT = 'x'.repeat(180);

/** What the scripted model does in round `round` of a task of `k` rounds (1-based; round k + 1 answers). */
export function scriptedStep(round: number, k: number): { type: 'call'; n: number } | { type: 'answer'; text: string } {
  return round <= k ? { type: 'call', n: round } : { type: 'answer', text: 'done' };
}

/** The goal that tells the bench model how many rounds to play. */
export const goalFor = (k: number) => `rounds:${k}`;
const roundsOf = (goal: string) => Number(goal.slice('rounds:'.length));

export const BENCH_PRINCIPAL: Principal = { userId: 'bench', tenantId: 'bench', scopes: ['bench:read'] };

const UNLIMITED = {
  modelTurns: 1_000_000,
  toolCalls: 1_000_000,
  tokens: Number.MAX_SAFE_INTEGER,
  costMicros: Number.MAX_SAFE_INTEGER,
  wallClockMs: 24 * 3_600_000,
};

/** The no-op read, with every gate a read can have; defined with `api`'s own defineTool. */
function noopTool(api: ProjectApi): Tool {
  return api.defineTool({
    name: 'noop',
    description: 'does nothing, at once',
    effect: 'read',
    scopes: ['bench:read'],
    timeoutMs: 5_000,
    input: z.strictObject({ n: z.number().int() }),
    output: z.strictObject({ n: z.number().int(), text: z.string() }),
    // Both answer at once: asked by the gates' guards themselves (no invoked state per hook).
    hooks: 'sync',
    validate: () => ({ ok: true }),
    authorize: () => ({ ok: true }),
    rateLimit: { points: 1_000_000_000, perSeconds: 1 },
    execute: async ({ n }) => ({ ok: true, value: { n, text: RESULT_TEXT } }),
  });
}

const tools = new WeakMap<ProjectApi, Tool>();

/** Lets the resume measurement park a task: from round `hangFrom` on, the model call hangs until aborted. */
export interface ModelControl {
  hangFrom: number;
  /** Called when a call starts hanging. */
  onHang?: () => void;
  /** Called when the model is asked (before it answers or hangs). */
  onDecide?: () => void;
}

/** The scripted model: stateless, the step is chosen by the turn number, so a resumed task plays on. */
export function benchModel(
  control: ModelControl = { hangFrom: Number.POSITIVE_INFINITY },
  { reply } = LOCAL_API,
): AgentModel {
  return {
    name: 'bench',
    reservation: { tokens: 0, costMicros: 0 },
    decide({ goal, turn, signal }) {
      control.onDecide?.();
      if (turn >= control.hangFrom) {
        control.onHang?.();
        return new Promise((_, reject) =>
          signal.addEventListener('abort', () => reject(signal.reason), { once: true }),
        );
      }
      const step = scriptedStep(turn, roundsOf(goal));
      return Promise.resolve(
        step.type === 'call' ? reply.call('noop', { n: step.n }, `c${turn}`) : reply.answer(step.text),
      );
    },
  };
}

/** Orchestrator options of the workload on `store`. Sweepers are off: they would add commands unrelated to rounds. */
export function projectOptions(
  store: TaskStore,
  control?: ModelControl,
  api: ProjectApi = LOCAL_API,
): OrchestratorOptions {
  if (!tools.has(api)) tools.set(api, noopTool(api));
  return {
    tools: [tools.get(api)!],
    model: benchModel(control, api),
    store,
    limits: UNLIMITED,
    expirySweepMs: 0,
    retentionSweepMs: 0,
  };
}

/**
 * A K-round task parked on `store` (its next model call hangs), for timing resumes: `resumeOnce` resumes it in a new
 * orchestrator, calls `started` right before `resume`, `decided` when the model is asked (the restored task's turn)
 * and `saved` at its first acknowledged save, then lets it play on to its next model call (which hangs again) and
 * closes that orchestrator.
 */
export async function parkTask(store: TaskStore, k: number, api: ProjectApi = LOCAL_API) {
  const control: ModelControl = { hangFrom: k + 1 };
  const atRest = () => new Promise<void>((resolve) => (control.onHang = resolve));
  let parked = atRest();
  const first = api.createOrchestrator(projectOptions(store, control, api));
  await first.start({ principal: BENCH_PRINCIPAL, goal: goalFor(k * 100), taskId: 'resume' });
  await parked;
  await first.close();
  return {
    async resumeOnce(hooks: { started: () => void; saved: () => void; decided?: () => void }): Promise<void> {
      control.hangFrom = Number.POSITIVE_INFINITY;
      control.onDecide = hooks.decided;
      parked = atRest();
      const orchestrator = api.createOrchestrator(projectOptions(store, control, api));
      const firstSave = new Promise<void>((resolve) =>
        orchestrator.onSaved(() => {
          control.hangFrom = 0;
          control.onDecide = undefined;
          hooks.saved();
          resolve();
        }),
      );
      hooks.started();
      await orchestrator.resume('resume');
      await firstSave;
      await parked;
      await orchestrator.close();
    },
  };
}
