/**
 * The workers bench's tables, in markdown: per configuration (medians over passes), the scaling targets (a ratio is
 * the median of the ratios taken within each pass, so both sides of it ran minutes apart at most), and every pass.
 */
import { median } from './measure.js';
import type { PassResult } from './workersPass.js';

export const WORKER_COUNTS = [1, 2, 4] as const;

export interface ScalingTarget {
  label: string;
  workers: number;
  baseline: number;
  bound: number;
  /** Median over passes of the ratio within each pass (tasks/s); null when a side did not run. */
  ratio: number | null;
  perPass: number[];
  /** The same for steps/s. */
  stepsRatio: number | null;
  met: boolean | null;
}

export interface ConfigurationSummary {
  workers: number;
  passes: number;
  tasksPerSecond: number;
  stepsPerSecond: number;
  stepsPerTask: number;
  workerCpuUsPerStep: number;
  apiCpuUsPerStep: number;
  redisCpuUsPerStep: number;
  redisBusiestCpuUsPerStep: number;
  redisCommandsPerStep: number;
  machineBusy: number;
  seconds: number;
  /** tasks/s against the previous configuration (2 against 1, 4 against 2), the median of the ratios within passes. */
  ratioToPrevious: number | null;
}

export interface WorkersBenchResults {
  meta: Record<string, unknown>;
  passes: PassResult[];
  configurations: ConfigurationSummary[];
  targets: ScalingTarget[];
  warnings: string[];
}

export type TargetBound = Pick<ScalingTarget, 'label' | 'workers' | 'baseline' | 'bound'>;

/**
 * The scaling targets. When the model replies at once the work is CPU-bound, and the bounds are what a machine with
 * cores to spare should give (1.5x, then 1x). When every turn waits on the model (issue 29: 50 ms), a worker spends
 * most of its time waiting at a fixed concurrency, so added processes add nearly their share: 1.8x, then 1.7x.
 */
export function targetsFor(modelLatencyMs: number): TargetBound[] {
  const [two, four] = modelLatencyMs > 0 ? [1.8, 1.7] : [1.5, 1];
  return [
    { label: '2 workers / 1 worker, tasks/s', workers: 2, baseline: 1, bound: two },
    { label: '4 workers / 2 workers, tasks/s', workers: 4, baseline: 2, bound: four },
  ];
}

/** The median over passes of `pick(workers) / pick(baseline)` within each pass (null when a side did not run). */
function withinPasses(passes: PassResult[], workers: number, baseline: number, pick: (p: PassResult) => number) {
  return passes
    .filter((p) => p.workers === workers)
    .flatMap((p) => {
      const base = passes.find((b) => b.workers === baseline && b.pass === p.pass);
      return base ? [pick(p) / pick(base)] : [];
    });
}

export function summarize(
  passes: PassResult[],
  bounds: TargetBound[] = targetsFor(0),
): Pick<WorkersBenchResults, 'configurations' | 'targets' | 'warnings'> {
  const configurations = WORKER_COUNTS.flatMap((workers, at) => {
    const runs = passes.filter((p) => p.workers === workers);
    if (runs.length === 0) return [];
    const m = (pick: (p: PassResult) => number) => median(runs.map(pick).filter(Number.isFinite));
    const previous = at > 0 ? withinPasses(passes, workers, WORKER_COUNTS[at - 1]!, (p) => p.tasksPerSecond) : [];
    return [
      {
        workers,
        passes: runs.length,
        tasksPerSecond: m((p) => p.tasksPerSecond),
        stepsPerSecond: m((p) => p.stepsPerSecond),
        stepsPerTask: m((p) => p.stepsPerTask),
        workerCpuUsPerStep: m((p) => p.workerCpuUsPerStep),
        apiCpuUsPerStep: m((p) => p.apiCpuUsPerStep),
        redisCpuUsPerStep: m((p) => p.redisCpuUsPerStep),
        redisBusiestCpuUsPerStep: m((p) => p.redisBusiestCpuUsPerStep),
        redisCommandsPerStep: m((p) => p.redisCommandsPerStep),
        machineBusy: m((p) => p.machineBusy),
        seconds: m((p) => p.seconds),
        ratioToPrevious: previous.length > 0 ? median(previous) : null,
      },
    ];
  });
  const targets = bounds.map((t): ScalingTarget => {
    const within = (pick: (p: PassResult) => number) => withinPasses(passes, t.workers, t.baseline, pick);
    const perPass = within((p) => p.tasksPerSecond);
    const steps = within((p) => p.stepsPerSecond);
    const ratio = perPass.length > 0 ? median(perPass) : null;
    return {
      ...t,
      ratio,
      perPass,
      stepsRatio: steps.length > 0 ? median(steps) : null,
      met: ratio === null ? null : ratio >= t.bound,
    };
  });
  const warnings = passes.flatMap((p) => p.warnings.map((w) => `pass ${p.pass}, ${p.workers} worker(s): ${w}`));
  return { configurations, targets, warnings };
}

