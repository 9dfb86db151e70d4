/**
 * `npm run bench:workers`: tasks/s and steps/s with 1, 2 and 4 worker processes on one Redis, with Node CPU per step
 * (the workers', and separately the API process's) and Redis CPU per step, all measured in the same run.
 *
 * The bench starts its own redis-server on a free port (`--save '' --appendonly no`, stopped by pid at the end, on
 * error and on Ctrl-C; 127.0.0.1:6379 is never used). Per pass and configuration: a fresh key prefix and BullMQ queue,
 * the worker processes (test/support/dispatchWorker.ts: workload "one read, one idempotent write, an answer"), an
 * API orchestrator in this process that starts the tasks in batches of 100 in parallel; timed until every task is
 * done. The configurations take turns within each pass (the order rotates from pass to pass), and the scaling
 * ratios are taken within each pass. Progress goes to stderr; the report (markdown) to stdout.
 *
 * Then the same on a 3-master Redis Cluster the bench creates (`--buckets N`, default 64; `--no-cluster` skips it).
 *
 * `--model-latency MS`: every model turn of the workers waits MS first (a timer, as a remote model would), so the
 * work is bound by the model's latency rather than by CPU: the fleet's real shape. Then the defaults are 400 tasks and
 * 8 jobs per worker (a fixed concurrency per worker, so added workers add concurrency), each worker first drives 100
 * tasks of its own untimed (`--worker-warmup N`: at a few hundred tasks a pass, compiling the code would otherwise be
 * a good part of what is measured), and the targets are 1.8x for 2 workers over 1 and 1.7x for 4 over 2 (without it:
 * 1.5x and 1x).
 *
 * Options: --passes N (default 2), --tasks N (default 2000), --concurrency N (jobs per worker, default 50),
 * --warmup N (tasks of an untimed one-worker run first, default min(200, tasks); 0: none), --timeout-s N (per pass,
 * default 300), --model-latency MS (default 0), --worker-warmup N (default 0; 100 with a model latency), --json --out
 * PATH (also write the results as JSON; with the cluster, one object per target).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import { type RedisServer, startRedisServer } from '../../test/support/redis.js';
import { type TestCluster, startRedisCluster } from '../../test/support/redisCluster.js';
import { ChildPool } from '../../test/support/workers.js';
import { BenchSetupError } from './benchSetupError.js';
import { type BenchTarget, type PassContext, type PassResult, runPass } from './workersPass.js';
import { WORKER_COUNTS, type WorkersBenchResults, fmt, formatReport, summarize, targetsFor } from './workersReport.js';

const args = process.argv.slice(2);
const text = (name: string) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? args[at + 1] : undefined;
};
function count(name: string, fallback: number, min = 1): number {
  const raw = text(name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min)
    throw new BenchSetupError(`--${name} wants an integer ≥ ${min}, not ${JSON.stringify(raw)}`);
  return value;
}

const progress = (line: string) => process.stderr.write(`bench:workers: ${line}\n`);

const pool = new ChildPool();
let server: RedisServer | null = null;
let cluster: TestCluster | null = null;
let admin: Redis | null = null;
let clusterAdmin: { disconnect(): void } | null = null;
let cleaning: Promise<void> | null = null;
let interrupted = false;

/** Stops what the bench started, by pid: the workers still running (SIGKILL), then the redis-server. Once. */
function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    await pool.killAll().catch(() => {});
    admin?.disconnect();
    clusterAdmin?.disconnect();
    if (server) {
      progress(`stopping redis-server (pid ${server.pid})`);
      await server.stop().catch(() => {});
    }
    if (cluster) {
      progress(`stopping the Redis Cluster (ports ${cluster.ports.join(', ')})`);
      await cluster.stop().catch(() => {});
    }
  })();
  return cleaning;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    interrupted = true;
    progress(`${signal}: stopping the workers and the redis-server`);
    void cleanUp().finally(() => process.exit(130));
  });
}

