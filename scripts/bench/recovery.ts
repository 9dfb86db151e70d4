/**
 * `npm run bench:recovery`: how fast a process takes over the running tasks of one that died, on Redis, directly and
 * through a local TCP proxy that delays every packet (`--delay-ms`, default 1 ms each way: a Redis one network round
 * trip away), with take-overs one at a time (`concurrency 1`, as recovery ran before) and 32 at a time (the default).
 *
 * The bench starts its own redis-server on a free port (nothing kept on disk; stopped by pid at the end). It creates
 * `--tasks` running tasks (default 10,000) whose model never answers, closes their orchestrator (which hands the
 * leases back), then, per cell, a new orchestrator times `recover()` and is closed again (handing them back again).
 * Progress goes to stderr; the table (markdown) to stdout.
 */
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { type Server, Socket, createServer } from 'node:net';
import { createOrchestrator } from '../../src/orchestrator/orchestrator.js';
import { RedisStore } from '../../src/store/redis/redisStore.js';
import type { AgentModel } from '../../src/model/agentModel.js';
import { type RedisServer, startRedisServer } from '../../test/support/redis.js';
import { BenchSetupError } from './benchSetupError.js';

const args = process.argv.slice(2);
function option(name: string, fallback: number, min: number): number {
  const at = args.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(args[at + 1]);
  if (!Number.isFinite(value) || value < min)
    throw new BenchSetupError(`--${name} wants a number ≥ ${min}, not ${JSON.stringify(args[at + 1])}`);
  return value;
}
const TASKS = option('tasks', 10_000, 1);
const DELAY_MS = option('delay-ms', 1, 0);
const progress = (line: string) => process.stderr.write(`bench:recovery: ${line}\n`);

/** A model that never answers (until its task stops here): every task stays `running`. */
const silentModel: AgentModel = {
  name: 'silent',
  decide: (request) =>
    new Promise((_, reject) => request.signal?.addEventListener('abort', () => reject(request.signal!.reason))),
};

/** A TCP proxy to `port` that holds every chunk `delayMs` before passing it on, in both directions. */
async function delayingProxy(port: number, delayMs: number): Promise<{ port: number; server: Server }> {
  const sockets = new Set<Socket>();
  const relay = (from: Socket, to: Socket) => {
    from.on('data', (chunk) => setTimeout(() => to.destroyed || to.write(chunk), delayMs));
    from.on('close', () => to.destroy());
    from.on('error', () => to.destroy());
  };
  const server = createServer((client) => {
    const upstream = new Socket();
    upstream.connect(port, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    }
    relay(client, upstream);
    relay(upstream, client);
  });
  server.on('close', () => sockets.forEach((socket) => socket.destroy()));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as { port: number }).port, server };
}

const orchestratorOn = (store: RedisStore) =>
  createOrchestrator({ tools: [], model: silentModel, store, expirySweepMs: 0 });

/** Commands Redis has run so far (INFO stats), so a row can count what its step cost. */
async function commandsRun(client: Redis): Promise<number> {
  const info = await client.info('stats');
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? NaN);
}

/**
 * One sweep over tasks a live process holds, both ways: as the sweep ran before (every running task's summary listed,
 * then a lease script tried on each, 32 at a time) and as it runs now (`leases.orphans`: the running ids, then their
 * leases' EXISTS, pipelined).
 */
async function sweepOverHeldTasks(url: string, prefix: string): Promise<string[]> {
  const store = new RedisStore({ url, prefix });
  const client = new Redis(url);
  const rows: string[] = [];
  try {
    const time = async (name: string, sweep: () => Promise<number>) => {
      const before = await commandsRun(client);
      const started = performance.now();
      const found = await sweep();
      const ms = performance.now() - started;
      const commands = (await commandsRun(client)) - before - 1;
      rows.push(`| ${name} | ${ms.toFixed(0)} | ${commands.toLocaleString('en')} | ${found} |`);
    };
    await time('every running task tried (before)', async () => {
      const ids = (await store.list({ states: ['running'] })).map((summary) => summary.taskId);
      let found = 0;
      let next = 0;
      const worker = async () => {
        while (next < ids.length) if (await store.acquireAndRead(ids[next++]!, 15_000)) found += 1;
      };
      await Promise.all(Array.from({ length: 32 }, worker));
      return found;
    });
    await time('orphans listed (now)', async () => (await store.leases.orphans!(10_000)).length);
  } finally {
    await store.close();
    client.disconnect();
  }
  return rows;
}

async function main(): Promise<void> {
  const redis: RedisServer = await startRedisServer();
  const redisPort = Number(new URL(redis.url).port);
  const proxy = await delayingProxy(redisPort, DELAY_MS);
  const prefix = 'bench-recovery';
  try {
    progress(`creating ${TASKS} running tasks on ${redis.url}`);
    const firstStore = new RedisStore({ url: redis.url, prefix });
    const first = orchestratorOn(firstStore);
    const principal = { userId: 'u1', tenantId: 't1', scopes: [] };
    for (let at = 0; at < TASKS; at += 200) {
      await Promise.all(
        Array.from({ length: Math.min(200, TASKS - at) }, (_, i) =>
          first.start({ principal, goal: 'wait for a model that never answers', taskId: `t${at + i}` }),
        ),
      );
    }
    const sweepRows = await sweepOverHeldTasks(redis.url, prefix);
    await first.close();
    await firstStore.close();

    const rows: string[] = [];
    for (const [where, url] of [
      ['direct', redis.url],
      [`proxy +${DELAY_MS} ms each way`, `redis://127.0.0.1:${proxy.port}`],
    ] as const) {
      for (const concurrency of [1, 32]) {
        const store = new RedisStore({ url, prefix });
        const orchestrator = orchestratorOn(store);
        progress(`${where}, concurrency ${concurrency}`);
        const started = performance.now();
        const report = await orchestrator.recover({ concurrency });
        const seconds = (performance.now() - started) / 1_000;
        if (report.resumed.length !== TASKS || report.busy.length > 0)
          throw new Error(`${where}: resumed ${report.resumed.length} of ${TASKS}, busy ${report.busy.length}`);
        rows.push(
          `| ${where} | ${concurrency} | ${TASKS.toLocaleString('en')} | ${seconds.toFixed(2)} | ${Math.round(TASKS / seconds).toLocaleString('en')} |`,
        );
        await orchestrator.close();
        await store.close();
      }
    }
    console.log('| Redis | concurrency | tasks | recover() s | tasks/s |');
    console.log('|---|---|---|---|---|');
    for (const row of rows) console.log(row);
    console.log('');
    console.log(
      `One orphan sweep while a live process holds all ${TASKS.toLocaleString('en')} tasks (nothing to take over):`,
    );
    console.log('');
    console.log('| sweep | ms | Redis commands | orphans found |');
    console.log('|---|---|---|---|');
    for (const row of sweepRows) console.log(row);
  } finally {
    proxy.server.close();
    await redis.stop();
  }
}

await main();
