/**
 * A worker process for the dispatch tests and bench: an orchestrator on a RedisStore with a BullMQ dispatch, driving
 * the workload "one read, one idempotent write, an answer" with `concurrency` jobs at a time. The write keeps its
 * business records in Redis (one per idempotency key, with the task it was made for), so records and duplicates can
 * be counted across processes, also after a kill -9.
 *
 * Prints `READY` once it takes jobs; on SIGTERM it prints `STATS <json>` (saves, CPU, what it still holds, the live
 * text counts), drains and exits. Run: node --import tsx test/support/dispatchWorker.ts '<DispatchWorkerConfig JSON>'
 */
import { setTimeout } from 'node:timers/promises';
import type { ConnectionOptions } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import { z } from 'zod';
import { bullmqDispatch } from '../../src/dispatch/bullmqDispatch.js';
import type { AgentModel } from '../../src/model/agentModel.js';
import { createOrchestrator } from '../../src/orchestrator/orchestrator.js';
import { RedisStore } from '../../src/store/redis/redisStore.js';
import { reply, scriptedModel } from '../../src/testing/scriptedModel.js';
import { defineTool } from '../../src/tool.js';

export interface DispatchWorkerConfig {
  redisUrl: string;
  prefix: string;
  queueName: string;
  concurrency: number;
  /** Lease TTL (ms); a killed worker's tasks are taken over after about this plus the stalled-job check. */
  leaseTtlMs: number;
  lockDurationMs: number;
  stalledIntervalMs: number;
  /** On a Redis Cluster: the ports of its masters on 127.0.0.1 (then `redisUrl` is unused), and the store's buckets. */
  cluster?: { ports: number[]; buckets: number };
  /** How long each model turn waits before it replies (ms), as a remote model would; 0 or absent: replies at once. */
  modelLatencyMs?: number;
  /**
   * Tasks this process drives by itself before it prints READY (no dispatch, the model without latency, on the keys
   * of `<prefix>-warm-<pid>`, left for the caller to delete), so that compiling the code paths is not measured. 0 or
   * absent: none.
   */
  warmupTasks?: number;
  /**
   * When set, the model answers every task with this text at once, streaming it first (`onText`, pieces of 4
   * characters `streamGapMs` apart, default 10), as a streaming adapter does: for the live text across processes.
   */
  streamAnswer?: string;
  streamGapMs?: number;
}

/** The clients a worker (or the bench's API) uses: the store's and the tools', and BullMQ's connection. */
export function workloadClients(config: Pick<DispatchWorkerConfig, 'redisUrl' | 'cluster'>): {
  client: Redis;
  bullmq: { connection: ConnectionOptions; prefix?: string };
} {
  if (config.cluster) {
    const nodes = config.cluster.ports.map((port) => ({ host: '127.0.0.1', port }));
    const client = new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: 2 }, enableAutoPipelining: true });
    // BullMQ wants no bound on retries per request, and its keys under one hash tag on a cluster.
    const connection = new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null } });
    return { client: client as unknown as Redis, bullmq: { connection, prefix: '{bull}' } };
  }
  const url = new URL(config.redisUrl);
  return {
    client: new Redis(config.redisUrl, { maxRetriesPerRequest: 2 }),
    bullmq: { connection: { host: url.hostname, port: Number(url.port) } },
  };
}

/** What a workload task succeeds by: the write's record, with its id. */
export const WORKLOAD_SUCCESS = { tool: 'record_payment', require: ['id'] };

/** The workload's tools over Redis: a read, and a write whose records are keyed by idempotency key. */
export function workloadTools(client: Redis, prefix: string) {
  const records = `{${prefix}}:business:records`;
  const executions = `{${prefix}}:business:executions`;
  const read = defineTool({
    name: 'read_account',
    description: 'reads the account',
    effect: 'read',
    scopes: [],
    timeoutMs: 5_000,
    input: z.strictObject({ account: z.string() }),
    output: z.strictObject({ account: z.string(), balance: z.number(), note: z.string() }),
    async execute({ account }) {
      return { ok: true, value: { account, balance: 1_200, note: 'x'.repeat(160) } };
    },
  });
  const write = defineTool({
    name: 'record_payment',
    description: 'records a payment once per idempotency key',
    effect: 'write',
    scopes: [],
    timeoutMs: 5_000,
    sameKeyRetrySafe: true,
    // The workload's own ledger, which moves no money: its tests are about delivery, not about asking.
    confirm: { never: "the workload's own ledger record; the tests measure delivery, not asking" },
    input: z.strictObject({ account: z.string(), amount: z.number() }),
    output: z.strictObject({ id: z.string() }),
    async execute({ account }, { idempotencyKey }) {
      await client.multi().hsetnx(records, idempotencyKey, account).incr(executions).exec();
      return { ok: true, value: { id: idempotencyKey } };
    },
    async lookup(idempotencyKey) {
      return (await client.hexists(records, idempotencyKey))
        ? { found: true, value: { id: idempotencyKey } }
        : { found: false };
    },
  });
  return { tools: [read, write], records, executions };
}

