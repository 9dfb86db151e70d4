/**
 * The bench's schedule: a warm-up, then passes over every cell (K x concurrent tasks) in which the systems take
 * turns in an order that changes from pass to pass (`schedule.ts`), with resume samples of parked tasks at the end
 * of each pass, so that a noisy minute on a shared machine hits every system alike. Then the one-off measurements.
 */
import { runBareOnRedis } from './bareLoop.js';
import { type Cell, type CellResult, type CellRun, type RedisLink, SYSTEM_LABELS, type SystemName } from './cell.js';
import {
  type Resumable,
  bareSetRoundTripUs,
  parkBareTask,
  parkProjectTask,
  resumeFigures,
  waitingTasks,
} from './extras.js';
import type { LangGraphPeer } from './langgraphPeer.js';
import { runProjectInMemory, runProjectOnRedis } from './project.js';
import type { ProjectApi } from './projectApi.js';
import { type BenchResults, fmt } from './report.js';
import { passOrder, rotate } from './schedule.js';

export interface Plan {
  ks: number[];
  taskCounts: number[];
  passes: number;
  /** LangGraph runs in the first this-many passes only (its K=200 x 50 cell takes about 90 s). */
  peerPasses: number;
  /** The largest K of the bytes-per-round flatness check (one task, once). */
  flatK: number;
  resumeK: number;
  /** Resume samples per system, spread over its passes. */
  resumeSamples: number;
  waitingTasks: number;
  bareSets: number;
  /** Rounds a cell has at least (more batches in a row when one batch has fewer)... */
  minRounds: number;
  peerMinRounds: number;
  /** ...and how long it lasts at least, at the rate the system showed in the previous pass (or its warm-up). */
  minSeconds: number;
}

export const FULL_PLAN: Plan = {
  ks: [10, 200],
  taskCounts: [1, 50],
  passes: 5,
  peerPasses: 3,
  flatK: 1_000,
  resumeK: 200,
  resumeSamples: 50,
  waitingTasks: 5_000,
  bareSets: 2_000,
  minRounds: 1_000,
  peerMinRounds: 200,
  minSeconds: 0.75,
};

/** A seconds-long run for the smoke test: every code path, figures that mean nothing. */
export const TINY_PLAN: Plan = {
  ks: [3, 6],
  taskCounts: [1, 3],
  passes: 1,
  peerPasses: 1,
  flatK: 12,
  resumeK: 5,
  resumeSamples: 3,
  waitingTasks: 20,
  bareSets: 50,
  minRounds: 1,
  peerMinRounds: 1,
  minSeconds: 0,
};

export interface BenchContext {
  plan: Plan;
  projectLink: RedisLink;
  bareLink: RedisLink;
  peer: LangGraphPeer | null;
  /** Another checkout of this project, run in the same passes on its own connection. */
  other: { api: ProjectApi; label: string; link: RedisLink } | null;
  nextPrefix: () => string;
  progress: (text: string) => void;
}