async function main(): Promise<void> {
  const passes = count('passes', 2);
  const modelLatencyMs = count('model-latency', 0, 0);
  const latencyBound = modelLatencyMs > 0;
  const tasks = count('tasks', latencyBound ? 400 : 2_000);
  const concurrency = count('concurrency', latencyBound ? 8 : 50);
  const workerWarmup = count('worker-warmup', latencyBound ? 100 : 0, 0);
  const warmup = count('warmup', Math.min(200, tasks), 0);
  const timeoutMs = count('timeout-s', 300) * 1000;
  const json = args.includes('--json');
  const out = text('out');
  if (json && !out) throw new BenchSetupError('--json needs --out PATH (the file the results are written to)');

  server = await startRedisServer().catch((error: Error) => {
    throw new BenchSetupError(
      `${error.message}: the workers bench needs redis-server on PATH (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)`,
    );
  });
  const port = Number(new URL(server.url).port);
  if (port === 6379) throw new BenchSetupError('refusing to bench on port 6379');
  admin = new Redis(server.url, { maxRetriesPerRequest: 2 });
  const redisVersion = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1] ?? 'unknown';
  progress(`redis-server ${redisVersion} pid ${server.pid} on port ${port} (--save '' --appendonly no)`);
  const cores = cpus().length;
  progress(
    `${passes} pass(es) x workers ${WORKER_COUNTS.join('/')} x ${fmt(tasks)} tasks, concurrency ${concurrency} per worker, ` +
      `model latency ${modelLatencyMs} ms a turn; ${cores} cores`,
  );

  const runId = `wb-${randomBytes(3).toString('hex')}`;
  let prefixes = 0;
  const nextPrefix = () => `${runId}-${++prefixes}`;
  const targets: { name: string; target: BenchTarget }[] = [
    { name: 'one redis-server', target: { redisUrl: server.url, admin, nodes: [admin] } },
  ];
  if (!args.includes('--no-cluster')) {
    cluster = await startRedisCluster(3).catch((error: Error) => {
      throw new BenchSetupError(
        `${error.message}: the cluster part needs redis-server and redis-cli on PATH (or pass --no-cluster)`,
      );
    });
    const buckets = count('buckets', 64);
    const { Cluster } = await import('ioredis');
    const clusterClient = new Cluster(
      cluster.ports.map((p) => ({ host: '127.0.0.1', port: p })),
      { redisOptions: { maxRetriesPerRequest: 2 } },
    );
    clusterAdmin = clusterClient;
    progress(
      `Redis Cluster of 3 masters on ports ${cluster.ports.join(', ')}; the store spreads tasks over ${buckets} buckets`,
    );
    targets.push({
      name: `a 3-master Redis Cluster (${buckets} buckets)`,
      target: {
        redisUrl: server.url,
        cluster: { ports: cluster.ports, buckets },
        admin: clusterClient as unknown as Redis,
        nodes: cluster.masters(),
      },
    });
  }
  const startedAt = new Date();
  const loadAtStart = loadavg();
  // The code measured: as it was when the bench began.
  const measuredCommit = commit();

  const reports: { name: string; results: PassResult[] }[] = [];
  for (const { name, target } of targets) {
    const ctx: PassContext = {
      pool,
      target,
      settings: { tasks, concurrency, timeoutMs, modelLatencyMs, workerWarmup },
      cores,
      progress,
    };
    if (warmup > 0) {
      progress(`${name}: warm-up, 1 worker, ${fmt(warmup)} tasks, untimed`);
      const w = await runPass(ctx, 0, 1, nextPrefix(), warmup);
      progress(
        `warm-up done in ${w.seconds.toFixed(1)} s${w.warnings.length > 0 ? `; WARNING ${w.warnings.join('; ')}` : ''}`,
      );
    }
    const results: PassResult[] = [];
    for (let pass = 1; pass <= passes; pass++) {
      for (const workers of rotate(WORKER_COUNTS, pass - 1)) {
        const r = await runPass(ctx, pass, workers, nextPrefix());
        results.push(r);
        progress(
          `${name}: pass ${pass}/${passes}  ${workers} worker(s)  ${fmt(r.tasksPerSecond).padStart(5)} tasks/s  ${fmt(r.stepsPerSecond).padStart(6)} steps/s  ` +
            `CPU µs/step: workers ${fmt(r.workerCpuUsPerStep)}, API ${fmt(r.apiCpuUsPerStep)}, Redis ${fmt(r.redisCpuUsPerStep)}  ` +
            `(${fmt(r.tasks)} tasks in ${r.seconds.toFixed(1)} s, saves ${r.savesPerWorker.map(fmt).join('/')})`,
        );
        for (const warning of r.warnings) progress(`WARNING pass ${pass}, ${workers} worker(s): ${warning}`);
      }
    }
    reports.push({ name, results });
  }

  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
  const meta = {
    date: startedAt.toISOString(),
    commit: measuredCommit,
    node: process.version,
    cpu: `${cores} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}`,
    loadAverageAtStart: loadAtStart,
    loadAverageAtEnd: loadavg(),
    redisVersion,
    passes,
    tasks,
    concurrency,
    modelLatencyMs,
    warmup,
    workerWarmup,
  };
  const header = (name: string) => [
    `## Workers bench ${startedAt.toISOString().slice(0, 10)}, commit ${meta.commit}: on ${name}`,
    '',
    `Node ${process.version} on ${meta.cpu} (load average ${load(loadAtStart)} at start, ${load(meta.loadAverageAtEnd)} at end); ` +
      `redis-server ${redisVersion} started by the bench (no persistence), shared by the workers and the API process.`,
    `${passes} pass(es); in each, 1, 2 and 4 worker processes (order rotating) drive ${fmt(tasks)} tasks (one read, one idempotent write, an answer` +
      (latencyBound ? `; every one of the 3 model turns waits ${modelLatencyMs} ms first` : '') +
      ')' +
      (workerWarmup > 0 ? `, each worker having first driven ${fmt(workerWarmup)} tasks of its own untimed,` : '') +
      ' ' +
      `with ${concurrency} jobs each, started by an API orchestrator in the bench process in batches of 100; timed from the first start until ` +
      'all are done. Medians over passes; a ratio is the median of the ratios within each pass. A step is one save (STATS.saves of the workers). ' +
      "Worker Node CPU: the workers' process.cpuUsage from READY to SIGTERM; API Node CPU: the bench process over the timed window; " +
      'Redis CPU: INFO cpu used_cpu_sys + used_cpu_user over the timed window (summed over the masters of a cluster; the busiest server alone in its own column). Machine CPU busy: all three / (seconds × cores), ' +
      "the bench's own processes only." +
      (Math.max(loadAtStart[0] ?? 0, meta.loadAverageAtEnd[0] ?? 0) > cores - 0.5
        ? ` **The 1-minute load average (${load(loadAtStart.slice(0, 1))} at start, ${load(meta.loadAverageAtEnd.slice(0, 1))} at end) came near or above the ${cores} cores: other processes competed for the CPU.**`
        : '') +
      (latencyBound
        ? ` The work is bound by the model's latency: a worker waits most of the time, so the targets can be judged on ${cores} cores as long as the machine CPU busy stays well under 100%.`
        : cores < 6
          ? ` **${cores} cores for up to 4 workers, the API process and Redis: the scaling targets cannot be judged on this machine.**`
          : ''),
  ];
  const all = reports.map(({ name, results }) => ({
    name,
    report: { meta, passes: results, ...summarize(results, targetsFor(modelLatencyMs)) } as WorkersBenchResults,
  }));
  for (const { name, report } of all) {
    process.stdout.write(formatReport(report, header(name)));
    process.stdout.write('\n');
    for (const warning of report.warnings) progress(`WARNING ${name}: ${warning}`);
  }
  if (json && out) {
    writeFileSync(
      resolve(out),
      JSON.stringify(
        all.length === 1 ? all[0]!.report : Object.fromEntries(all.map(({ name, report }) => [name, report])),
        null,
        2,
      ) + '\n',
    );
    progress(`results written to ${resolve(out)}`);
  }
}

