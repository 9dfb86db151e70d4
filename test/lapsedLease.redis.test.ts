/**
 * A lease that lapses while its holder's save is on the way, on Redis, through the HTTP API of two services on one
 * prefix (no dispatch). Service A's save is held on a gate; meanwhile A's lease lapses (its key is removed here, as an
 * expiry would) and service B takes it; then A's save goes on and is refused by its stale fence. Whatever A was
 * doing is done once more under a new lease, against what B stored, so exactly one request takes effect and the
 * other gets a clear answer, never a 500:
 * - a decision: M1 confirms the four-eyes refund at A while E17's rejection is applied at B;
 * - a start: E17's start of one task id reaches A and B;
 * - a write: the save of a write's intent is the one held, B resumes the task from what is stored and writes; A,
 *   fenced out, never runs the write it had prepared;
 * - an erasure that cancels the task first (`cancelRunning`): the cancel's save is the one held, and B drives the
 *   task on; the erasure is refused as for any task another process drives (TaskBusyError, 503 `task_busy`), and
 *   nothing is erased.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { APPROVAL_REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { redisKeys } from '../src/store/redis/redisKeys.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import type { SaveRequest, TaskStore } from '../src/store/taskStore.js';
import { TaskBusyError } from '../src/errors.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { reply, scriptedModel } from '../src/testing/scriptedModel.js';
import { defineTool } from '../src/tool.js';
import { E17, until } from './support/harness.js';
import { useTestRedis } from './support/redis.js';
import { withMembers } from './support/takeover.js';

const redis = await useTestRedis();

function post(service: DemoService, user: string, url: string, payload: object) {
  return service.app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${user}` }, payload });
}

/** `store` whose next save (of those `matches` picks), once `hold()` is called, waits until it is released. */
function heldSaves(store: RedisStore) {
  let gate: { matches: (request: SaveRequest) => boolean; reached: () => void; open: Promise<void> } | null = null;
  const wrapped = withMembers(store, {
    async save(request) {
      const held = gate?.matches(request) ? gate : null;
      if (held) {
        gate = null;
        held.reached();
        await held.open;
      }
      return store.save(request);
    },
  } satisfies Partial<TaskStore>);
  return {
    store: wrapped,
    /** Holds the next save `matches` picks: `reached` resolves when it is held; `release` lets it go to the store. */
    hold(matches: (request: SaveRequest) => boolean = () => true) {
      let reached!: () => void;
      let release!: () => void;
      const reachedP = new Promise<void>((resolve) => (reached = resolve));
      const open = new Promise<void>((resolve) => (release = resolve));
      gate = { matches, reached, open };
      return { reached: reachedP, release };
    },
  };
}

/** Two stores on one fresh prefix, A's saves can be held; `close` closes what ran on them first. */
function twoStores() {
  const prefix = redis!.freshPrefix();
  const admin = redis!.connect();
  const rawA = new RedisStore({ url: redis!.url, prefix });
  const rawB = new RedisStore({ url: redis!.url, prefix });
  const held = heldSaves(rawA);
  return {
    held,
    storeB: rawB,
    /** A's lease of the task lapses (B may take it now). */
    lapse: (taskId: string) => admin.del(redisKeys(prefix).lease(taskId)),
    async close(...users: { close(): Promise<void> }[]) {
      for (const user of users) await user.close();
      await rawA.close();
      await rawB.close();
      await redis!.deleteKeys(prefix);
    },
  };
}

/** Two demo services on one fresh prefix; A's saves can be held. */
async function twoServices() {
  const stores = twoStores();
  const a = await createDemoService({ store: stores.held.store, expirySweepMs: 0, rateLimit: false });
  const b = await createDemoService({ store: stores.storeB, expirySweepMs: 0, rateLimit: false });
  return { a, b, held: stores.held, lapse: stores.lapse, close: () => stores.close(a, b) };
}

