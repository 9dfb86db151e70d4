/**
 * One pass of the workers bench: `workers` worker processes (test/support/dispatchWorker.ts) on the bench's own
 * redis-server (or its Redis Cluster), a fresh key prefix and BullMQ queue, and an API orchestrator in this process that starts the tasks
 * (batches of 100 in parallel, as test/workers.process.test.ts does). Timed from the first start to the moment
 * every task is done (ZCARD of the prefix's done index); in that window: this process's CPU (process.cpuUsage) and
 * the redis-server's (INFO cpu). The workers' saves and CPU come from the STATS line each prints on SIGTERM.
 */
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { bullmqDispatch } from '../../src/dispatch/bullmqDispatch.js';
import { createOrchestrator } from '../../src/orchestrator/orchestrator.js';
import { redisBucketKeys } from '../../src/store/redis/redisKeys.js';
import { RedisStore } from '../../src/store/redis/redisStore.js';
import {
  type DispatchWorkerConfig,
  WORKLOAD_SUCCESS,
  workloadClients,
  workloadModel,
  workloadTools,
} from '../../test/support/dispatchWorker.js';
import type { Child, ChildPool } from '../../test/support/workers.js';
import { deleteMatching } from './measure.js';

export const WORKER_ENTRY = fileURLToPath(new URL('../../test/support/dispatchWorker.ts', import.meta.url));
const PRINCIPAL = { userId: 'u1', tenantId: 't1', scopes: [] };
const START_BATCH = 100;
const POLL_MS = 20;

/** What a dispatch worker prints on SIGTERM (test/support/dispatchWorker.ts). */
export interface WorkerStats {
  saves: number;
  cpuMicros: number;
  held: { live: number; leases: number };
}

/** Where a pass runs: the bench's redis-server, or the bench's Redis Cluster (its masters' ports, the store's buckets). */
export interface BenchTarget {
  redisUrl: string;
  cluster?: { ports: number[]; buckets: number };
  /** A client for the bench's own reads (a Cluster on a cluster), and one client per server for INFO and scans. */
  admin: Redis;
  nodes: Redis[];
}

export interface PassSettings {
  tasks: number;
  concurrency: number;
  /** How long a pass may take before the bench gives up (ms). */
  timeoutMs: number;
  /** How long each model turn waits in the workers (ms); 0: the model replies at once (the CPU-bound case). */
  modelLatencyMs: number;
  /** Tasks each worker drives by itself before READY, untimed (its code compiled before the clock starts). */
  workerWarmup: number;
}

export interface PassResult {
  pass: number;
  workers: number;
  tasks: number;
  concurrency: number;
  seconds: number;
  /** How long the API took to start every task (the first part of `seconds`), and how many were done by then. */
  startSeconds: number;
  doneWhenStarted: number;
  tasksPerSecond: number;
  /** A step is one acknowledged save of a worker (sum of STATS.saves). */
  steps: number;
  stepsPerSecond: number;
  stepsPerTask: number;
  savesPerWorker: number[];
  /** Sum of the workers' CPU (user + system, from READY to SIGTERM), µs. */
  workerCpuMicros: number;
  workerCpuUsPerStep: number;
  /** This process (the API orchestrator starting the tasks, and the done poll), µs, over the timed window. */
  apiCpuMicros: number;
  apiCpuUsPerStep: number;
  /** The bench's redis-server (INFO cpu used_cpu_sys + used_cpu_user), µs, over the timed window. */
  redisCpuMicros: number;
  redisCpuUsPerStep: number;
  /** The busiest server's share (on a cluster, the master that used the most CPU; else the server), µs per step. */
  redisBusiestCpuUsPerStep: number;
  /** On a cluster: whether the busiest master is the one that holds the BullMQ queue's slot; null on one server. */
  busiestHoldsQueue: boolean | null;
  /** Commands the redis-server ran in the window (INFO commandstats; commands inside Lua scripts count). */
  redisCommands: number;
  redisCommandsPerStep: number;
  /** (workers + API + Redis CPU) / (seconds x cores): how busy the machine was. */
  machineBusy: number;
  /** HLEN of the business records: one per task when nothing was lost or duplicated. */
  records: number;
  /** How often the write tool ran (a retry of a key already recorded runs it again, the record stays one). */
  executions: number;
  held: WorkerStats['held'][];
  warnings: string[];
}

interface RedisReading {
  cpuMicros: number;
  commands: number;
  /** Each server's CPU (µs), in the order of `nodes`. */
  perNode: number[];
}

