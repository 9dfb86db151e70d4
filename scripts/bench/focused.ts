/**
 * A focused comparison of this checkout with another (`--compare DIR`, e.g. a worktree of main) on two figures only:
 * main-thread CPU per round of a read cell on Redis (K rounds x N tasks at once), and the resume time of a parked
 * K-round task (p50 to its first acknowledged save). The cell's JS heap allocated and bytes sent to Redis per round
 * are given too (both steady from run to run, unlike CPU on a shared machine). The two run interleaved, in
 * alternating order, for `--passes` passes, so a noisy minute on a shared machine hits both alike; the report gives
 * every pass and the medians.
 *
 *   npx tsx scripts/bench/focused.ts --compare ../wt-main [--passes 5] [--k 200] [--tasks 50] [--resume-k 200]
 *     [--resume-samples 30] [--only this|other] [--this DIR]
 *
 * `--only` runs one checkout alone (e.g. under `node --cpu-prof`). `--this DIR` puts another checkout in this one's
 * place, so two older commits can be compared head to head when bisecting a loss.
 */
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { DEFAULT_REDIS_URL, createRedisClient } from '../../src/store/redis/redisConnection.js';
import type { RedisLink } from './cell.js';
import { SentCommands, cpuMark, cpuSince, deleteMatching, median, quantile } from './measure.js';
import { runProjectOnRedis } from './project.js';
import { LOCAL_API, type ProjectApi, loadProjectApi } from './projectApi.js';
import { parkTask as parkedTask } from './workload.js';

const args = process.argv.slice(2);
const text = (name: string) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? args[at + 1] : undefined;
};
const num = (name: string, fallback: number) => Number(text(name) ?? fallback);
const passes = num('passes', 5);
const k = num('k', 200);
const tasks = num('tasks', 50);
const resumeK = num('resume-k', 200);
const resumeSamples = num('resume-samples', 30);
const only = text('only');
const compareDir = text('compare');
const thisDir = text('this');
const progress = (line: string) => process.stderr.write(`focused: ${line}\n`);

interface Figures {
  cpuUsPerRound: number[];
  /** JS heap bytes allocated per round (the whole process while the cell ran). */
  allocatedBytesPerRound: number[];
  /** Bytes sent to Redis per round. */
  sentBytesPerRound: number[];
  resumeP50Ms: number[];
  resumeAll: number[];
  /** Main-thread CPU of each resume (start to first acknowledged save), less sensitive to the machine's load. */
  resumeCpuUs: number[];
  /** The p50 of `resumeCpuUs` in each pass. */
  resumeCpuP50Us: number[];
}

/**
 * As the bench's `parkProjectTask` (extras.ts): a `k`-round task parked in flight; a sample creates an orchestrator,
 * resumes the task and times to its first acknowledged save (wall, and main-thread CPU), then lets it play on to
 * its next model call (which hangs) and closes the orchestrator.
 */
async function parkTask(link: RedisLink, prefix: string, k: number, api: ProjectApi) {
  const task = await parkedTask(new api.RedisStore({ client: link.client, prefix }), k, api);
  const once = async () => {
    let cpuUs = 0;
    let mark = cpuMark();
    let start = 0;
    let end = 0;
    await task.resumeOnce({
      started: () => {
        mark = cpuMark();
        start = performance.now();
      },
      saved: () => {
        // The wall clock first: reading the main thread's CPU sleeps 50 µs (measure.ts, `settle`).
        end = performance.now();
        cpuUs = cpuSince(mark).main;
      },
    });
    return { ms: end - start, cpuUs };
  };
  for (let i = 0; i < 5; i++) await once();
  return {
    async sample(count: number) {
      const out: { ms: number; cpuUs: number }[] = [];
      for (let i = 0; i < count; i++) out.push(await once());
      return out;
    },
    close: () => deleteMatching(link.admin, `{${prefix}}:*`),
  };
}