/** `items` starting at position `by` (mod length). */
function rotate<T>(items: readonly T[], by: number): T[] {
  const at = by % items.length;
  return [...items.slice(at), ...items.slice(0, at)];
}

/** Read-only git: never takes the index lock (GIT_OPTIONAL_LOCKS=0). */
function git(gitArgs: string[]): string | null {
  try {
    return execFileSync('git', gitArgs, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, GIT_OPTIONAL_LOCKS: '0' },
    }).trim();
  } catch {
    return null;
  }
}

/** The commit, and " with uncommitted changes in N file(s) of src/ and machines/" when the measured code is not the commit's. */
function commit(): string {
  const changed = [
    git(['diff', '--name-only', 'HEAD', '--', 'src', 'machines']),
    git(['ls-files', '--others', '--exclude-standard', '--', 'src', 'machines']),
  ]
    .flatMap((out) => (out ? out.split('\n') : []))
    .filter(Boolean);
  return (
    (git(['log', '-1', '--format=%h']) ?? 'unknown') +
    (changed.length > 0 ? ` with uncommitted changes in ${changed.length} file(s) of src/ and machines/` : '')
  );
}

main()
  .catch((error: unknown) => {
    if (interrupted) return;
    if (error instanceof BenchSetupError) progress(error.message);
    else
      process.stderr.write(
        `bench:workers failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
      );
    process.exitCode = 1;
  })
  .finally(() => cleanUp());
