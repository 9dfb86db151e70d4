/**
 * The task event stream over a real socket: a client that disconnects mid-task and reconnects with Last-Event-ID
 * receives every event exactly once, in journal order, and the same events as a client that watched the whole task
 * in one go; a bad or unknown Last-Event-ID is refused with its own code. The task is stepped (one model turn per
 * `next`), so "mid-task" is a known point, not a race.
 */
import http from 'node:http';
import Fastify from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { REFUND_MANDATE, REFUND_SUCCESS } from '../examples/booking/requests.js';
import {
  DEMO_USERS,
  REFUND_GOAL,
  REFUND_START_BODY,
  type DemoService,
  createDemoService,
  demoStartRequest,
} from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';
import { agentService } from '../src/http/index.js';
import { fourEyesOrchestrator } from './support/fourEyes.js';
import { scaled } from './support/timeScale.js';

interface SseEvent {
  id: string | null;
  event: string;
  data: { seq?: number; status?: string; state?: string | null };
}

let service: DemoService;
let origin: string;

beforeEach(async () => {
  service = await createDemoService({ store: new MemoryStore(), step: true, expirySweepMs: 0 });
  origin = await service.app.listen({ port: 0, host: '127.0.0.1' });
});
afterEach(() => service.close());

/** An SSE client: collects events until `until` says stop (or the server ends the stream), then disconnects. */
function listen(
  taskId: string,
  options: { user?: string; lastEventId?: string; until?: (events: SseEvent[]) => boolean; origin?: string } = {},
) {
  const base = options.origin ?? origin;
  const events: SseEvent[] = [];
  let request: http.ClientRequest;
  const done = new Promise<{ status: number; events: SseEvent[]; body: string }>((resolve, reject) => {
    request = http.get(
      `${base}/api/tasks/${taskId}/events`,
      {
        headers: {
          authorization: `Bearer ${options.user ?? 'E17'}`,
          ...(options.lastEventId ? { 'last-event-id': options.lastEventId } : {}),
        },
      },
      (response) => {
        let buffer = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          buffer += chunk;
          let cut: number;
          while ((cut = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const fields = Object.fromEntries(
              block
                .split('\n')
                .filter((l) => /^(id|event|data):/.test(l))
                .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]),
            );
            if (fields.event === undefined) continue;
            events.push({ id: fields.id ?? null, event: fields.event, data: JSON.parse(fields.data ?? '{}') });
            if (options.until?.(events)) {
              request.destroy();
              resolve({ status: response.statusCode!, events, body: '' });
            }
          }
        });
        response.on('end', () => resolve({ status: response.statusCode!, events, body: buffer }));
        response.on('error', () => resolve({ status: response.statusCode!, events, body: buffer }));
      },
    );
    request.on('error', (error) => (request.destroyed ? undefined : reject(error)));
  });
  return { done, events };
}