/** The readings of every server, summed, with each server's CPU. */
async function readServers(nodes: Redis[]): Promise<RedisReading> {
  const readings = await Promise.all(nodes.map(readRedis));
  return {
    cpuMicros: readings.reduce((n, r) => n + r.cpuMicros, 0),
    commands: readings.reduce((n, r) => n + r.commands, 0),
    perNode: readings.map((r) => r.cpuMicros),
  };
}

/** The index in `nodes` of the master that serves `key`'s slot (CLUSTER KEYSLOT, then CLUSTER SLOTS), or -1. */
async function nodeOf(nodes: Redis[], key: string): Promise<number> {
  const slot = Number(await nodes[0]!.call('CLUSTER', 'KEYSLOT', key));
  const ranges = (await nodes[0]!.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, ...unknown[]]][];
  const port = ranges.find(([from, to]) => slot >= from && slot <= to)?.[2][1];
  return nodes.findIndex((node) => node.options.port === Number(port));
}

/** used_cpu_sys + used_cpu_user (µs) and the commands run so far, in one INFO call. */
async function readRedis(admin: Redis): Promise<Omit<RedisReading, 'perNode'>> {
  const info = await admin.info('cpu', 'commandstats');
  const seconds = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  let commands = 0;
  for (const match of info.matchAll(/cmdstat_\S+:calls=(\d+)/g)) commands += Number(match[1]);
  return { cpuMicros: (seconds('used_cpu_sys') + seconds('used_cpu_user')) * 1e6, commands };
}

export interface PassContext {
  pool: ChildPool;
  target: BenchTarget;
  settings: PassSettings;
  cores: number;
  progress: (text: string) => void;
}

