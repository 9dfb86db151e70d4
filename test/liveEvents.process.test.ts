/**
 * Live events across processes. A worker process drives a task on Redis, one model turn at a time; an API instance
 * in the test process (another process, on the same prefix) serves its event stream. Its store is polled only every
 * 60 s here, so every event that arrives in time came by the store's notifications (pub/sub from the save script):
 * - the client receives every entry, in journal order, once, each within a fraction of the default 2 s poll (the
 *   latency from the save's acknowledgment in the worker to the event's arrival is measured and printed);
 * - a client that disconnects mid-task and reconnects with Last-Event-ID gets exactly the rest;
 * - a task whose worker dies and which another worker takes over keeps streaming, without gap or duplicate.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { agentService } from '../src/http/index.js';
import { type Orchestrator, createOrchestrator } from '../src/orchestrator/orchestrator.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { E17 } from './support/harness.js';
import { pacedModel, pacedRead } from './support/livePaced.js';
import { type TestRedis, useTestRedis } from './support/redis.js';
import { type ReceivedEvent, openTaskEvents } from './support/sseClient.js';
import { scaled } from './support/timeScale.js';
import { type Child, ChildPool } from './support/workers.js';

const redis: TestRedis | null = await useTestRedis();
const LIVE_WORKER = new URL('./support/liveWorker.ts', import.meta.url).pathname;
const STEPS = 4;
/** Scaled: a worker keeps its lease (renewed every TTL/3) while the test steps it, also on a loaded machine. */
const TTL_MS = scaled(1_000);

