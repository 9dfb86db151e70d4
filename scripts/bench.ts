/**
 * `npm run bench`: this project against a bare XState + Redis loop (the in-run baseline), on the same Redis
 * (REDIS_URL, a fresh key prefix per cell, every key deleted afterwards). `npm run bench:peers` adds LangGraph JS
 * with SqliteSaver, run from bench/langgraph in a child process. The workload: scripts/bench/workload.ts; the
 * schedule: scripts/bench/passes.ts; the tables: scripts/bench/report.ts.
 *
 * Options: --peers, --passes N (default 5), --peer-passes N (default 3), --tiny (a seconds-long smoke run),
 * --compare DIR [--compare-label TEXT] (another checkout of this project, e.g. the commit before a rewrite, run in the
 * same passes: its src/ entry points are imported from DIR, whose imports must resolve, e.g. via a node_modules symlink).
 * Progress goes to stderr; the report (markdown) to stdout.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { basename, resolve } from 'node:path';
import type { Redis } from 'ioredis';
import { DEFAULT_REDIS_URL, createRedisClient } from '../src/store/redis/redisConnection.js';
import type { RedisLink } from './bench/cell.js';
import { BenchSetupError } from './bench/benchSetupError.js';
import { chartShapeTable, measureChartShapes } from './bench/chartShape.js';
import { LangGraphPeer, ensurePeerInstalled } from './bench/langgraphPeer.js';
import { MAIN_CPU_SOURCE, SentCommands, deleteMatching } from './bench/measure.js';
import { FULL_PLAN, type Plan, TINY_PLAN, runBench } from './bench/passes.js';
import { loadProjectApi } from './bench/projectApi.js';
import { formatReport } from './bench/report.js';

const args = process.argv.slice(2);
const text = (name: string) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? args[at + 1] : undefined;
};
const option = (name: string) => (text(name) === undefined ? undefined : Number(text(name)));
const base = args.includes('--tiny') ? TINY_PLAN : FULL_PLAN;
const plan: Plan = {
  ...base,
  passes: option('passes') ?? base.passes,
  peerPasses: option('peer-passes') ?? base.peerPasses,
};
const peers = args.includes('--peers');
const compareDir = text('compare');

const url = process.env.REDIS_URL ?? DEFAULT_REDIS_URL;
const runId = `bench-${randomBytes(4).toString('hex')}`;
let prefixes = 0;
const progress = (text: string) => process.stderr.write(`bench: ${text}\n`);

async function main(): Promise<void> {
  if (peers) ensurePeerInstalled(progress);
  const admin = createRedisClient(url);
  const connections = compareDir ? 4 : 3;
  const link = (client: Redis): RedisLink => ({
    client,
    admin,
    sent: new SentCommands(client),
    ownConnections: connections,
  });
  const projectLink = link(createRedisClient(url));
  const bareLink = link(createRedisClient(url));
  const otherLink = compareDir ? link(createRedisClient(url)) : null;
  let peer: LangGraphPeer | null = null;
  const startedAt = new Date();
  const loadAtStart = loadavg();
  try {
    await Promise.all([
      admin.ping(),
      projectLink.client.ping(),
      bareLink.client.ping(),
      otherLink?.client.ping(),
    ]).catch((error: Error) => {
      throw new BenchSetupError(
        `Redis at ${url} does not answer (${error.message}): start one, or point REDIS_URL at one.`,
      );
    });
    const redisVersion = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1] ?? 'unknown';
    progress(`Redis ${redisVersion} at ${url}; keys under {${runId}-*}; main-thread CPU from ${MAIN_CPU_SOURCE}`);
    if (peers) {
      progress('starting the LangGraph peer (bench/langgraph/peer.ts)');
      peer = await LangGraphPeer.start();
      progress(
        `LangGraph ${peer.versions.langgraph}, SqliteSaver ${peer.versions.checkpointSqlite}, files in ${peer.versions.sqliteDir}`,
      );
    }
    let other = null;
    if (compareDir && otherLink) {
      const label = text('compare-label') ?? `${basename(resolve(compareDir))} @ ${commit(compareDir)}`;
      progress(`comparing with ${label} (${resolve(compareDir)})`);
      other = { api: await loadProjectApi(compareDir), label, link: otherLink };
    }
    const results = await runBench({
      plan,
      projectLink,
      bareLink,
      peer,
      other,
      nextPrefix: () => `${runId}-${++prefixes}`,
      progress,
    });
    const others = Math.max(0, ...results.cells.map((c) => c.redis?.otherClients ?? 0));
    const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
    const header = [
      `## Bench ${startedAt.toISOString().slice(0, 10)}, commit ${commit('.')}${changedSources()}`,
      '',
      `Node ${process.version} on ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'} (load average ${load(loadAtStart)} at start, ${load(loadavg())} at end); ` +
        `Redis ${redisVersion} at ${url}` +
        (peer
          ? `; LangGraph ${peer.versions.langgraph}, SqliteSaver ${peer.versions.checkpointSqlite} (better-sqlite3 ${peer.versions.betterSqlite3}, files in ${peer.versions.sqliteDir})`
          : '') +
        '.',
      `${plan.passes} passes${peer ? ` (LangGraph in the first ${Math.min(plan.peerPasses, plan.passes)})` : ''}, medians; a ratio is the median of the ratios within each pass. ` +
        'A round is one model call proposing one no-op read (a ~200 B result) and that read; a task plays K rounds, then answers. ' +
        `A cell runs batches of its tasks in a row until it has ${plan.minRounds.toLocaleString('en-US')} rounds (LangGraph: ${plan.peerMinRounds}) and lasts ${plan.minSeconds} s. ` +
        `Main-thread CPU from ${MAIN_CPU_SOURCE}, process CPU from process.cpuUsage. Redis commands: "run" from INFO commandstats deltas ` +
        '(commands inside Lua count), "sent" counted at the client. Bytes kept: the payload of the keys under the cell\'s prefix (string values, ' +
        'hash fields and values, list elements, stream fields and values, zset members + 8 B per score); LangGraph: SQLite file growth. ' +
        'Bytes sent: what the client wrote to its socket.' +
        (others > 0
          ? ` **${others} other Redis client(s) were connected during the run: the "run" command counts include their commands.**`
          : ''),
    ];
    progress('chart shape cell (XState alone)');
    const shapeRounds = args.includes('--tiny') ? 400 : 4_000;
    const shapes = await measureChartShapes({ rounds: shapeRounds, many: 20, passes: 3 });
    process.stdout.write(formatReport(results, header) + '\n' + chartShapeTable(shapes, shapeRounds) + '\n');
  } finally {
    progress('cleaning up');
    await peer?.stop().catch(() => {});
    const deleted = await deleteMatching(admin, `{${runId}-*`).catch(() => 0);
    if (deleted > 0) progress(`deleted ${deleted} leftover keys under {${runId}-*}`);
    for (const client of [projectLink.client, bareLink.client, otherLink?.client, admin])
      await client?.quit().catch(() => client.disconnect());
  }
}

/** Read-only git: never takes the index lock (GIT_OPTIONAL_LOCKS=0). */
function git(dir: string, gitArgs: string[]): string | null {
  try {
    return execFileSync('git', ['-C', dir, ...gitArgs], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, GIT_OPTIONAL_LOCKS: '0' },
    }).trim();
  } catch {
    return null;
  }
}

const commit = (dir: string) => git(dir, ['log', '-1', '--format=%h']) ?? 'unknown';

/** " with uncommitted changes in N file(s) of src/ and machines/" when the measured code is not the commit's. */
function changedSources(): string {
  const changed = [
    git('.', ['diff', '--name-only', 'HEAD', '--', 'src', 'machines']),
    git('.', ['ls-files', '--others', '--exclude-standard', '--', 'src', 'machines']),
  ]
    .flatMap((out) => (out ? out.split('\n') : []))
    .filter(Boolean);
  return changed.length > 0 ? ` with uncommitted changes in ${changed.length} file(s) of src/ and machines/` : '';
}

main().catch((error: unknown) => {
  if (error instanceof BenchSetupError) process.stderr.write(`bench: ${error.message}\n`);
  else
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