async function main(): Promise<void> {
  const url = process.env.REDIS_URL ?? DEFAULT_REDIS_URL;
  const admin = createRedisClient(url);
  // A connection per checkout, as `bench:peers` has: a store registers its Lua scripts on its client under fixed
  // names, so an older checkout's store on the same client would replace this one's scripts (or be replaced).
  const connections = 1 + (only !== 'other' ? 1 : 0) + (compareDir && only !== 'this' ? 1 : 0);
  const links: RedisLink[] = [];
  const linkOf = (): RedisLink => {
    const client = createRedisClient(url);
    links.push({ client, admin, sent: new SentCommands(client), ownConnections: connections });
    return links[links.length - 1]!;
  };
  const runId = `focused-${randomBytes(4).toString('hex')}`;
  let prefixes = 0;
  const nextPrefix = () => `${runId}-${++prefixes}`;
  const systems: { name: string; api: ProjectApi; link: RedisLink }[] = [];
  if (only !== 'other') {
    systems.push({ name: 'this', api: thisDir ? await loadProjectApi(thisDir) : LOCAL_API, link: linkOf() });
  }
  if (compareDir && only !== 'this')
    systems.push({ name: 'other', api: await loadProjectApi(compareDir), link: linkOf() });
  const figures = new Map<string, Figures>(
    systems.map((s) => [
      s.name,
      {
        cpuUsPerRound: [],
        allocatedBytesPerRound: [],
        sentBytesPerRound: [],
        resumeP50Ms: [],
        resumeAll: [],
        resumeCpuUs: [],
        resumeCpuP50Us: [],
      },
    ]),
  );
  const load0 = loadavg();
  try {
    const parked = new Map(
      await Promise.all(
        systems.map(async (s) => [s.name, await parkTask(s.link, nextPrefix(), resumeK, s.api)] as const),
      ),
    );
    // Warm-up: one small cell each.
    for (const s of systems) await runProjectOnRedis({ k: 20, tasks: 5, repeat: 1 }, s.link, nextPrefix(), s.api);
    for (let pass = 0; pass < passes; pass++) {
      const order = pass % 2 === 0 ? systems : [...systems].reverse();
      for (const s of order) {
        const cell = await runProjectOnRedis({ k, tasks, repeat: 1 }, s.link, nextPrefix(), s.api);
        const samples = await parked.get(s.name)!.sample(resumeSamples);
        const times = samples.map((x) => x.ms);
        const f = figures.get(s.name)!;
        f.cpuUsPerRound.push(cell.mainCpuUsPerRound);
        f.allocatedBytesPerRound.push(cell.allocatedBytesPerRound ?? Number.NaN);
        f.sentBytesPerRound.push(cell.redis?.sentBytesPerRound ?? Number.NaN);
        f.resumeP50Ms.push(quantile(times, 0.5));
        f.resumeAll.push(...times);
        f.resumeCpuUs.push(...samples.map((x) => x.cpuUs));
        f.resumeCpuP50Us.push(
          quantile(
            samples.map((x) => x.cpuUs),
            0.5,
          ),
        );
        progress(
          `pass ${pass + 1} ${s.name}: ${cell.mainCpuUsPerRound.toFixed(1)} µs main CPU/round, ` +
            `${cell.roundsPerSecond.toFixed(0)} rounds/s, ` +
            `${((cell.allocatedBytesPerRound ?? Number.NaN) / 1024).toFixed(1)} KB allocated/round, ` +
            `${(cell.redis?.sentBytesPerRound ?? Number.NaN).toFixed(0)} B sent/round; resume p50 ${quantile(times, 0.5).toFixed(2)} ms, ` +
            `CPU p50 ${quantile(
              samples.map((x) => x.cpuUs),
              0.5,
            ).toFixed(0)} µs`,
        );
      }
    }
    for (const p of parked.values()) await p.close();
  } finally {
    for (const link of links) link.client.disconnect();
    admin.disconnect();
  }
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
  process.stdout.write(
    `K=${k} x ${tasks} tasks on Redis, resume of a ${resumeK}-round task (${resumeSamples} samples per pass), ` +
      `${passes} passes; load average ${load(load0)} at start, ${load(loadavg())} at end\n`,
  );
  for (const [name, f] of figures) {
    const list = (xs: number[], d: number) => xs.map((x) => x.toFixed(d)).join(' ');
    process.stdout.write(
      `${name}: main CPU µs/round median ${median(f.cpuUsPerRound).toFixed(1)}, min ${Math.min(...f.cpuUsPerRound).toFixed(1)} [${list(f.cpuUsPerRound, 1)}]; ` +
        `JS heap allocated/round median ${(median(f.allocatedBytesPerRound) / 1024).toFixed(1)} KB; ` +
        `sent to Redis/round median ${median(f.sentBytesPerRound).toFixed(0)} B; ` +
        `resume p50 median ${median(f.resumeP50Ms).toFixed(2)} ms [${list(f.resumeP50Ms, 2)}], ` +
        `all samples p50 ${quantile(f.resumeAll, 0.5).toFixed(2)} p90 ${quantile(f.resumeAll, 0.9).toFixed(2)} ms; ` +
        `resume main-thread CPU p50 ${quantile(f.resumeCpuUs, 0.5).toFixed(0)} µs\n`,
    );
  }
  const [mine, theirs] = [figures.get('this'), figures.get('other')];
  if (mine && theirs) {
    // Within each pass the two ran back to back: their ratio is less exposed to the load than either figure.
    const ratios = (a: number[], b: number[]) => a.map((x, i) => x / b[i]!);
    const wall = ratios(mine.resumeP50Ms, theirs.resumeP50Ms);
    const cpu = ratios(mine.resumeCpuP50Us, theirs.resumeCpuP50Us);
    const list = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(' ');
    process.stdout.write(
      `resume this/other per pass: p50 median ${median(wall).toFixed(2)} [${list(wall)}], ` +
        `main-thread CPU p50 median ${median(cpu).toFixed(2)} [${list(cpu)}]\n`,
    );
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