describe.skipIf(!redis)('live events across processes (Redis)', () => {
  const pool = new ChildPool();
  const prefix = redis?.freshPrefix() ?? 'none';
  let store: RedisStore;
  let orchestrator: Orchestrator;
  let app: FastifyInstance;
  let origin: string;
  const latencies: number[] = [];

  beforeAll(async () => {
    store = new RedisStore({ url: redis!.url, prefix });
    // Serves the stream only: it drives nothing, and takes nothing over.
    orchestrator = createOrchestrator({
      tools: [pacedRead().tool],
      model: pacedModel(STEPS),
      store,
      expirySweepMs: 0,
      orphanSweepMs: 0,
    });
    app = Fastify();
    await agentService(app, {
      orchestrator,
      authenticate: (request) => (request.headers.authorization === 'Bearer E17' ? E17 : null),
      startRequest: () => {
        throw new Error('tasks are started by the worker processes here');
      },
      pages: false,
      // Polled once a minute at most: an event that arrives sooner came by notification.
      sse: { pollMs: 60_000, livePollMs: 60_000 },
    });
    origin = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterEach(() => pool.killAll());
  afterAll(async () => {
    await app?.close();
    await orchestrator?.close();
    await store?.close();
    await redis?.deleteKeys(prefix);
    await redis?.stop();
    if (latencies.length > 0) {
      const sorted = [...latencies].sort((a, b) => a - b);
      const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
      console.log(
        `live event latency, save acknowledged in a worker -> event at the SSE client of another process: ` +
          `n=${sorted.length} median ${at(0.5)} ms, p90 ${at(0.9)} ms, max ${sorted.at(-1)} ms`,
      );
    }
  });

  function worker(name: string, sweepMs?: number): Child {
    return pool.spawnTs(name, LIVE_WORKER, [
      JSON.stringify({ url: redis!.url, prefix, ttlMs: TTL_MS, steps: STEPS, ...(sweepMs ? { sweepMs } : {}) }),
    ]);
  }

  function send(child: Child, line: string): void {
    child.process.stdin!.write(`${line}\n`);
  }

  /** Releases reads `from`..`to` (this worker's numbering) of `taskId`, waiting for each next read to start. */
  async function step(child: Child, taskId: string, from: number, to: number, last = false): Promise<void> {
    for (let n = from; n <= to; n++) {
      send(child, 'step');
      if (!(last && n === to)) await child.waitFor(`READING ${taskId} ${n + 1}`);
    }
  }

  /** Every event of the task, read from the start once it has ended: what each client must have got. */
  async function reference(taskId: string): Promise<string[]> {
    const stream = openTaskEvents(origin, taskId, { token: 'E17' });
    await stream.done;
    expect(stream.events.at(-1)?.event).toBe('end');
    return ids(stream.events);
  }

  /** Records, for each entry that arrived after it was saved, the time from the save's acknowledgment to arrival. */
  function measure(children: Child[], taskId: string, events: ReceivedEvent[], openedAt: number): number[] {
    const saves = children
      .flatMap((child) => child.lines.filter((line) => line.startsWith(`SAVED ${taskId} `)))
      .map((line) => line.split(' ').map(Number))
      .map(([, , audit, at]) => ({ audit: audit!, at: at! }))
      .sort((a, b) => a.audit - b.audit);
    const measured: number[] = [];
    for (const event of events) {
      const seq = event.data.seq;
      if (event.id === null || event.id.includes('.') || seq === undefined) continue;
      const save = saves.find((s) => s.audit > seq);
      if (!save || save.at < openedAt) continue;
      measured.push(event.at - save.at);
    }
    latencies.push(...measured);
    return measured;
  }

  it('streams every entry of a task another process drives, in order, once, well within the poll', async () => {
    const a = worker('worker A');
    await a.waitFor('READY');
    send(a, 'start live-1');
    await a.waitFor('READING live-1 1');
    const openedAt = Date.now();
    const stream = openTaskEvents(origin, 'live-1', { token: 'E17' });
    await step(a, 'live-1', 1, STEPS, true);
    await raceTimeout(stream.done, scaled(10_000), 'the stream did not end after the task did');

    const audit = await orchestrator.audit('live-1');
    const entries = stream.events.filter((e) => e.id !== null && !e.id.includes('.'));
    expect(entries.map((e) => e.data.seq)).toEqual(audit.map((r) => r.seq));
    expect(stream.events.at(-1)?.event).toBe('end');
    expect(ids(stream.events)).toEqual(await reference('live-1'));
    const measured = measure([a], 'live-1', stream.events, openedAt);
    expect(measured.length).toBeGreaterThan(STEPS);
    // The default poll is every 2 s; this instance polls once a minute: these came by notification.
    expect(Math.max(...measured)).toBeLessThan(scaled(500));
  });

  it('resumes a client that reconnects mid-task with Last-Event-ID: no gap, no duplicate', async () => {
    const a = worker('worker A');
    await a.waitFor('READY');
    send(a, 'start live-2');
    await a.waitFor('READING live-2 1');
    const first = openTaskEvents(origin, 'live-2', { token: 'E17' });
    await step(a, 'live-2', 1, 1);
    await until(() => first.events.some((e) => e.event === 'tool' && e.data.seq !== undefined && e.data.seq > 3));
    first.close();
    // Two turns while nobody listens.
    await step(a, 'live-2', 2, 3);
    const lastId = first.events.filter((e) => e.id !== null).at(-1)!.id!;
    const openedAt = Date.now();
    const second = openTaskEvents(origin, 'live-2', { token: 'E17', lastEventId: lastId });
    await step(a, 'live-2', 4, STEPS, true);
    await raceTimeout(second.done, scaled(10_000), 'the resumed stream did not end after the task did');

    expect(second.events.at(-1)?.event).toBe('end');
    expect([...ids(first.events), ...ids(second.events)]).toEqual(await reference('live-2'));
    measure([a], 'live-2', second.events, openedAt);
  });

  it('keeps streaming a task that another worker takes over after the first one died', async () => {
    const a = worker('worker A');
    // B sweeps for orphans: it takes the task over once A's lease expired, with no call from the test.
    const b = worker('worker B', 200);
    await Promise.all([a.waitFor('READY'), b.waitFor('READY')]);
    send(a, 'start live-3');
    await a.waitFor('READING live-3 1');
    const openedAt = Date.now();
    const stream = openTaskEvents(origin, 'live-3', { token: 'E17' });
    await step(a, 'live-3', 1, 1);
    // A dies with read 2 in flight; B runs it again (its own read 1) once the lease expired.
    await a.kill();
    await b.waitFor('READING live-3 1', 10_000);
    const beforeB = stream.events.length;
    await step(b, 'live-3', 1, STEPS - 1, true);
    await raceTimeout(stream.done, scaled(10_000), 'the stream did not end after the task did');

    expect(b.lines.some((line) => line.startsWith('SAVED live-3 '))).toBe(true);
    expect(stream.events.length).toBeGreaterThan(beforeB);
    expect(stream.events.at(-1)?.event).toBe('end');
    const all = ids(stream.events);
    expect(new Set(all).size).toBe(all.length);
    expect(all).toEqual(await reference('live-3'));
    const measured = measure([a, b], 'live-3', stream.events, openedAt);
    expect(Math.max(...measured)).toBeLessThan(scaled(500));
  });
});

/** The ids of the events that have one (entries and their status events), in arrival order. */
function ids(events: ReceivedEvent[]): string[] {
  return events.flatMap((e) => (e.id === null ? [] : [e.id]));
}

async function until(condition: () => boolean, timeoutMs = scaled(10_000)): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function raceTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