describe.skipIf(!redis)('a save whose lease lapsed and was taken by another service', () => {
  afterAll(() => redis?.stop());

  it('gives the approver the chart’s refusal, not a 500, when the requester’s rejection won at the other service', async () => {
    const { a, b, held, lapse, close } = await twoServices();
    try {
      const started = await post(a, 'E17', '/api/tasks', APPROVAL_REFUND_START_BODY);
      const taskId = started.json().status.taskId as string;
      const waiting = await a.orchestrator.settled(taskId);
      expect(waiting.state).toBe('waiting_for_confirmation');
      const pending = waiting.pendingConfirmation!;

      const save = held.hold();
      const confirming = post(a, 'M1', `/api/tasks/${taskId}/confirm`, {
        confirmationId: pending.id,
        argsHash: pending.argsHash,
      });
      await save.reached;
      // A's lease lapses while its save is on the way (a stall), and B takes the task for E17's rejection.
      await lapse(taskId);
      const rejected = await post(b, 'E17', `/api/tasks/${taskId}/reject`, {
        confirmationId: pending.id,
        reason: 'the customer withdrew',
      });
      expect([rejected.statusCode, rejected.json().code]).toEqual([200, null]);
      save.release();
      const confirmed = await confirming;

      // The chart's answer once B let the task go, or (B still driving it after the lease wait) task_busy: retry later.
      expect([
        [409, 'not_waiting_for_confirmation'],
        [409, 'task_finished'],
        [503, 'task_busy'],
      ]).toContainEqual([confirmed.statusCode, confirmed.json().code]);
      const final = await b.orchestrator.settled(taskId);
      expect(final.state).not.toBe('waiting_for_confirmation');
      expect([...(await a.rows()), ...(await b.rows())].filter((row) => row.startsWith('refund'))).toEqual([]);
      const audit = await b.orchestrator.audit(taskId);
      const decisions = audit.filter((entry) => entry.kind === 'confirmation');
      expect(decisions.map((entry) => (entry as { decision?: string }).decision)).not.toContain('confirmed');
      expect(audit.filter((entry) => entry.kind === 'tool_started' && entry.tool === 'refund_order')).toEqual([]);
    } finally {
      await close();
    }
  });

  it('makes one of two starts of a task id, when the first one’s save was fenced out by the other’s', async () => {
    const { a, b, held, lapse, close } = await twoServices();
    try {
      const body = { ...APPROVAL_REFUND_START_BODY, taskId: 'refund-1' };
      const taskId = 'acme:E17:refund-1';
      const save = held.hold();
      const startingAtA = post(a, 'E17', '/api/tasks', body);
      await save.reached;
      await lapse(taskId);
      // B finds the id claimed by A's start (its mandate pointer), and says so.
      const atB = await post(b, 'E17', '/api/tasks', body);
      expect([atB.statusCode, atB.json().code]).toEqual([409, 'task_exists']);
      save.release();
      const atA = await startingAtA;

      // A's start is made under a new lease: the task exists, as both answers say, and runs to its confirmation.
      expect(atA.statusCode, atA.body).toBe(201);
      expect((await a.orchestrator.settled(taskId)).state).toBe('waiting_for_confirmation');
      const again = await post(b, 'E17', '/api/tasks', body);
      expect([again.statusCode, again.json().code]).toEqual([409, 'task_exists']);
      const audit = await b.orchestrator.audit(taskId);
      expect(audit.filter((entry) => entry.kind === 'task_started')).toHaveLength(1);
    } finally {
      await close();
    }
  });

  it('runs no write in the process whose save of the write’s intent was fenced out; the one that took over writes once', async () => {
    const { held, storeB: rawB, lapse, close } = twoStores();
    const executed: string[] = [];
    const noteBy = (process: string) =>
      defineTool({
        name: 'record_note',
        description: 'records a note',
        effect: 'write',
        scopes: [],
        timeoutMs: 5_000,
        sameKeyRetrySafe: true,
        confirm: { never: "a note in the task's own log" },
        input: z.strictObject({ text: z.string() }),
        output: z.strictObject({ by: z.string() }),
        async execute() {
          executed.push(process);
          return { ok: true, value: { by: process } };
        },
        lookup: async () => ({ found: false as const }),
      });
    const orchestrator = (store: TaskStore, process: string) =>
      createOrchestrator({
        tools: [noteBy(process)],
        model: scriptedModel([reply.call('record_note', { text: 'hello' }), reply.answer('noted')]),
        store,
        expirySweepMs: 0,
      });
    const a = orchestrator(held.store, 'A');
    const b = orchestrator(rawB, 'B');
    try {
      const intent = held.hold((request) =>
        (request.append.audit as { kind?: string }[]).some((entry) => entry.kind === 'tool_started'),
      );
      await a.start({ principal: E17, goal: 'note', taskId: 't' });
      await intent.reached;
      await lapse('t');
      // B drives the task from its last durable state (before the intent) and makes the write itself.
      await b.resume('t');
      expect((await b.settled('t')).state).toBe('answered');
      expect(executed).toEqual(['B']);
      intent.release();
      // A's save is refused by the fence: A stops driving the task, and its write never starts.
      await until(() => a.inFlight().live === 0);
      expect(executed).toEqual(['B']);
      const audit = await b.audit('t');
      expect(audit.filter((entry) => entry.kind === 'tool_started')).toHaveLength(1);
      expect(await a.status('t')).toMatchObject({ state: 'answered', outcome: { answer: 'noted' } });
    } finally {
      await close(a, b);
    }
  });

  it('refuses an erasure whose cancel was fenced out as TaskBusyError, and erases nothing', async () => {
    const { held, storeB: rawB, lapse, close } = twoStores();
    let turns = 0;
    /** A's turn waits until it is aborted (by the cancel); B's answers. */
    const hanging: AgentModel = {
      name: 'hanging',
      decide: (request) => {
        turns += 1;
        return new Promise((_, reject) =>
          request.signal.addEventListener('abort', () => reject(request.signal.reason), { once: true }),
        );
      },
    };
    const a = createOrchestrator({ tools: [], model: hanging, store: held.store, expirySweepMs: 0 });
    const b = createOrchestrator({
      tools: [],
      model: scriptedModel([reply.answer('still here')]),
      store: rawB,
      expirySweepMs: 0,
    });
    try {
      await a.start({ principal: E17, goal: 'wait', taskId: 't' });
      await until(() => turns === 1);
      const cancelSave = held.hold();
      const erasing = a.erase('t', { reason: 'gdpr_erasure', cancelRunning: true }).catch((error: unknown) => error);
      await cancelSave.reached;
      await lapse('t');
      await b.resume('t');
      cancelSave.release();
      const error = await erasing;
      expect(error).toBeInstanceOf(TaskBusyError);
      expect(error).toMatchObject({ code: 'task_busy' });
      expect(await b.tombstone('t')).toBeNull();
      expect((await b.settled('t')).state).toBe('answered');
    } finally {
      await close(a, b);
    }
  });
});
