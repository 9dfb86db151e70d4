/**
 * Where a read round's CPU goes, this project against the bare loop, in µs per round: each system runs the same
 * read cell on Redis (K rounds x N tasks at once), first unprofiled (its main-thread CPU per round), then under the
 * V8 profiler (how that CPU divides). The profile's shares, idle left out, times the unprofiled CPU give µs per round
 * by part: XState, the chart's guards and steps (`machines/`), the store, the runtime, garbage collection, Node, the
 * Redis client... The last column is each part of this project's round in units of the bare loop's whole round, so
 * the table shows what a target such as "CPU at most 2x the bare loop" leaves for each part.
 *
 *   npx tsx scripts/bench/roundProfile.ts [--k 200] [--tasks 50] [--repeat 2] [--top 12]
 *
 * The two systems run one after the other, twice each, the second run profiled; on a shared machine run it twice.
 */
import { randomBytes } from 'node:crypto';
import { Session } from 'node:inspector/promises';
import { DEFAULT_REDIS_URL, createRedisClient } from '../../src/store/redis/redisConnection.js';
import { runBareOnRedis } from './bareLoop.js';
import type { CellResult, CellRun, RedisLink } from './cell.js';
import { SentCommands, fullGc } from './measure.js';
import { runProjectOnRedis } from './project.js';

const args = process.argv.slice(2);
const num = (name: string, fallback: number) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const run: CellRun = { k: num('k', 200), tasks: num('tasks', 50), repeat: num('repeat', 2) };
const top = num('top', 12);

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

/** The part of the code a profile node belongs to. */
function partOf(node: Node): string {
  const { url, functionName } = node.callFrame;
  if (functionName === '(idle)') return 'idle';
  if (functionName === '(garbage collector)') return 'garbage collection';
  if (functionName === '(program)') return 'V8 (program)';
  if (!url) return 'natives';
  const packageName = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
  if (packageName) return packageName === 'xstate' || packageName === 'ioredis' ? packageName : `other packages`;
  if (url.startsWith('node:')) return 'Node core';
  if (url.includes('/machines/')) return 'machines/ (guards, steps)';
  const library = /\/src\/([^/.]+)/.exec(url)?.[1];
  if (library) return `src/${library}`;
  if (url.includes('/scripts/bench/')) return 'the bench itself';
  return 'other';
}

/** Self time by part, in the profile's units, idle left out; and the busy total. */
function parts(profile: Profile): { byPart: Map<string, number>; busy: number } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const byPart = new Map<string, number>();
  let busy = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const part = partOf(byId.get(profile.samples[i]!)!);
    const dt = profile.timeDeltas[i] ?? 0;
    if (part === 'idle') continue;
    busy += dt;
    byPart.set(part, (byPart.get(part) ?? 0) + dt);
  }
  return { byPart, busy };
}

async function profiled<T>(work: () => Promise<T>): Promise<{ value: T; profile: Profile }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  try {
    const value = await work();
    const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: Profile };
    return { value, profile };
  } finally {
    session.disconnect();
  }
}

interface SystemFigures {
  cpuUs: number;
  byPart: Map<string, number>;
}

async function measure(name: 'project' | 'bare', link: RedisLink, runId: string): Promise<SystemFigures> {
  let cells = 0;
  const cell = (): Promise<CellResult> => {
    const prefix = `${runId}-${name}-${++cells}`;
    return name === 'bare' ? runBareOnRedis(run, link, prefix) : runProjectOnRedis(run, link, prefix);
  };
  fullGc();
  const plain = await cell();
  fullGc();
  const { profile } = await profiled(cell);
  const { byPart, busy } = parts(profile);
  const cpuUs = plain.mainCpuUsPerRound;
  process.stderr.write(`roundProfile: ${name}: ${cpuUs.toFixed(0)} µs main-thread CPU a round unprofiled\n`);
  return { cpuUs, byPart: new Map([...byPart].map(([part, t]) => [part, (cpuUs * t) / busy])) };
}

async function main(): Promise<void> {
  const url = process.env.REDIS_URL ?? DEFAULT_REDIS_URL;
  const admin = createRedisClient(url);
  const links = [createRedisClient(url), createRedisClient(url)].map((client): RedisLink => ({
    client,
    admin,
    sent: new SentCommands(client),
    ownConnections: 3,
  }));
  const runId = `roundprof-${randomBytes(4).toString('hex')}`;
  process.stderr.write(`roundProfile: keys under {${runId}-*}, deleted after each cell\n`);
  try {
    const project = await measure('project', links[0]!, runId);
    const bare = await measure('bare', links[1]!, runId);
    const names = [...new Set([...project.byPart.keys(), ...bare.byPart.keys()])].sort(
      (a, b) => (project.byPart.get(b) ?? 0) - (project.byPart.get(a) ?? 0),
    );
    const shown = names.slice(0, top);
    const rest = (figures: SystemFigures) =>
      names.slice(top).reduce((sum, part) => sum + (figures.byPart.get(part) ?? 0), 0);
    const row = (part: string, mine: number, theirs: number) =>
      `| ${part} | ${mine.toFixed(0)} | ${theirs.toFixed(0)} | ${(mine / bare.cpuUs).toFixed(2)}x |\n`;
    process.stdout.write(
      `Main-thread CPU a round, K=${run.k} x ${run.tasks} tasks on Redis, by part (µs; the profile's shares times the ` +
        `unprofiled CPU)\n\n| part | this project | bare loop | this project's part / the bare loop's whole round |\n` +
        '| --- | ---: | ---: | ---: |\n',
    );
    for (const part of shown)
      process.stdout.write(row(part, project.byPart.get(part) ?? 0, bare.byPart.get(part) ?? 0));
    if (names.length > top) process.stdout.write(row('the rest', rest(project), rest(bare)));
    process.stdout.write(row('**all**', project.cpuUs, bare.cpuUs));
  } finally {
    for (const link of links) link.client.disconnect();
    admin.disconnect();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
