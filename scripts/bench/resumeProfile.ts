/**
 * Profiles the resume of a parked K-round task alone: the task is parked as in `focused.ts`, then N resumes run under
 * the V8 profiler, and only the samples taken between a resume's start and its first acknowledged save are kept.
 * First, unprofiled, it times the phases of a resume (p50 of each, in µs), marked from outside the library: the
 * store's `acquireAndRead` called and answered, the envelope parsed (`read.load`), the model asked, the save called
 * and acknowledged.
 *
 * `--from` and `--to` (phase marks: "lease and read answered", "parsed", "model asked", "save called"...) narrow
 * the profiled window to the part of a resume between them.
 *
 *   npx tsx scripts/bench/resumeProfile.ts [--resume-k 200] [--samples 200] [--out /tmp/resume.cpuprofile] [--top 40]
 *     [--from MARK] [--to MARK]
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { DEFAULT_REDIS_URL, createRedisClient } from '../../src/store/redis/redisConnection.js';
import { deleteMatching, quantile } from './measure.js';
import { LOCAL_API } from './projectApi.js';
import type { TaskStore } from '../../src/index.js';
import { parkTask } from './workload.js';

const args = process.argv.slice(2);
const text = (name: string) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? args[at + 1] : undefined;
};
const k = Number(text('resume-k') ?? 200);
const samples = Number(text('samples') ?? 200);
const out = text('out') ?? '/tmp/resume.cpuprofile';
const top = Number(text('top') ?? 40);
const from = text('from') ?? 'started';
const to = text('to') ?? 'save acknowledged';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

const nowUs = () => Number(process.hrtime.bigint() / 1000n);

async function main(): Promise<void> {
  const api = LOCAL_API;
  const client = createRedisClient(process.env.REDIS_URL ?? DEFAULT_REDIS_URL);
  const prefix = `rprof-${randomBytes(4).toString('hex')}`;
  const store = new api.RedisStore({ client, prefix });
  const marks: [string, number][] = [];
  const mark = (name: string) => marks.push([name, nowUs()]);
  timePhases(store, mark);
  const task = await parkTask(store, k, api);
  await phases(task, marks, mark);
  const windows: [number, number][] = [];
  const times: number[] = [];
  const once = async () => {
    let recording = false;
    marks.length = 0;
    await task.resumeOnce({
      started: () => {
        recording = true;
        mark('started');
      },
      decided: () => recording && mark('model asked'),
      saved: () => {
        mark('save acknowledged');
        recording = false;
      },
    });
    const start = marks.find(([name]) => name === from)?.[1];
    const end = marks.find(([name]) => name === to)?.[1];
    if (start === undefined || end === undefined) throw new Error(`no mark "${from}" or "${to}" in a resume`);
    windows.push([start, end]);
    times.push((end - start) / 1000);
  };
  for (let i = 0; i < 10; i++) await once();
  windows.length = 0;
  times.length = 0;
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 50 });
  await session.post('Profiler.start');
  for (let i = 0; i < samples; i++) await once();
  const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: Profile };
  session.disconnect();
  await deleteMatching(client, `{${prefix}}:*`);
  client.disconnect();
  writeFileSync(out, JSON.stringify(profile));
  summarise(profile, windows);
  process.stdout.write(
    `resume wall p50 ${quantile(times, 0.5).toFixed(2)} ms (${from} -> ${to}) over ${samples} samples (profiled)\n`,
  );
}

type Parked = Awaited<ReturnType<typeof parkTask>>;

/** Marks the store's reads and saves of `store` (own properties over its class's methods; `load` stays its own). */
function timePhases(store: TaskStore, mark: (name: string) => void): void {
  const acquireAndRead = store.acquireAndRead!.bind(store);
  store.acquireAndRead = async (taskId, ttlMs) => {
    mark('lease and read asked');
    const taken = await acquireAndRead(taskId, ttlMs);
    mark('lease and read answered');
    const read = taken?.read;
    if (!read) return taken;
    const load = read.load.bind(read);
    return {
      ...taken,
      read: {
        quarantined: read.quarantined,
        load: () => {
          mark('parse start');
          const envelope = load();
          mark('parsed');
          return envelope;
        },
      },
    };
  };
  const save = store.save.bind(store);
  store.save = async (request) => {
    mark('save called');
    await save(request);
  };
}

/** What each phase of a resume takes (p50 over `samples` resumes, unprofiled), from the marks. */
async function phases(task: Parked, marks: [string, number][], mark: (name: string) => void): Promise<void> {
  const spans = new Map<string, number[]>();
  const total: number[] = [];
  for (let i = 0; i < samples + 10; i++) {
    let recording = false;
    marks.length = 0;
    await task.resumeOnce({
      started: () => {
        recording = true;
        marks.length = 0;
        mark('started');
      },
      decided: () => recording && mark('model asked'),
      saved: () => {
        mark('save acknowledged');
        recording = false;
      },
    });
    // Ends at the acknowledgement: marks after it (the next round's save) belong to no resume window.
    const end = marks.findIndex(([name]) => name === 'save acknowledged');
    if (i < 10 || end < 0) continue;
    const window = marks.slice(0, end + 1);
    for (let j = 1; j < window.length; j++) {
      const name = `${window[j - 1]![0]} -> ${window[j]![0]}`;
      spans.set(name, [...(spans.get(name) ?? []), window[j]![1] - window[j - 1]![1]]);
    }
    total.push(window.at(-1)![1] - window[0]![1]);
  }
  process.stdout.write(`phases of a resume (p50 µs over ${total.length}, unprofiled):\n`);
  for (const [name, us] of spans) process.stdout.write(`${quantile(us, 0.5).toFixed(0).padStart(6)}  ${name}\n`);
  process.stdout.write(`${quantile(total, 0.5).toFixed(0).padStart(6)}  started -> save acknowledged\n`);
}

function summarise(profile: Profile, windows: [number, number][]): void {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const label = (n: Node) =>
    `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.replace(/.*\/(node_modules\/[^/]+|machines|src|scripts)\//, '$1/')}:${n.callFrame.lineNumber + 1}`;
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let t = profile.startTime;
  let w = 0;
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i]!;
    const dt = profile.timeDeltas[i + 1] ?? 0;
    while (w < windows.length && windows[w]![1] < t) w++;
    if (w >= windows.length || t < windows[w]![0]) continue;
    const leaf = byId.get(profile.samples[i]!)!;
    if (leaf.callFrame.functionName === '(idle)' || leaf.callFrame.functionName === '(program)') continue;
    total += dt;
    self.set(label(leaf), (self.get(label(leaf)) ?? 0) + dt);
    const seen = new Set<string>();
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const l = label(byId.get(id)!);
      if (seen.has(l)) continue;
      seen.add(l);
      inclusive.set(l, (inclusive.get(l) ?? 0) + dt);
    }
  }
  const per = (us: number) =>
    `${(us / windows.length).toFixed(0).padStart(5)} µs ${((100 * us) / total).toFixed(1).padStart(5)}%`;
  process.stdout.write(`busy in resume windows: ${(total / windows.length).toFixed(0)} µs per resume\n--- self\n`);
  for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
    process.stdout.write(`${per(us)} ${name}\n`);
  process.stdout.write('--- inclusive\n');
  for (const [name, us] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top * 2))
    process.stdout.write(`${per(us)} ${name}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