async function until(ready: () => boolean): Promise<void> {
  for (const deadline = Date.now() + scaled(10_000); !ready();) {
    if (Date.now() > deadline) throw new Error('the stream sent nothing');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function start(): Promise<string> {
  const response = await fetch(`${origin}/api/tasks`, {
    method: 'POST',
    headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
    body: JSON.stringify(REFUND_START_BODY),
  });
  expect(response.status).toBe(201);
  const taskId = ((await response.json()) as { status: { taskId: string } }).status.taskId;
  await service.stepper!.whenWaiting(taskId);
  return taskId;
}

const post = async (taskId: string, path: string, body: object = {}) => {
  const response = await fetch(`${origin}/api/tasks/${taskId}/${path}`, {
    method: 'POST',
    headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect([path, response.status]).toEqual([path, 200]);
  return (await response.json()) as {
    status: { state: string; pendingConfirmation: { id: string; argsHash: string } | null };
  };
};

describe('task events (SSE)', () => {
  it(
    'gives a client that reconnects with Last-Event-ID every event exactly once',
    async () => {
      const taskId = await start();
      // First connection: the task so far (started, model asked), then two live turns; it drops after a status event.
      const first = listen(taskId, { until: (events) => events.some((e) => e.event === 'status') });
      await post(taskId, 'next');
      await post(taskId, 'next');
      const status = await post(taskId, 'next'); // turn 3: 199.00 waits for confirmation -> a status event
      const a = await first.done;
      expect(a.status).toBe(200);
      const lastId = a.events.at(-1)!.id!;
      expect(lastId).toMatch(/^\d+\.status$/);

      // While nobody listens: E17 confirms; the refund runs; the model waits for its last turn.
      await post(taskId, 'confirm', {
        confirmationId: status.status.pendingConfirmation!.id,
        argsHash: status.status.pendingConfirmation!.argsHash,
      });
      await service.stepper!.whenWaiting(taskId);

      // Second connection: from after the last id seen; drops right after the entry that changed the status (the
      // granted confirmation), before the status event that follows it.
      const changed = (events: SseEvent[]) =>
        events.at(-1)!.event !== 'status' && events.at(-1)!.data.status !== 'waiting_for_confirmation';
      const second = await listen(taskId, { lastEventId: lastId, until: changed }).done;
      const midId = second.events.at(-1)!.id!;
      expect(midId).toMatch(/^\d+$/);
      const third = listen(taskId, { lastEventId: midId });
      await post(taskId, 'next'); // the answer: done
      const c = await third.done;
      expect(c.events[0]).toMatchObject({ id: `${midId}.status`, event: 'status', data: { status: 'running' } });
      expect(c.events.at(-1)!.event).toBe('end');

      const received = [...a.events, ...second.events, ...c.events].filter((e) => e.id !== null);
      const ids = received.map((e) => e.id);
      expect(new Set(ids).size).toBe(ids.length);

      // The same events as one uninterrupted client of the finished task, and one per audit entry plus status changes.
      const whole = (await listen(taskId).done).events.filter((e) => e.id !== null);
      expect(ids).toEqual(whole.map((e) => e.id));
      const audit = await service.orchestrator.audit(taskId);
      expect(received.filter((e) => e.event !== 'status').map((e) => e.data.seq)).toEqual(
        audit.map((entry) => entry.seq),
      );
      expect(received.filter((e) => e.event === 'status').map((e) => e.data.status)).toEqual([
        'waiting_for_confirmation',
        'running',
        'done',
      ]);
      expect(
        received.find(
          (e) => e.event === 'confirmation' && (e.data as { entry?: { action?: string } }).entry?.action === 'granted',
        ),
      ).toBeDefined();
      expect(received.filter((e) => e.event === 'gate').length).toBeGreaterThan(5);
    },
    scaled(30_000),
  );

  it('ends open streams with a shutdown event when the server closes, instead of waiting for the clients', async () => {
    const taskId = await start();
    const watchers = [listen(taskId), listen(taskId, { lastEventId: '0' })];
    for (const watcher of watchers)
      await until(() => watcher.events.some((e) => e.event === 'status' || e.id !== null));
    // A page never leaves by itself: without the streams ending first, this close would wait on both forever.
    const closed = service.app.close().then(() => 'closed');
    const hung = new Promise((resolve) => setTimeout(resolve, scaled(10_000), 'still waiting on the streams'));
    expect(await Promise.race([closed, hung])).toBe('closed');
    for (const watcher of watchers) {
      const { events } = await watcher.done;
      // The client's EventSource reconnects (elsewhere) from its last id: the shutdown itself carries no id.
      expect(events.at(-1)).toEqual({ id: null, event: 'shutdown', data: { reason: 'server_closing' } });
      expect(events.filter((e) => e.event === 'end')).toEqual([]);
    }
  });

  it('refuses a Last-Event-ID it never sent, and one that is not an event id', async () => {
    const taskId = await start();
    const unknown = await listen(taskId, { lastEventId: '9999' }).done;
    expect(unknown.status).toBe(400);
    expect(JSON.parse(unknown.body)).toMatchObject({ code: 'unknown_event_id' });
    const garbage = await listen(taskId, { lastEventId: 'abc' }).done;
    expect(garbage.status).toBe(400);
    expect(JSON.parse(garbage.body)).toMatchObject({ code: 'invalid_last_event_id' });
  });

  it('streams nothing of the task to E99 or to another tenant', async () => {
    const taskId = await start();
    for (const user of ['E99', 'Z5']) {
      const response = await listen(taskId, { user }).done;
      expect(response.status).toBe(404);
      expect(JSON.parse(response.body)).toMatchObject({ code: 'task_not_found' });
      expect(response.events).toEqual([]);
    }
  });

  it('keeps streaming to an approver after their decision: they follow what it did, to the end', async () => {
    const { orchestrator } = fourEyesOrchestrator();
    const app = Fastify();
    await app.register(agentService, {
      orchestrator,
      authenticate: (request) =>
        DEMO_USERS[/^Bearer (\w+)$/.exec(request.headers.authorization ?? '')?.[1] ?? ''] ?? null,
      startRequest: demoStartRequest,
      pages: false,
    });
    try {
      const base = await app.listen({ port: 0, host: '127.0.0.1' });
      const { taskId, pendingConfirmation } = await orchestrator.run({
        principal: DEMO_USERS.E17!,
        goal: REFUND_GOAL,
        mandate: REFUND_MANDATE,
        success: REFUND_SUCCESS,
        limits: { money: 19_900 },
      });
      const seen = (await orchestrator.audit(taskId)).length;
      const approver = listen(taskId, { user: 'M1', origin: base });
      // The history is written at once: waiting for its last event (not a fixed delay) also catches a duplicate.
      await until(() => approver.events.filter((e) => e.id !== null).length >= seen + 1);
      expect(approver.events.filter((e) => e.id !== null)).toHaveLength(seen + 1); // the entries, and the status change to waiting
      const approved = await fetch(`${base}/api/tasks/${taskId}/confirm`, {
        method: 'POST',
        headers: { authorization: 'Bearer M1', 'content-type': 'application/json' },
        body: JSON.stringify({ confirmationId: pendingConfirmation!.id, argsHash: pendingConfirmation!.argsHash }),
      });
      expect(approved.status).toBe(200);
      const m1 = await approver.done;
      // Before, the stream ended `no_longer_visible` at the approval: the approver never saw the refund run.
      expect(m1.events.at(-1)).toMatchObject({ event: 'end', data: {} });
      expect(m1.events.some((e) => e.event === 'stop')).toBe(true);
      expect((await orchestrator.settled(taskId)).state).toBe('done');
      const e17 = (await listen(taskId, { origin: base }).done).events;
      expect(e17.at(-1)).toMatchObject({ event: 'end', data: {} });
      expect(m1.events.filter((e) => e.id !== null).map((e) => e.id)).toEqual(
        e17.filter((e) => e.id !== null).map((e) => e.id),
      );
    } finally {
      await app.close();
      await orchestrator.close();
    }
  });
});