/** Runs one pass; every key it made (its prefix, its queue) is deleted afterwards, every worker it spawned stopped. */
export async function runPass(
  ctx: PassContext,
  pass: number,
  workers: number,
  prefix: string,
  tasks = ctx.settings.tasks,
): Promise<PassResult> {
  const { pool, target, settings } = ctx;
  const { admin, nodes } = target;
  const config: DispatchWorkerConfig = {
    redisUrl: target.redisUrl,
    ...(target.cluster ? { cluster: target.cluster } : {}),
    prefix,
    queueName: `q-${prefix}`,
    concurrency: settings.concurrency,
    // The library's defaults (lease 15 s, BullMQ lock and stalled check 30 s): no take-over happens in a bench.
    leaseTtlMs: 15_000,
    lockDurationMs: 30_000,
    stalledIntervalMs: 30_000,
    modelLatencyMs: settings.modelLatencyMs,
    warmupTasks: settings.workerWarmup,
  };
  const clients = workloadClients(config);
  const store = new RedisStore({ client: clients.client, prefix, buckets: target.cluster?.buckets });
  const dispatch = bullmqDispatch({ ...clients.bullmq, queueName: config.queueName });
  const { tools, records, executions } = workloadTools(admin, prefix);
  const api = createOrchestrator({ tools, model: workloadModel(), store, dispatch, expirySweepMs: 0 });
  const children: Child[] = [];
  try {
    children.push(
      ...Array.from({ length: workers }, (_, i) =>
        pool.spawnTs(`${prefix}-worker-${i}`, WORKER_ENTRY, [JSON.stringify(config)]),
      ),
    );
    await Promise.all(children.map((child) => child.waitFor('READY', 60_000)));
    // Connections up before the clock starts.
    await Promise.all([dispatch.depth(), store.load('no-such-task')]);
    // The done index of every bucket (one, `{prefix}`, on a single server).
    const buckets = target.cluster?.buckets ?? 1;
    const doneKeys = Array.from({ length: buckets }, (_, i) => redisBucketKeys(prefix, i, buckets).state('done'));
    const done = async () => (await Promise.all(doneKeys.map((key) => admin.zcard(key)))).reduce((a, b) => a + b, 0);

    const redisBefore = await readServers(nodes);
    const cpuBefore = process.cpuUsage();
    const began = performance.now();
    for (let i = 0; i < tasks; i += START_BATCH) {
      await Promise.all(
        Array.from({ length: Math.min(START_BATCH, tasks - i) }, (_, k) =>
          api.start({
            principal: PRINCIPAL,
            goal: `acct-${i + k}`,
            success: WORKLOAD_SUCCESS,
            taskId: `task-${i + k}`,
          }),
        ),
      );
    }
    const startSeconds = (performance.now() - began) / 1000;
    const deadline = Date.now() + settings.timeoutMs;
    let doneCount = await done();
    const doneWhenStarted = doneCount;
    while (doneCount < tasks) {
      if (Date.now() > deadline) {
        throw new Error(
          `pass ${pass}, ${workers} worker(s): only ${doneCount} of ${tasks} tasks done after ${settings.timeoutMs} ms; queue ${JSON.stringify(await dispatch.depth())}`,
        );
      }
      const exited = children.find((child) => !child.running);
      if (exited) throw new Error(`pass ${pass}: ${exited.name} exited during the run\n${exited.stderr.slice(-2000)}`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      doneCount = await done();
    }
    const seconds = (performance.now() - began) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    const redisAfter = await readServers(nodes);

    for (const child of children) child.signal('SIGTERM');
    const stats = await Promise.all(
      children.map(
        async (child) => JSON.parse((await child.waitFor('STATS', 30_000)).slice('STATS '.length)) as WorkerStats,
      ),
    );
    await Promise.all(children.map((child) => child.ended(30_000)));

    const recordCount = await admin.hlen(records);
    const executionCount = Number((await admin.get(executions)) ?? 0);
    const steps = stats.reduce((sum, s) => sum + s.saves, 0);
    const workerCpuMicros = stats.reduce((sum, s) => sum + s.cpuMicros, 0);
    const apiCpuMicros = cpu.user + cpu.system;
    const redisCpuMicros = redisAfter.cpuMicros - redisBefore.cpuMicros;
    const perNode = redisAfter.perNode.map((after, i) => after - redisBefore.perNode[i]!);
    const redisBusiestMicros = Math.max(...perNode);
    const queueNode = target.cluster
      ? await nodeOf(nodes, `${clients.bullmq.prefix ?? 'bull'}:${config.queueName}`)
      : -1;
    // Less the INFO of the first reading (one per server).
    const redisCommands = redisAfter.commands - redisBefore.commands - nodes.length;
    const warnings: string[] = [];
    if (recordCount !== tasks) warnings.push(`business records ${recordCount} != tasks ${tasks}`);
    stats.forEach((s, i) => {
      if (s.held.live !== 0 || s.held.leases !== 0)
        warnings.push(`worker ${i} still held ${JSON.stringify(s.held)} when stopped`);
      if (s.saves === 0) warnings.push(`worker ${i} made no save`);
    });
    const perStep = (micros: number) => (steps > 0 ? micros / steps : Number.NaN);
    return {
      pass,
      workers,
      tasks,
      concurrency: settings.concurrency,
      seconds,
      startSeconds,
      doneWhenStarted,
      tasksPerSecond: tasks / seconds,
      steps,
      stepsPerSecond: steps / seconds,
      stepsPerTask: steps / tasks,
      savesPerWorker: stats.map((s) => s.saves),
      workerCpuMicros,
      workerCpuUsPerStep: perStep(workerCpuMicros),
      apiCpuMicros,
      apiCpuUsPerStep: perStep(apiCpuMicros),
      redisCpuMicros,
      redisCpuUsPerStep: perStep(redisCpuMicros),
      redisBusiestCpuUsPerStep: perStep(redisBusiestMicros),
      busiestHoldsQueue: target.cluster ? perNode[queueNode] === redisBusiestMicros : null,
      redisCommands,
      redisCommandsPerStep: steps > 0 ? redisCommands / steps : Number.NaN,
      machineBusy: (workerCpuMicros + apiCpuMicros + redisCpuMicros) / (seconds * 1e6 * ctx.cores),
      records: recordCount,
      executions: executionCount,
      held: stats.map((s) => s.held),
      warnings,
    };
  } finally {
    // A worker that did not stop (an error above): SIGKILL by pid.
    await Promise.all(children.filter((child) => child.running).map((child) => child.kill().catch(() => undefined)));
    await api.close().catch(() => {});
    await dispatch.close().catch(() => {});
    await store.close().catch(() => {});
    clients.client.disconnect();
    (clients.bullmq.connection as { disconnect?: () => void }).disconnect?.();
    // Also the keys of a bucketed store ({prefix{<n>}:…), on every server.
    for (const node of nodes) {
      await deleteMatching(node, `{${prefix}[}{]*`).catch(() => 0);
      await deleteMatching(node, `{${prefix}-warm-*`).catch(() => 0);
      await deleteMatching(node, `${clients.bullmq.prefix ?? 'bull'}:${config.queueName}:*`).catch(() => 0);
    }
  }
}
