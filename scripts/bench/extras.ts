/**
 * The bench's measurements outside the cells: resume of a parked K-round task (this project and the bare loop),
 * memory of tasks waiting for a confirmation, and a bare SET round trip for scale.
 */
import { z } from 'zod';
import { createOrchestrator, defineTool } from '../../src/index.js';
import { RedisStore } from '../../src/redis.js';
import { reply } from '../../src/testing/index.js';
import { BareLoop } from './bareLoop.js';
import type { RedisLink } from './cell.js';
import { deleteMatching, fullGc, quantile } from './measure.js';
import { LOCAL_API, type ProjectApi } from './projectApi.js';
import { BENCH_PRINCIPAL, parkTask, projectOptions } from './workload.js';

export interface ResumeFigures {
  /** Rounds the parked task had when it was parked. */
  rounds: number;
  samples: number;
  p50Ms: number;
  p99Ms: number;
}

/** Resumes before the first sample, which pay for the restore path's first compilation. */
const WARM_UP = 5;

export function resumeFigures(rounds: number, times: readonly number[]): ResumeFigures {
  return { rounds, samples: times.length, p50Ms: quantile(times, 0.5), p99Ms: quantile(times, 0.99) };
}

/** A parked task of one system, resumed on demand: `sample(n)` gives n resume times in ms. */
export interface Resumable {
  readonly rounds: number;
  sample(count: number): Promise<number[]>;
  close(): Promise<void>;
}

/**
 * This project: a task of `k` rounds whose next model call hangs, left by a closed orchestrator (at rest, in
 * flight). A sample creates an orchestrator, `resume`s the task and times to the first acknowledged save; then the
 * task plays on to its next model call, which hangs again, and the orchestrator is closed. So each sample resumes
 * a task one round longer, and nothing of it runs between samples.
 */
export async function parkProjectTask(
  link: RedisLink,
  prefix: string,
  k: number,
  api: ProjectApi = LOCAL_API,
): Promise<Resumable> {
  // The model is called only once the state before it is durable: from there on the task rests, in flight.
  const task = await parkTask(new api.RedisStore({ client: link.client, prefix }), k, api);
  const once = async () => {
    let start = 0;
    let end = 0;
    await task.resumeOnce({ started: () => (start = performance.now()), saved: () => (end = performance.now()) });
    return end - start;
  };
  for (let i = 0; i < WARM_UP; i++) await once();
  return {
    rounds: k,
    async sample(count) {
      const times: number[] = [];
      for (let i = 0; i < count; i++) times.push(await once());
      return times;
    },
    close: async () => {
      await deleteMatching(link.admin, `{${prefix}}:*`);
    },
  };
}

/**
 * The bare loop: a task of `k` rounds parked in front of its answer. A sample reads the snapshot, restores the
 * actor and times to its first acknowledged save (the answer's), then puts the parked state back.
 */
export async function parkBareTask(link: RedisLink, prefix: string, k: number): Promise<Resumable> {
  const loop = new BareLoop(link.client, prefix);
  const key = loop.snapshotKey('resume');
  const stop = await loop.park('resume', k);
  stop();
  const stored = await link.admin.hgetall(key);
  const once = async () => {
    const start = performance.now();
    const resumed = await loop.resume('resume');
    const ms = resumed.firstSaveAt - start;
    resumed.stop();
    await link.admin.hset(key, stored);
    await link.admin.rpop(loop.historyKey('resume'));
    return ms;
  };
  for (let i = 0; i < WARM_UP; i++) await once();
  return {
    rounds: k,
    async sample(count) {
      const times: number[] = [];
      for (let i = 0; i < count; i++) times.push(await once());
      return times;
    },
    close: async () => {
      await deleteMatching(link.admin, `${loop.root}:*`);
    },
  };
}

/** A write that always needs a confirmation: tasks proposing it wait. */
const hold = defineTool({
  name: 'hold',
  description: 'a write that needs a confirmation',
  effect: 'write',
  scopes: ['bench:read'],
  timeoutMs: 5_000,
  sameKeyRetrySafe: true,
  confirm: 'always',
  input: z.strictObject({ n: z.number().int() }),
  output: z.strictObject({ n: z.number().int() }),
  execute: async ({ n }) => ({ ok: true, value: { n } }),
  lookup: async () => ({ found: false as const }),
});

export interface WaitingFigures {
  tasks: number;
  redisBytesPerTask: number;
  heapBytesPerTask: number;
  rssBytesPerTask: number;
}

/** `count` tasks that end up waiting for a confirmation: Redis and Node memory per task, after a warm-up batch. */
export async function waitingTasks(link: RedisLink, prefix: string, count: number): Promise<WaitingFigures> {
  const base = projectOptions(new RedisStore({ client: link.client, prefix }));
  const orchestrator = createOrchestrator({
    ...base,
    tools: [...base.tools, hold],
    model: { ...base.model, decide: () => Promise.resolve(reply.call('hold', { n: 1 }, 'c1')) },
  });
  const startWaiting = async (from: number, n: number) => {
    for (let i = from; i < from + n; i += 200) {
      const ids = Array.from({ length: Math.min(200, from + n - i) }, (_, j) => `wait-${i + j}`);
      const settled = await Promise.all(
        ids.map((taskId) => orchestrator.run({ principal: BENCH_PRINCIPAL, goal: 'wait', taskId })),
      );
      if (settled.some((s) => s.state !== 'waiting_for_confirmation')) throw new Error('a bench task did not wait');
    }
  };
  try {
    const warmUp = Math.max(1, Math.floor(count / 5));
    await startWaiting(0, warmUp); // compiled code, pools and caches exist before the baseline
    const redisBefore = await usedMemory(link);
    const nodeBefore = await settledMemory();
    await startWaiting(warmUp, count);
    const redisAfter = await usedMemory(link);
    const nodeAfter = await settledMemory();
    return {
      tasks: count,
      redisBytesPerTask: (redisAfter - redisBefore) / count,
      heapBytesPerTask: (nodeAfter.heapUsed - nodeBefore.heapUsed) / count,
      rssBytesPerTask: (nodeAfter.rss - nodeBefore.rss) / count,
    };
  } finally {
    await orchestrator.close();
    await deleteMatching(link.admin, `{${prefix}}:*`);
  }
}

/** Sequential SETs of `bytes` bytes: the round trip every save pays at least, for scale. */
export async function bareSetRoundTripUs(
  link: RedisLink,
  prefix: string,
  bytes: number,
  count: number,
): Promise<number> {
  const key = `{${prefix}}:bare-set`;
  const payload = 'x'.repeat(bytes);
  try {
    for (let i = 0; i < 200; i++) await link.client.set(key, payload);
    const start = performance.now();
    for (let i = 0; i < count; i++) await link.client.set(key, payload);
    return ((performance.now() - start) * 1000) / count;
  } finally {
    await link.admin.unlink(key);
  }
}

async function usedMemory(link: RedisLink): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await link.admin.info('memory'))![1]);
}

/** Memory after full collections (and a pause for pending callbacks to drop their references). */
async function settledMemory(): Promise<NodeJS.MemoryUsage> {
  for (let i = 0; i < 4; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    fullGc();
  }
  return process.memoryUsage();
}