export async function runBench(ctx: BenchContext): Promise<BenchResults> {
  const { plan, projectLink, bareLink, peer, other, nextPrefix, progress } = ctx;
  const labels = { ...SYSTEM_LABELS, ...(other ? { other: `${other.label}, RedisStore` } : {}) };
  const results: BenchResults = {
    ks: plan.ks,
    taskCounts: plan.taskCounts,
    labels,
    cells: [],
    flat: [],
    resume: {},
    waiting: null,
    bareSetUs: null,
    peers: peer !== null,
  };

  progress('warm-up: every system once, untimed');
  const warmUp: CellRun = { k: 20, tasks: 5, repeat: 2 };
  /** Rounds/s each system showed last, by system and cell ("warm-up" before its first), to size its next cell. */
  const rates = new Map<string, number>();
  rates.set('project warm-up', (await runProjectOnRedis(warmUp, projectLink, nextPrefix())).roundsPerSecond);
  rates.set('project-memory warm-up', (await runProjectInMemory(warmUp)).roundsPerSecond);
  rates.set('bare warm-up', (await runBareOnRedis(warmUp, bareLink, nextPrefix())).roundsPerSecond);
  if (other)
    rates.set(
      'other warm-up',
      (await runProjectOnRedis(warmUp, other.link, nextPrefix(), other.api, 'other')).roundsPerSecond,
    );

  const runCell = (system: SystemName, cell: Cell): Promise<CellResult> => {
    const rate = rates.get(`${system} ${cell.k}x${cell.tasks}`) ?? rates.get(`${system} warm-up`) ?? 0;
    const run = (minRounds: number): CellRun => ({
      ...cell,
      repeat: Math.max(1, Math.ceil(Math.max(minRounds, rate * plan.minSeconds) / (cell.k * cell.tasks))),
    });
    switch (system) {
      case 'project':
        return runProjectOnRedis(run(plan.minRounds), projectLink, nextPrefix());
      case 'project-memory':
        return runProjectInMemory(run(plan.minRounds));
      case 'other':
        return runProjectOnRedis(run(plan.minRounds), other!.link, nextPrefix(), other!.api, 'other');
      case 'bare':
        return runBareOnRedis(run(plan.minRounds), bareLink, nextPrefix());
      case 'langgraph':
        return peer!.cell(run(plan.peerMinRounds));
    }
  };

  progress(`parking a ${plan.resumeK}-round task per system for the resume samples`);
  const resumables: Partial<Record<SystemName, Resumable>> = {};
  const resumeTimes: Partial<Record<SystemName, number[]>> = {};
  try {
    resumables.project = await parkProjectTask(projectLink, nextPrefix(), plan.resumeK);
    resumables.bare = await parkBareTask(bareLink, nextPrefix(), plan.resumeK);
    if (other) resumables.other = await parkProjectTask(other.link, nextPrefix(), plan.resumeK, other.api);
    if (peer) resumables.langgraph = peer.resumable(plan.resumeK);

    const cells: Cell[] = plan.ks.flatMap((k) => plan.taskCounts.map((tasks) => ({ k, tasks })));
    const bigK = Math.max(...plan.ks);
    const passesOf = (system: SystemName) =>
      system === 'langgraph' ? Math.min(plan.peerPasses, plan.passes) : plan.passes;
    for (let pass = 1; pass <= plan.passes; pass++) {
      const systemsOf = (cell: Cell): SystemName[] => [
        'project',
        ...(other ? (['other'] as const) : []),
        'bare',
        ...(cell.k === bigK ? (['project-memory'] as const) : []),
        ...(peer && pass <= passesOf('langgraph') ? (['langgraph'] as const) : []),
      ];
      for (const cell of rotate(cells, pass)) {
        for (const system of passOrder(systemsOf(cell), pass, cells.indexOf(cell))) {
          const result = await runCell(system, cell);
          rates.set(`${system} ${cell.k}x${cell.tasks}`, result.roundsPerSecond);
          results.cells.push({ ...result, pass });
          progress(
            `pass ${pass}/${plan.passes}  K=${cell.k} x ${cell.tasks}  ${labels[system].padEnd(26)} ${fmt(result.roundsPerSecond).padStart(7)} rounds/s  ` +
              `${fmt(result.mainCpuUsPerRound).padStart(6)} µs CPU/round  (${fmt(result.rounds)} rounds in ${(result.wallMs / 1000).toFixed(1)} s)`,
          );
        }
      }
      for (const system of rotate(['project', 'other', 'bare', 'langgraph'] as const, pass)) {
        const resumable = resumables[system];
        if (!resumable || pass > passesOf(system)) continue;
        const times = await resumable.sample(Math.ceil(plan.resumeSamples / passesOf(system)));
        (resumeTimes[system] ??= []).push(...times);
        progress(
          `pass ${pass}/${plan.passes}  resume of a ${plan.resumeK}-round task  ${labels[system].padEnd(26)} p50 ${resumeFigures(plan.resumeK, times).p50Ms.toFixed(2)} ms`,
        );
      }
      if (pass === 1) {
        progress(`bytes per round at K=${fmt(plan.flatK)}, one task`);
        results.flat.push(await runProjectOnRedis({ k: plan.flatK, tasks: 1, repeat: 1 }, projectLink, nextPrefix()));
        results.flat.push(await runBareOnRedis({ k: plan.flatK, tasks: 1, repeat: 1 }, bareLink, nextPrefix()));
      }
    }
    for (const [system, times] of Object.entries(resumeTimes) as [SystemName, number[]][])
      results.resume[system] = resumeFigures(plan.resumeK, times);
  } finally {
    for (const resumable of Object.values(resumables)) await resumable.close();
  }

  progress(`${fmt(plan.waitingTasks)} tasks waiting for a confirmation`);
  results.waiting = await waitingTasks(projectLink, nextPrefix(), plan.waitingTasks);
  results.bareSetUs = await bareSetRoundTripUs(bareLink, nextPrefix(), 4096, plan.bareSets);
  return results;
}