export function formatReport(results: WorkersBenchResults, header: string[]): string {
  const sections = [header.join('\n'), configurationTable(results), targetTable(results), passTable(results)];
  if (results.warnings.length > 0)
    sections.push(`### Warnings\n\n${results.warnings.map((w) => `- **WARNING** ${w}`).join('\n')}`);
  return sections.join('\n\n') + '\n';
}

function table(head: string[], align: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `| ${align.join(' | ')} |`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join(
    '\n',
  );
}

function configurationTable(r: WorkersBenchResults): string {
  const rows = r.configurations.map((c) => [
    String(c.workers),
    fmt(c.tasksPerSecond),
    fmt(c.stepsPerSecond),
    fixed(c.stepsPerTask, 2),
    fmt(c.workerCpuUsPerStep),
    fmt(c.apiCpuUsPerStep),
    fmt(c.redisCpuUsPerStep),
    fmt(c.redisBusiestCpuUsPerStep),
    fixed(c.redisCommandsPerStep, 1),
    percent(c.machineBusy),
    times(c.ratioToPrevious),
    String(c.passes),
  ]);
  const head = [
    'workers',
    'tasks/s',
    'steps/s',
    'steps/task',
    'worker Node CPU µs/step',
    'API Node CPU µs/step',
    'Redis CPU µs/step',
    'busiest Redis server CPU µs/step',
    'Redis commands/step',
    'machine CPU busy',
    'tasks/s vs previous row',
    'passes',
  ];
  const onCluster = r.passes.filter((p) => p.busiestHoldsQueue !== null);
  const queue =
    onCluster.length > 0
      ? `\n\nThe busiest master was the one that holds the BullMQ queue's slot in ${onCluster.filter((p) => p.busiestHoldsQueue).length} of ${onCluster.length} passes.`
      : '';
  return `### Throughput and CPU per step\n\n${table(
    head,
    head.map(() => '---:'),
    rows,
  )}${queue}`;
}

function targetTable(r: WorkersBenchResults): string {
  const rows = r.targets.map((t) => [
    `${t.label} ≥ ${t.bound.toFixed(1)}x`,
    t.ratio === null
      ? 'not run'
      : `${times(t.ratio)} (per pass: ${t.perPass.map(times).join(', ')}; steps/s ${times(t.stepsRatio)})`,
    t.met === null ? '—' : t.met ? 'met' : '**not met**',
  ]);
  return `### Scaling targets (same run)\n\n${table(['target', 'measured', 'met?'], ['---', '---', ':---:'], rows)}`;
}

function passTable(r: WorkersBenchResults): string {
  const rows = r.passes.map((p) => [
    String(p.pass),
    String(p.workers),
    fixed(p.seconds, 2),
    `${fixed(p.startSeconds, 2)} (${fmt(p.doneWhenStarted)} done)`,
    fmt(p.tasksPerSecond),
    fmt(p.stepsPerSecond),
    p.savesPerWorker.map(fmt).join(' / '),
    fmt(p.workerCpuUsPerStep),
    fmt(p.apiCpuUsPerStep),
    fmt(p.redisCpuUsPerStep),
    `${fmt(p.records)} / ${fmt(p.tasks)}`,
  ]);
  const head = [
    'pass',
    'workers',
    'seconds',
    'all started after s',
    'tasks/s',
    'steps/s',
    'saves per worker',
    'worker CPU µs/step',
    'API CPU µs/step',
    'Redis CPU µs/step',
    'records / tasks',
  ];
  return `### Passes (in the order run)\n\n${table(head, ['---:', '---:', '---:', '---:', '---:', '---:', '---', '---:', '---:', '---:', '---:'], rows)}`;
}

export const fmt = (n: number | null) =>
  n === null || !Number.isFinite(n) ? '—' : Math.round(n).toLocaleString('en-US');
const fixed = (n: number | null, digits: number) => (n === null || !Number.isFinite(n) ? '—' : n.toFixed(digits));
export const times = (n: number | null) => (n === null || !Number.isFinite(n) ? '—' : `${n.toFixed(2)}x`);
const percent = (n: number) => (Number.isFinite(n) ? `${Math.round(n * 100)}%` : '—');
