/** This project in the bench: the orchestrator on a RedisStore (a fresh prefix per cell) or on a MemoryStore. */
import type { Orchestrator, TaskStore } from '../../src/index.js';
import {
  type CellResult,
  type CellRun,
  type Drive,
  type RedisLink,
  type SystemName,
  measureInProcess,
  measureOnRedis,
} from './cell.js';
import { deleteMatching } from './measure.js';
import { LOCAL_API, type ProjectApi } from './projectApi.js';
import { BENCH_PRINCIPAL, goalFor, projectOptions } from './workload.js';

/** Runs one cell of this project (or of the checkout `api` comes from) on Redis under `{prefix}`, deleted afterwards. */
export async function runProjectOnRedis(
  run: CellRun,
  link: RedisLink,
  prefix: string,
  api: ProjectApi = LOCAL_API,
  system: SystemName = 'project',
): Promise<CellResult> {
  const tasks = new ProjectTasks(new api.RedisStore({ client: link.client, prefix }), api);
  try {
    return await measureOnRedis(system, run, link, `{${prefix}}`, () => tasks.drive(run));
  } finally {
    await tasks.close();
    await deleteMatching(link.admin, `{${prefix}}:*`);
  }
}

/** Runs one cell of this project on a MemoryStore: the runtime's own cost, with leases and journals in memory. */
export async function runProjectInMemory(run: CellRun): Promise<CellResult> {
  const tasks = new ProjectTasks(new LOCAL_API.MemoryStore(), LOCAL_API);
  try {
    return await measureInProcess('project-memory', run, () => tasks.drive(run));
  } finally {
    await tasks.close();
  }
}

let cellNumber = 0;

/** An orchestrator on `store`, counting acknowledged saves with `onSaved`. */
class ProjectTasks {
  private readonly orchestrator: Orchestrator;
  private saves = 0;

  constructor(store: TaskStore, api: ProjectApi) {
    this.orchestrator = api.createOrchestrator(projectOptions(store, undefined, api));
    this.orchestrator.onSaved(() => {
      this.saves += 1;
    });
  }

  /** `run.tasks` tasks at once, `run.repeat` times in a row; each must end done. */
  async drive({ k, tasks, repeat }: CellRun): Promise<Drive> {
    cellNumber += 1;
    this.saves = 0;
    for (let r = 0; r < repeat; r++) {
      const ids = Array.from({ length: tasks }, (_, i) => `c${cellNumber}-r${r}-t${i}`);
      const settled = await Promise.all(
        ids.map((taskId) => this.orchestrator.run({ principal: BENCH_PRINCIPAL, goal: goalFor(k), taskId })),
      );
      // The workload reads and answers; it declares no success criterion, so it ends answered (never done). A build
      // before agent/6 (a --compare checkout) ends it done.
      const wrong = settled.find((s) => s.state !== 'answered' && s.state !== 'done');
      if (wrong) throw new Error(`bench task ${wrong.taskId} ended ${wrong.state}, not answered`);
    }
    return { rounds: k * tasks * repeat, saves: this.saves };
  }

  close(): Promise<void> {
    return this.orchestrator.close();
  }
}
