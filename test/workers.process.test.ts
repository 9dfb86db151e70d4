/**
 * Many worker processes on one Redis, dispatched by BullMQ (each test starts its own redis-server on a free port and
 * stops it by pid). 1, 2 and 4 workers drive scripted tasks (one read, one idempotent write, an answer) that an API
 * instance in this process started: every task done, business records equal distinct idempotency keys, one per task,
 * no lease left, no settled task held. Then kill -9 of a worker mid-run: its running tasks and the jobs it had taken
 * finish elsewhere, none twice.
 *
 * `npm test` drives 500 tasks a case: ten batches of the API's starts, each worker's 50 jobs at once taken several
 * times over, and at the kill the victim holds up to 50 running tasks and the jobs it took (it is killed once 100
 * are done, with 400 to go). `npm run test:full` drives 2,000 (WORKERS_TEST_TASKS sets any other count).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { bullmqDispatch } from '../src/dispatch/bullmqDispatch.js';
import { createOrchestrator, type Orchestrator } from '../src/orchestrator/orchestrator.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { type DispatchWorkerConfig, WORKLOAD_SUCCESS, workloadModel, workloadTools } from './support/dispatchWorker.js';
import { type RedisServer, startRedisServer } from './support/redis.js';
import { type Child, ChildPool } from './support/workers.js';
import { scaled } from './support/timeScale.js';

const WORKER = fileURLToPath(new URL('./support/dispatchWorker.ts', import.meta.url));
const TASKS = Number(process.env.WORKERS_TEST_TASKS ?? 500);
const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;
const principal = { userId: 'u1', tenantId: 't1', scopes: [] };

interface Stats {
  saves: number;
  cpuMicros: number;
  held: { live: number; leases: number };
}

describe.skipIf(!hasRedisServer && process.env.CI !== 'true')(
  'worker processes on one Redis, dispatched by BullMQ',
  () => {
    let server: RedisServer;
    let admin: Redis;
    const pool = new ChildPool();
    const closers: (() => Promise<unknown>)[] = [];
    let run = 0;

    beforeAll(async () => {
      expect(hasRedisServer, 'CI=true needs redis-server on PATH').toBe(true);
      server = await startRedisServer();
      admin = new Redis(server.url, { maxRetriesPerRequest: 2 });
    });
    afterEach(async () => {
      await pool.killAll();
      for (const close of closers.splice(0).reverse()) await close().catch(() => {});
    });
    afterAll(async () => {
      admin?.disconnect();
      await server?.stop();
    });

    /** A fresh prefix and queue; the API orchestrator (no worker) in this process; workers spawned on demand. */
    function deployment() {
      run += 1;
      const prefix = `workers-${run}`;
      const config: DispatchWorkerConfig = {
        redisUrl: server.url,
        prefix,
        queueName: `q-${prefix}`,
        concurrency: 50,
        // Scaled: a busy worker must keep its leases and job locks on a loaded machine too.
        leaseTtlMs: scaled(2_000),
        lockDurationMs: scaled(2_000),
        stalledIntervalMs: 1_000,
      };
      const url = new URL(server.url);
      const store = new RedisStore({ url: server.url, prefix });
      const dispatch = bullmqDispatch({
        connection: { host: url.hostname, port: Number(url.port) },
        queueName: config.queueName,
      });
      const client = new Redis(server.url, { maxRetriesPerRequest: 2 });
      const { tools, records, executions } = workloadTools(client, prefix);
      const api: Orchestrator = createOrchestrator({
        tools,
        model: workloadModel(),
        store,
        dispatch,
        expirySweepMs: 0,
      });
      closers.push(async () => {
        await api.close();
        await dispatch.close();
        await store.close();
        client.disconnect();
      });
      const spawnWorker = async (name: string): Promise<Child> => {
        const child = pool.spawnTs(name, WORKER, [JSON.stringify(config)]);
        await child.waitFor('READY', 30_000);
        return child;
      };
      const startAll = async () => {
        for (let i = 0; i < TASKS; i += 100) {
          await Promise.all(
            Array.from({ length: Math.min(100, TASKS - i) }, (_, k) =>
              api.start({ principal, goal: `acct-${i + k}`, success: WORKLOAD_SUCCESS, taskId: `task-${i + k}` }),
            ),
          );
        }
      };
      const done = () => admin.zcard(`{${prefix}}:index:state:done`);
      const allDone = async (quietTimeoutMs: number) => {
        const timeoutMs = scaled(quietTimeoutMs);
        const deadline = Date.now() + timeoutMs;
        while ((await done()) < TASKS) {
          if (Date.now() > deadline)
            throw new Error(
              `only ${await done()} of ${TASKS} tasks done after ${timeoutMs} ms; queue ${JSON.stringify(await dispatch.depth())}`,
            );
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      };
      /** Business records: one per distinct idempotency key; and per task (a duplicate side effect is a second one). */
      const business = async () => {
        const all = await admin.hgetall(records);
        const perTask = new Map<string, number>();
        for (const account of Object.values(all)) perTask.set(account, (perTask.get(account) ?? 0) + 1);
        return {
          keys: Object.keys(all).length,
          tasks: perTask.size,
          duplicated: [...perTask.values()].filter((n) => n > 1).length,
          executions: Number(await admin.get(executions)),
        };
      };
      const leasesLeft = async () => (await admin.keys(`{${prefix}}:lease:*`)).length;
      const stop = async (child: Child): Promise<Stats> => {
        child.signal('SIGTERM');
        const line = await child.waitFor('STATS', scaled(20_000));
        // STATS comes before the drain: the worker's last jobs end while it drains, so wait for it to exit.
        await child.ended(scaled(20_000));
        return JSON.parse(line.slice('STATS '.length)) as Stats;
      };
      return { spawnWorker, startAll, allDone, business, leasesLeft, stop, done, dispatch };
    }

    it.each([1, 2, 4])(
      '%i worker(s): every task done once, no lease left, no settled task held',
      async (workers) => {
        const d = deployment();
        const children = await Promise.all(Array.from({ length: workers }, (_, i) => d.spawnWorker(`worker-${i}`)));
        const began = Date.now();
        await d.startAll();
        await d.allDone(180_000);
        const seconds = (Date.now() - began) / 1_000;
        const stats = await Promise.all(children.map((child) => d.stop(child)));
        const business = await d.business();
        console.log(
          `${workers} worker(s): ${TASKS} tasks in ${seconds.toFixed(1)} s (${(TASKS / seconds).toFixed(0)} tasks/s), saves ${stats.map((s) => s.saves).join('/')}`,
        );
        expect(business).toMatchObject({ keys: TASKS, tasks: TASKS, duplicated: 0 });
        expect(await d.leasesLeft()).toBe(0);
        for (const s of stats) expect(s.held).toEqual({ live: 0, leases: 0 });
        // Every worker took part.
        for (const s of stats) expect(s.saves).toBeGreaterThan(0);
        expect(await d.dispatch.depth()).toMatchObject({ waiting: 0, active: 0 });
      },
      scaled(300_000),
    );

    it(
      'kill -9 of a worker mid-run: its running and not-yet-started tasks finish elsewhere, none twice',
      async () => {
        const d = deployment();
        const victim = await d.spawnWorker('victim');
        const survivor = await d.spawnWorker('survivor');
        await d.startAll();
        while ((await d.done()) < TASKS / 5) await new Promise((resolve) => setTimeout(resolve, 20));
        await victim.kill();
        const atKill = await d.done();
        const late = await d.spawnWorker('late');
        await d.allDone(180_000);
        const stats = await Promise.all([d.stop(survivor), d.stop(late)]);
        const business = await d.business();
        console.log(
          `kill -9 at ${atKill} of ${TASKS} done; records ${business.keys}, executions ${business.executions}`,
        );
        expect(atKill).toBeLessThan(TASKS);
        expect(business).toMatchObject({ keys: TASKS, tasks: TASKS, duplicated: 0 });
        for (const s of stats) expect(s.held).toEqual({ live: 0, leases: 0 });
        // The victim's leases expired (nobody released them); every other one was given up.
        const deadline = Date.now() + scaled(5_000);
        while ((await d.leasesLeft()) > 0 && Date.now() < deadline)
          await new Promise((resolve) => setTimeout(resolve, 100));
        expect(await d.leasesLeft()).toBe(0);
      },
      scaled(300_000),
    );
  },
);
