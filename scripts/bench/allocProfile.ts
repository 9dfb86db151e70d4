/**
 * Where a read round's JS heap garbage comes from: runs one bench cell (K rounds x N tasks, as `focused.ts`) under
 * V8's sampling heap profiler with the objects later collected kept in the profile (`includeObjectsCollectedBy*GC`,
 * so it counts every allocation, not only what survives as `node --heap-prof` does), then sums the sampled bytes
 * per allocating function (self) and per source file, and prints the top of each per round.
 *
 *   node --enable-source-maps --import tsx scripts/bench/allocProfile.ts [--k 200] [--tasks 50] [--memory] [--promoted] [--interval 512] [--top 30]
 *     [--out /tmp/alloc.heapprofile] [--stacks 0] [--depth 0]
 *
 * (Under plain `npx tsx` it runs too, but every function of a file is then on its line 1: tsx's output is one line.)
 * `--memory` runs on a MemoryStore instead of Redis. `--promoted` (under `node --expose-gc`) keeps in the profile only
 * what no scavenge collected: what the cell promoted to the old generation (a scavenge's cost is what it copies and
 * promotes, not the garbage it leaves), and what was still alive at the end. `--stacks N` also prints the N heaviest allocation stacks: the
 * allocating function, its `--depth D` nearest callers (0 by default) and the three nearest frames of this project. `--out` saves the raw profile (open it in Chrome DevTools' Memory tab).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { findSourceMap } from 'node:module';
import { Session } from 'node:inspector/promises';
import { DEFAULT_REDIS_URL, createRedisClient } from '../../src/store/redis/redisConnection.js';
import type { RedisLink } from './cell.js';
import { SentCommands } from './measure.js';
import { runProjectInMemory, runProjectOnRedis } from './project.js';

const args = process.argv.slice(2);
const text = (name: string) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? args[at + 1] : undefined;
};
const k = Number(text('k') ?? 200);
const tasks = Number(text('tasks') ?? 50);
const interval = Number(text('interval') ?? 512);
const top = Number(text('top') ?? 30);
const stacks = Number(text('stacks') ?? 0);
const depth = Number(text('depth') ?? 0);
const out = text('out');
const inMemory = args.includes('--memory');
const promoted = args.includes('--promoted');

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  callFrame: CallFrame;
  selfSize: number;
  children: ProfileNode[];
}

const root = new URL('../../', import.meta.url).href;
const shortUrl = (url: string) =>
  url.startsWith(root) ? url.slice(root.length) : url.replace(/^.*node_modules\//, '~/') || '(native)';
/** The function's line in its source: tsx's output is one line, mapped back when source maps are on. */
function lineOf(f: CallFrame): number {
  if (!f.url.startsWith('file:')) return f.lineNumber + 1;
  try {
    const entry = findSourceMap(f.url)?.findEntry(f.lineNumber, f.columnNumber) as
      { originalLine?: number } | undefined;
    if (typeof entry?.originalLine === 'number') return entry.originalLine + 1;
  } catch {
    // No map: the generated line.
  }
  return f.lineNumber + 1;
}
const frameName = (f: CallFrame) => `${f.functionName || '(anonymous)'} ${shortUrl(f.url)}:${lineOf(f)}`;

function add(map: Map<string, number>, key: string, bytes: number) {
  map.set(key, (map.get(key) ?? 0) + bytes);
}

function aggregate(head: ProfileNode) {
  const byFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  const byStack = new Map<string, number>();
  let total = 0;
  const walk = (node: ProfileNode, path: CallFrame[]) => {
    const here = [...path, node.callFrame];
    if (node.selfSize > 0) {
      total += node.selfSize;
      add(byFunction, frameName(node.callFrame), node.selfSize);
      add(byFile, shortUrl(node.callFrame.url), node.selfSize);
      // The nearest frames in the project's own code say who asked for the allocation.
      const own = here.filter((f) => f.url.startsWith(root) && !f.url.includes('/node_modules/'));
      const callers = here.slice(-1 - depth, -1).reverse();
      const stack = [node.callFrame, ...callers, ...own.slice(-3).reverse()].map(frameName);
      add(byStack, [...new Set(stack)].join(' < '), node.selfSize);
    }
    for (const child of node.children) walk(child, here);
  };
  walk(head, []);
  return { total, byFunction, byFile, byStack };
}

function table(title: string, map: Map<string, number>, rounds: number, total: number, count: number) {
  const rows = [...map].sort((a, b) => b[1] - a[1]).slice(0, count);
  const lines = rows.map(
    ([key, bytes]) =>
      `${(bytes / rounds).toFixed(0).padStart(8)} B ${((100 * bytes) / total).toFixed(1).padStart(5)}%  ${key}`,
  );
  return [`${title} (bytes per round, share of sampled)`, ...lines, ''].join('\n');
}

async function main(): Promise<void> {
  const url = process.env.REDIS_URL ?? DEFAULT_REDIS_URL;
  const link: RedisLink | null = inMemory
    ? null
    : (() => {
        const client = createRedisClient(url);
        return { client, admin: createRedisClient(url), sent: new SentCommands(client), ownConnections: 2 };
      })();
  const runId = `allocprof-${randomBytes(4).toString('hex')}`;
  let cells = 0;
  const cell = (run: { k: number; tasks: number; repeat: number }) =>
    link ? runProjectOnRedis(run, link, `${runId}-${++cells}`) : runProjectInMemory(run);
  const session = new Session();
  session.connect();
  try {
    await cell({ k: 20, tasks: 5, repeat: 1 }); // warm-up
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: interval,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: !promoted,
    });
    const result = await cell({ k, tasks, repeat: 1 });
    // What a scavenge would still find alive is what it copies and promotes: the young garbage goes first.
    if (promoted) (globalThis as { gc?: (options: object) => void }).gc?.({ type: 'minor', execution: 'sync' });
    const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as {
      profile: { head: ProfileNode };
    };
    if (out) writeFileSync(out, JSON.stringify(profile));
    const { total, byFunction, byFile, byStack } = aggregate(profile.head);
    const rounds = result.rounds;
    process.stdout.write(
      `K=${k} x ${tasks} tasks on ${inMemory ? 'a MemoryStore' : 'Redis'}, sampling every ${interval} B: ` +
        `${(total / rounds / 1024).toFixed(1)} KB sampled/round (measured ${(
          (result.allocatedBytesPerRound ?? 0) / 1024
        ).toFixed(1)} KB/round by GC counts; the profiler's own work inflates it), ` +
        `${result.mainCpuUsPerRound.toFixed(0)} µs main CPU/round under the profiler\n\n`,
    );
    process.stdout.write(table('By file', byFile, rounds, total, top));
    process.stdout.write(table('By allocating function', byFunction, rounds, total, top));
    if (stacks > 0)
      process.stdout.write(table('By stack (allocator < nearest project frames)', byStack, rounds, total, stacks));
    if (out) process.stdout.write(`raw profile: ${out}\n`);
  } finally {
    session.disconnect();
    link?.client.disconnect();
    link?.admin.disconnect();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
