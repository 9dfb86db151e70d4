/**
 * The bench's tables, in markdown: throughput with the in-run ratios, cost per round, the targets
 * (target | measured | met?), and the measurements outside the cells. Figures are medians over passes; a ratio is
 * the median of the ratios taken within each pass.
 */
import type { CellResult, SystemName } from './cell.js';
import type { ResumeFigures, WaitingFigures } from './extras.js';
import { median } from './measure.js';

export interface BenchResults {
  ks: number[];
  taskCounts: number[];
  labels: Record<SystemName, string>;
  /** Every cell of every pass, tagged with its pass. */
  cells: (CellResult & { pass: number })[];
  /** Single runs at the largest K of the flatness check (bytes per round), by system. */
  flat: CellResult[];
  resume: Partial<Record<SystemName, ResumeFigures>>;
  waiting: WaitingFigures | null;
  bareSetUs: number | null;
  peers: boolean;
}

const SYSTEMS: SystemName[] = ['project', 'project-memory', 'other', 'bare', 'langgraph'];

export function formatReport(results: BenchResults, header: string[]): string {
  return (
    [header.join('\n'), throughputTable(results), costTable(results), targetsTable(results), otherTable(results)].join(
      '\n\n',
    ) + '\n'
  );
}

// --- lookups ---------------------------------------------------------------------------------------------------

function runsOf(r: BenchResults, system: SystemName, k: number, tasks: number) {
  return r.cells.filter((c) => c.system === system && c.k === k && c.tasks === tasks);
}

/** Median of `pick` over the passes of one system's cell, or null when it did not run. */
function med(
  r: BenchResults,
  system: SystemName,
  k: number,
  tasks: number,
  pick: (c: CellResult) => number | null | undefined,
): number | null {
  const values = runsOf(r, system, k, tasks)
    .map(pick)
    .filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  return values.length > 0 ? median(values) : null;
}

/** Median over passes of (this system's rounds/s / the other's), taken within each pass. */
export function ratio(r: BenchResults, system: SystemName, other: SystemName, k: number, tasks: number): number | null {
  const ratios = runsOf(r, system, k, tasks).flatMap((c) => {
    const o = r.cells.find((x) => x.system === other && x.k === k && x.tasks === tasks && x.pass === c.pass);
    return o ? [c.roundsPerSecond / o.roundsPerSecond] : [];
  });
  return ratios.length > 0 ? median(ratios) : null;
}

// --- tables ----------------------------------------------------------------------------------------------------

function table(head: string[], align: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `| ${align.join(' | ')} |`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join(
    '\n',
  );
}

function cellsInOrder(r: BenchResults): { k: number; tasks: number; system: SystemName }[] {
  return r.ks.flatMap((k) =>
    r.taskCounts.flatMap((tasks) =>
      SYSTEMS.filter((s) => runsOf(r, s, k, tasks).length > 0).map((system) => ({ k, tasks, system })),
    ),
  );
}

function throughputTable(r: BenchResults): string {
  const withOther = r.cells.some((c) => c.system === 'other');
  const vs = (system: SystemName, other: SystemName, k: number, tasks: number) =>
    system === other ? '1' : times(ratio(r, system, other, k, tasks));
  const rows = cellsInOrder(r).map(({ k, tasks, system }) => [
    fmt(k),
    fmt(tasks),
    r.labels[system],
    fmt(med(r, system, k, tasks, (c) => c.roundsPerSecond)),
    vs(system, 'bare', k, tasks),
    vs(system, 'langgraph', k, tasks),
    ...(withOther ? [vs(system, 'other', k, tasks)] : []),
    String(runsOf(r, system, k, tasks).length),
  ]);
  const head = [
    'K',
    'tasks',
    'system',
    'rounds/s',
    '× bare loop',
    '× LangGraph',
    ...(withOther ? [`× ${r.labels.other.replace(/, RedisStore$/, '')}`] : []),
    'passes',
  ];
  return `### Throughput\n\n${table(head, ['---:', '---:', '---', ...head.slice(3).map(() => '---:')], rows)}`;
}