/**
 * The workload's model: read, write, answer. With `latencyMs` > 0 every turn first waits that long (a timer, no CPU,
 * aborted with the turn), so a worker's throughput is bound by the model's latency, as with a remote model.
 */
export function workloadModel(latencyMs = 0): AgentModel {
  const script = scriptedModel([
    (v) => reply.call('read_account', { account: v.goal }),
    (v) => reply.call('record_payment', { account: v.goal, amount: 10 }),
    reply.answer('recorded'),
  ]);
  if (latencyMs <= 0) return script;
  return {
    name: script.name,
    reservation: script.reservation,
    async decide(request) {
      await setTimeout(latencyMs, undefined, { signal: request.signal });
      return script.decide(request);
    },
  };
}

/** A model that streams `text` to `onText` in pieces of 4 characters, `gapMs` apart, then answers it whole. */
export function streamingAnswerModel(text: string, gapMs = 10): AgentModel {
  return {
    name: 'streaming-answer',
    reservation: { tokens: 1_000, costMicros: 0 },
    async decide(request) {
      for (const piece of text.match(/[\s\S]{1,4}/g) ?? []) {
        await setTimeout(gapMs, undefined, { signal: request.signal });
        request.onText?.(piece);
      }
      return { type: 'answer', text, usage: { inputTokens: 10, outputTokens: 10 } };
    },
  };
}

/** Drives `tasks` workload tasks here, `concurrency` at a time, on a store of their own; see `warmupTasks`. */
async function warmUp(config: DispatchWorkerConfig, client: Redis, tasks: number): Promise<void> {
  const prefix = `${config.prefix}-warm-${process.pid}`;
  const store = new RedisStore({ client, prefix, buckets: config.cluster?.buckets });
  const orchestrator = createOrchestrator({
    tools: workloadTools(client, prefix).tools,
    model: workloadModel(),
    store,
    expirySweepMs: 0,
  });
  const principal = { userId: 'warm-up', tenantId: 'warm-up', scopes: [] };
  for (let i = 0; i < tasks; i += config.concurrency) {
    await Promise.all(
      Array.from({ length: Math.min(config.concurrency, tasks - i) }, async (_, k) => {
        const started = await orchestrator.start({ principal, goal: `warm-${i + k}`, success: WORKLOAD_SUCCESS });
        const done = await orchestrator.settled(started.taskId);
        if (done.state !== 'done') throw new Error(`warm-up task ${started.taskId} ended ${done.state}`);
      }),
    );
  }
  await orchestrator.close();
  await store.close();
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as DispatchWorkerConfig;
  const { client, bullmq } = workloadClients(config);
  if ((config.warmupTasks ?? 0) > 0) await warmUp(config, client, config.warmupTasks!);
  const store = new RedisStore({ client, prefix: config.prefix, buckets: config.cluster?.buckets });
  const dispatch = bullmqDispatch({
    ...bullmq,
    queueName: config.queueName,
    lockDurationMs: config.lockDurationMs,
    stalledIntervalMs: config.stalledIntervalMs,
    retryDelayMs: 200,
    onError: (error) => process.stderr.write(`dispatch: ${error.message}\n`),
  });
  const { tools } = workloadTools(client, config.prefix);
  const orchestrator = createOrchestrator({
    tools,
    model:
      config.streamAnswer === undefined
        ? workloadModel(config.modelLatencyMs)
        : streamingAnswerModel(config.streamAnswer, config.streamGapMs),
    store,
    dispatch,
    lease: { ttlMs: config.leaseTtlMs },
    expirySweepMs: 0,
  });
  let saves = 0;
  orchestrator.onSaved(() => (saves += 1));
  orchestrator.createWorker({ concurrency: config.concurrency });
  const cpuStart = process.cpuUsage();
  process.stdout.write('READY\n');
  let stopping = false;
  process.on('SIGTERM', () => {
    if (stopping) return;
    stopping = true;
    void (async () => {
      const cpu = process.cpuUsage(cpuStart);
      // What it holds when asked to stop: with every task at rest, nothing. The caller stops the worker as soon as the
      // last task's final save is in Redis, which can be just before this process let that task and its lease go: a
      // leak is what is still held a second later.
      let held = orchestrator.inFlight();
      for (let waited = 0; (held.live > 0 || held.leases > 0) && waited < 1_000; waited += 20) {
        await setTimeout(20);
        held = orchestrator.inFlight();
      }
      process.stdout.write(
        `STATS ${JSON.stringify({ saves, cpuMicros: cpu.user + cpu.system, held, live: store.liveMessages.counts })}\n`,
      );
      await orchestrator.drain({ timeoutMs: 5_000 });
      await dispatch.close();
      await store.close();
      client.disconnect();
      (bullmq.connection as { disconnect?: () => void }).disconnect?.();
      process.exit(0);
    })().catch((error: unknown) => {
      process.stderr.write(`stopping failed: ${String(error)}\n`);
      process.exit(1);
    });
  });
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) void main();
