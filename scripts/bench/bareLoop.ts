/**
 * The in-run baseline: the same rounds as a plain XState v5 machine per task (thinking -> acting -> thinking ...
 * -> done) on Redis, written the way one would without this library, and without its gates, leases or audit.
 * Every transition is persisted before the next effect runs: the invoked model and tool calls first wait until
 * the snapshot of the state that invoked them is acknowledged. A save is one Lua compare-and-set of the snapshot
 * plus an RPUSH of the transition's history entry (`casSnapshot.lua`). The snapshot stays small: the history
 * lives in the list, the context keeps only the round, the pending call and the last result.
 */
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { type SnapshotFrom, assign, createActor, fromPromise, setup } from 'xstate';
import { type CellResult, type CellRun, type RedisLink, measureOnRedis } from './cell.js';
import { deleteMatching } from './measure.js';
import { RESULT_TEXT, scriptedStep } from './workload.js';

const CAS_SCRIPT = readFileSync(new URL('./casSnapshot.lua', import.meta.url), 'utf8');

type CasClient = Redis & {
  benchCasSnapshot(
    snapshotKey: string,
    historyKey: string,
    expected: number,
    snapshot: string,
    entry: string,
  ): Promise<number>;
};

interface BareContext {
  taskId: string;
  k: number;
  round: number;
  call: { callId: string; n: number } | null;
  last: string | null;
  answer: string | null;
}

type Proposal = ReturnType<typeof scriptedStep>;

/** Per task: the chain of its saves, in transition order. */
interface TaskSaves {
  revision: number;
  pending: number;
  saves: number;
  chain: Promise<void>;
}

/** The machine of one task. Its actors wait on `durable(taskId)` before doing anything. */
function bareMachine(durable: (taskId: string) => Promise<void>, hangs: (round: number) => boolean) {
  return setup({
    types: { context: {} as BareContext, input: {} as { taskId: string; k: number } },
    actors: {
      model: fromPromise<Proposal, { taskId: string; round: number; k: number }>(async ({ input, signal }) => {
        await durable(input.taskId);
        if (hangs(input.round)) {
          return new Promise<never>((_, reject) =>
            signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }),
          );
        }
        return scriptedStep(input.round, input.k);
      }),
      tool: fromPromise<string, { taskId: string; n: number }>(async ({ input }) => {
        await durable(input.taskId);
        return JSON.stringify({ n: input.n, text: RESULT_TEXT });
      }),
    },
  }).createMachine({
    id: 'bare',
    initial: 'thinking',
    context: ({ input }) => ({ taskId: input.taskId, k: input.k, round: 0, call: null, last: null, answer: null }),
    states: {
      thinking: {
        invoke: {
          src: 'model',
          input: ({ context }) => ({ taskId: context.taskId, round: context.round + 1, k: context.k }),
          onDone: [
            {
              guard: ({ event }) => event.output.type === 'answer',
              target: 'done',
              actions: assign({ answer: ({ event }) => (event.output.type === 'answer' ? event.output.text : null) }),
            },
            {
              target: 'acting',
              actions: assign(({ context, event }) => ({
                round: context.round + 1,
                call: { callId: `c${context.round + 1}`, n: event.output.type === 'call' ? event.output.n : 0 },
              })),
            },
          ],
        },
      },
      acting: {
        invoke: {
          src: 'tool',
          input: ({ context }) => ({ taskId: context.taskId, n: context.call!.n }),
          onDone: { target: 'thinking', actions: assign({ last: ({ event }) => event.output, call: null }) },
        },
      },
      done: { type: 'final' },
    },
  });
}

type BareMachine = ReturnType<typeof bareMachine>;

/** What the transition into `snapshot` adds to the history list. */
function historyEntry(snapshot: SnapshotFrom<BareMachine>): string {
  const { context } = snapshot;
  if (snapshot.value === 'acting')
    return JSON.stringify({ kind: 'proposal', round: context.round, call: context.call });
  if (snapshot.value === 'done')
    return JSON.stringify({ kind: 'answer', round: context.round + 1, text: context.answer });
  if (context.round === 0) return JSON.stringify({ kind: 'goal', k: context.k });
  return JSON.stringify({ kind: 'result', round: context.round, result: context.last });
}

/** Tasks of the bare loop under one key prefix. */
export class BareLoop {
  readonly root: string;
  private readonly client: CasClient;
  private readonly tasks = new Map<string, TaskSaves>();
  private readonly machine: BareMachine;
  /** While parking a task: the round whose model call hangs, and who to tell. */
  private parking: { round: number; parked: () => void } | null = null;

  constructor(client: Redis, prefix: string) {
    this.root = `{${prefix}}`;
    client.defineCommand('benchCasSnapshot', { numberOfKeys: 2, lua: CAS_SCRIPT });
    this.client = client as CasClient;
    this.machine = bareMachine(
      (taskId) => this.durable(taskId),
      (round) => {
        if (!this.parking || round < this.parking.round) return false;
        this.parking.parked();
        return true;
      },
    );
  }