function costTable(r: BenchResults): string {
  const rows = cellsInOrder(r).map(({ k, tasks, system }) => {
    const m = (pick: (c: CellResult) => number | null | undefined) => med(r, system, k, tasks, pick);
    const redis = runsOf(r, system, k, tasks)[0]?.redis !== null;
    return [
      fmt(k),
      fmt(tasks),
      r.labels[system],
      fmt(m((c) => c.mainCpuUsPerRound)),
      fmt(m((c) => c.processCpuUsPerRound)),
      bytes(m((c) => c.allocatedBytesPerRound)),
      fixed(
        m((c) => c.savesPerRound),
        2,
      ),
      redis
        ? `${fixed(
            m((c) => c.redis?.serverCommandsPerRound),
            1,
          )} / ${fixed(
            m((c) => c.redis?.sentCommandsPerRound),
            1,
          )}`
        : '—',
      bytes(m((c) => c.storedBytesPerRound)),
      redis ? bytes(m((c) => c.redis?.memoryBytesPerRound)) : '—',
      redis ? bytes(m((c) => c.redis?.sentBytesPerRound)) : '—',
    ];
  });
  return (
    '### Cost per round\n\n' +
    table(
      [
        'K',
        'tasks',
        'system',
        'main-thread CPU µs',
        'process CPU µs',
        'JS heap allocated',
        'saves',
        'Redis commands: run / sent',
        'bytes kept',
        'Redis MEMORY USAGE',
        'bytes sent',
      ],
      ['---:', '---:', '---', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:'],
      rows,
    )
  );
}

interface Target {
  target: string;
  measured: string;
  met: boolean | null;
}

function targetsTable(r: BenchResults): string {
  const big = Math.max(...r.ks);
  const small = Math.min(...r.ks);
  const one = Math.min(...r.taskCounts);
  const many = Math.max(...r.taskCounts);
  const targets: Target[] = [];
  const atLeast = (value: number | null, bound: number) => (value === null ? null : value >= bound);

  const plural = (tasks: number) => `${fmt(tasks)} task${tasks > 1 ? 's' : ''}`;
  // Issue 25's targets: the project against the bare XState loop, in the same passes.
  for (const [k, bound] of [
    [big, 0.5],
    [small, 0.4],
  ] as const) {
    for (const tasks of [one, many]) {
      const vsBare = ratio(r, 'project', 'bare', k, tasks);
      targets.push({
        target: `K=${fmt(k)}, ${plural(tasks)}: ≥ ${bound}x the bare loop's rounds/s`,
        measured: times(vsBare),
        met: atLeast(vsBare, bound),
      });
    }
  }
  const cpuRatios = r.ks.flatMap((k) =>
    r.taskCounts.map((tasks) => {
      const project = med(r, 'project', k, tasks, (c) => c.mainCpuUsPerRound);
      const bare = med(r, 'bare', k, tasks, (c) => c.mainCpuUsPerRound);
      return { k, tasks, value: project !== null && bare !== null && bare > 0 ? project / bare : null };
    }),
  );
  const measuredCpu = cpuRatios.filter((c) => c.value !== null);
  targets.push({
    target: 'main-thread CPU per round on Redis ≤ 2x the bare loop’s, every cell',
    measured: measuredCpu.map((c) => `${fixed(c.value, 1)}x (K=${fmt(c.k)}×${fmt(c.tasks)})`).join(', ') || 'not run',
    met: measuredCpu.length > 0 ? measuredCpu.every((c) => c.value! <= 2) : null,
  });
  for (const [k, tasks, bound] of [
    [big, many, 20],
    [small, one, 4],
  ] as const) {
    const vsPeer = ratio(r, 'project', 'langgraph', k, tasks);
    targets.push({
      target: `K=${fmt(k)}, ${plural(tasks)}: ≥ ${bound}x LangGraph + SqliteSaver`,
      measured: r.peers ? times(vsPeer) : 'not run (`npm run bench:peers`)',
      met: r.peers ? atLeast(vsPeer, bound) : null,
    });
  }
  const compared = r.cells.some((c) => c.system === 'other');
  const vsOther = ratio(r, 'project', 'other', small, one);
  targets.push({
    target: `K=${fmt(small)}, ${plural(one)}: as fast as the --compare checkout or faster`,
    measured: compared ? `${times(vsOther)} (${r.labels.other.replace(/, RedisStore$/, '')})` : 'not run (`--compare`)',
    met: compared ? atLeast(vsOther, 0.97) : null,
  });
  const allocated = (system: SystemName) => med(r, system, big, many, (c) => c.allocatedBytesPerRound);
  const allocatedNow = allocated('project');
  const allocatedThen = compared ? allocated('other') : null;
  targets.push({
    target: `JS heap allocated per read round (K=${fmt(big)}, ${plural(many)}): at most half the --compare checkout's`,
    measured:
      allocatedNow === null
        ? 'not run'
        : `${bytes(allocatedNow)}` +
          (allocatedThen !== null ? ` vs ${bytes(allocatedThen)} (${fixed(allocatedNow / allocatedThen, 2)}x)` : ''),
    met: allocatedNow !== null && allocatedThen !== null ? allocatedNow <= allocatedThen / 2 : null,
  });
  // Saves a task makes per extra round: the slope between the smallest and the largest K, so start and end do not count.
  const savesAt = (k: number) => med(r, 'project', k, one, (c) => c.savesPerRound);
  const savesSmall = savesAt(small);
  const savesBig = savesAt(big);
  const slope =
    savesSmall !== null && savesBig !== null && big > small
      ? (savesBig * big - savesSmall * small) / (big - small)
      : null;
  targets.push({
    target: '1 save per read round (per extra round, K=' + `${fmt(small)} → ${fmt(big)})`,
    measured:
      slope === null
        ? 'not run'
        : `${fixed(slope, 3)} (${fixed(savesBig, 3)} per round at K=${fmt(big)}, start and answer included)`,
    met: slope === null ? null : slope <= 1.005,
  });
  const flat = r.flat.find((c) => c.system === 'project');
  const kept = [
    ...r.ks.map((k) => ({ k, value: med(r, 'project', k, one, (c) => c.storedBytesPerRound) })),
    ...(flat ? [{ k: flat.k, value: flat.storedBytesPerRound }] : []),
  ].filter((x): x is { k: number; value: number } => x.value !== null);
  const first = kept[0];
  const last = kept.at(-1);
  targets.push({
    target: `bytes kept per round ≤ 3 KB, flat from K=${fmt(first?.k ?? small)} to K=${fmt(last?.k ?? big)} (last ≤ 1.2x first)`,
    measured: kept.map((x) => `${bytes(x.value)} (K=${fmt(x.k)})`).join(', ') || 'not run',
    met: first && last ? kept.every((x) => x.value <= 3 * 1024) && last.value <= 1.2 * first.value : null,
  });
  const resume = r.resume.project;
  targets.push({
    target: `resume of a ${fmt(resume?.rounds ?? 200)}-round task < 2 ms (p50, to the first acknowledged save)`,
    measured: resume
      ? `${fixed(resume.p50Ms, 2)} ms (p99 ${fixed(resume.p99Ms, 2)} ms, ${resume.samples} resumes)`
      : 'not run',
    met: resume ? resume.p50Ms < 2 : null,
  });
  const rows = targets.map((t) => [t.target, t.measured, t.met === null ? '—' : t.met ? 'yes' : '**no**']);
  return `### Targets\n\n${table(['target', 'measured', 'met?'], ['---', '---', ':---:'], rows)}`;
}

function otherTable(r: BenchResults): string {
  const columns: SystemName[] = ['project', ...(r.resume.other ? (['other'] as const) : []), 'bare', 'langgraph'];
  const resume = (system: SystemName) => {
    const f = r.resume[system];
    return f ? `${fixed(f.p50Ms, 2)} / ${fixed(f.p99Ms, 2)} ms` : '—';
  };
  const flatBytes = (system: SystemName) => {
    const f = r.flat.find((c) => c.system === system);
    return f ? `${bytes(f.storedBytesPerRound)} kept, ${bytes(f.redis?.sentBytesPerRound ?? null)} sent` : '—';
  };
  const only = (system: SystemName, text: string) => columns.map((c) => (c === system ? text : '—'));
  const rows = [
    [
      `resume of a parked ${fmt(r.resume.project?.rounds ?? r.resume.bare?.rounds ?? 0)}-round task, to its first save: p50 / p99`,
      ...columns.map(resume),
    ],
    [`bytes per round at K=${fmt(r.flat[0]?.k ?? 0)}, one task`, ...columns.map(flatBytes)],
  ];
  if (r.waiting) {
    const w = r.waiting;
    rows.push([
      `memory per task waiting for a confirmation (${fmt(w.tasks)} tasks): Redis used_memory / Node heap / rss`,
      ...only('project', `${bytes(w.redisBytesPerTask)} / ${bytes(w.heapBytesPerTask)} / ${bytes(w.rssBytesPerTask)}`),
    ]);
  }
  if (r.bareSetUs !== null)
    rows.push(['a bare SET of 4 KB, sequential: round trip', ...only('bare', `${fmt(r.bareSetUs)} µs`)]);
  const head = [
    'measure',
    ...columns.map((c) =>
      c === 'project'
        ? 'this project'
        : c === 'bare'
          ? 'bare loop'
          : c === 'langgraph'
            ? 'LangGraph'
            : r.labels.other.replace(/, RedisStore$/, ''),
    ),
  ];
  return `### Other measurements\n\n${table(head, ['---', ...columns.map(() => '---:')], rows)}`;
}

// --- formatting ------------------------------------------------------------------------------------------------

export const fmt = (n: number | null) => (n === null ? '—' : Math.round(n).toLocaleString('en-US'));
const fixed = (n: number | null | undefined, digits: number) =>
  n === null || n === undefined ? '—' : n.toFixed(digits);
const times = (n: number | null) => (n === null ? '—' : n >= 10 ? `${n.toFixed(0)}x` : `${n.toFixed(2)}x`);
const bytes = (n: number | null) => (n === null ? '—' : n >= 10_240 ? `${(n / 1024).toFixed(0)} KB` : `${fmt(n)} B`);