  snapshotKey = (taskId: string) => `${this.root}:snapshot:${taskId}`;
  historyKey = (taskId: string) => `${this.root}:history:${taskId}`;

  /** Runs a new task of `k` rounds to its end; resolves once its final state is acknowledged. */
  run(taskId: string, k: number): Promise<number> {
    return this.drive(taskId, createActor(this.machine, { input: { taskId, k } }), {
      revision: 0,
      pending: 0,
      saves: 0,
      chain: Promise.resolve(),
    });
  }

  /**
   * Runs a new task of `k` rounds until its next model call, which hangs: the task rests in flight, its state
   * stored. Resolves with a function that stops it.
   */
  async park(taskId: string, k: number): Promise<() => void> {
    const actor = createActor(this.machine, { input: { taskId, k } });
    const parked = new Promise<void>((resolve) => (this.parking = { round: k + 1, parked: resolve }));
    void this.drive(taskId, actor, { revision: 0, pending: 0, saves: 0, chain: Promise.resolve() }).catch(() => {});
    await parked;
    this.parking = null;
    return () => actor.stop();
  }

  /**
   * Restores a stored task and lets it continue; resolves with the time (performance.now()) its first save after
   * the restore was acknowledged, and the actor, to stop.
   */
  async resume(taskId: string): Promise<{ firstSaveAt: number; stop: () => void }> {
    const [revision, json] = await this.client.hmget(this.snapshotKey(taskId), 'rev', 'snapshot');
    const saves: TaskSaves = { revision: Number(revision), pending: 0, saves: 0, chain: Promise.resolve() };
    const snapshot = JSON.parse(json!) as SnapshotFrom<BareMachine>;
    const actor = createActor(this.machine, { snapshot, input: { taskId, k: snapshot.context.k } });
    let resolveFirst!: (at: number) => void;
    const first = new Promise<number>((resolve) => (resolveFirst = resolve));
    const onSaved = () => saves.saves === 1 && resolveFirst(performance.now());
    void this.drive(taskId, actor, saves, { onSaved, restored: true }).catch(() => {});
    return { firstSaveAt: await first, stop: () => actor.stop() };
  }

  /**
   * Starts `actor`, persisting every snapshot it reaches (a restored actor's first one is what is stored already);
   * resolves with its save count once it is done and durable.
   */
  private drive(
    taskId: string,
    actor: ReturnType<typeof createActor<BareMachine>>,
    saves: TaskSaves,
    { onSaved, restored = false }: { onSaved?: () => void; restored?: boolean } = {},
  ): Promise<number> {
    this.tasks.set(taskId, saves);
    const snapshotKey = this.snapshotKey(taskId);
    const historyKey = this.historyKey(taskId);
    const persist = (snapshot: SnapshotFrom<BareMachine>) => {
      const json = JSON.stringify(actor.getPersistedSnapshot());
      const entry = historyEntry(snapshot);
      saves.pending += 1;
      saves.chain = saves.chain.then(async () => {
        const revision = await this.client.benchCasSnapshot(snapshotKey, historyKey, saves.revision, json, entry);
        if (revision < 0) throw new Error(`bare loop: task ${taskId} is not at revision ${saves.revision}`);
        saves.revision = revision;
        saves.pending -= 1;
        saves.saves += 1;
        onSaved?.();
      });
    };
    let skip = restored;
    return new Promise<number>((resolve, reject) => {
      actor.subscribe({
        next: (snapshot) => {
          if (skip) skip = false;
          else persist(snapshot);
          if (snapshot.status === 'done') {
            saves.chain.then(() => {
              this.tasks.delete(taskId);
              resolve(saves.saves);
            }, reject);
          }
        },
        error: reject,
      });
      actor.start();
    });
  }

  /**
   * Resolves once every save of the task so far is acknowledged. Invoked actors start before the actor notifies
   * its observers (which enqueue the save of the state that invoked them), hence the first await.
   */
  private async durable(taskId: string): Promise<void> {
    await undefined;
    const saves = this.tasks.get(taskId)!;
    await saves.chain;
    if (saves.pending > 0) throw new Error(`bare loop: task ${taskId} would act before its state is durable`);
  }
}

let cellNumber = 0;

/** Runs one cell of the bare loop on Redis under `{prefix}` (deleted afterwards). */
export async function runBareOnRedis(run: CellRun, link: RedisLink, prefix: string): Promise<CellResult> {
  const loop = new BareLoop(link.client, prefix);
  cellNumber += 1;
  try {
    return await measureOnRedis('bare', run, link, loop.root, async () => {
      let saves = 0;
      for (let r = 0; r < run.repeat; r++) {
        const counts = await Promise.all(
          Array.from({ length: run.tasks }, (_, i) => loop.run(`c${cellNumber}-r${r}-t${i}`, run.k)),
        );
        saves += counts.reduce((a, b) => a + b, 0);
      }
      return { rounds: run.k * run.tasks * run.repeat, saves };
    });
  } finally {
    await deleteMatching(link.admin, `${loop.root}:*`);
  }
}
