/**
 * The "chart shape" cell of the bench (issue 25): what XState alone costs for one read round, in three shapes of
 * the same gates, no store, no model, no runtime around it. A round is an event proposing one call, five gates
 * (schema, mandate, business, permission, budget; each may refuse), the read run by an invoked promise, and the way
 * back to waiting for the next proposal.
 *
 * - `states`: each gate its own state, the two host hooks (business, permission) invoked promise actors, as the
 *   project's chart shapes a round today;
 * - `guards`: the gates as one ordered list of named guarded transitions on one eventless transition, each refusal
 *   its own transition, the hooks called synchronously by their guards;
 * - `gateless`: the proposal goes straight to the read (the floor: what any XState loop with an invoked read costs).
 *
 * Every shape refuses nothing in the measured rounds, so each does the same work; the guards still run.
 */
import { type AnyStateMachine, assign, createActor, fromPromise, setup } from 'xstate';
import { allocatedSince, allocationMark, cpuMark, cpuSince } from './measure.js';

type Ctx = { rounds: number; refused: number };
type Ev = { type: 'propose'; args: { room: string; attendees: number } };

const read = fromPromise(async () => ({ ok: true, rooms: ['R7'] }));
const hook = fromPromise(async () => true);
/** A gate's check: cheap and always passing here, as a schema or budget check of a valid call is. */
const passes = (args: Ev['args'] | undefined) => args !== undefined && args.attendees > 0 && args.room.length > 0;

const base = setup({
  types: { context: {} as Ctx, events: {} as Ev },
  actors: { read, hook },
  actions: {
    refuse: assign({ refused: ({ context }) => context.refused + 1 }),
    count: assign({ rounds: ({ context }) => context.rounds + 1 }),
  },
  guards: {
    schemaOk: ({ event }) => passes((event as Ev).args),
    mandateOk: ({ event }) => passes((event as Ev).args),
    businessOk: ({ event }) => passes((event as Ev).args),
    permissionOk: ({ event }) => passes((event as Ev).args),
    budgetOk: ({ context }) => context.rounds < Number.MAX_SAFE_INTEGER,
  },
});

const statesShape = base.createMachine({
  id: 'states',
  context: { rounds: 0, refused: 0 },
  initial: 'deciding',
  states: {
    deciding: { on: { propose: 'schema' } },
    schema: {
      always: [
        { guard: 'schemaOk', target: 'mandate' },
        { target: 'deciding', actions: 'refuse' },
      ],
    },
    mandate: {
      always: [
        { guard: 'mandateOk', target: 'business' },
        { target: 'deciding', actions: 'refuse' },
      ],
    },
    business: {
      invoke: {
        src: 'hook',
        onDone: [{ guard: ({ event }) => event.output === true, target: 'permission' }, { target: 'deciding' }],
        onError: 'deciding',
      },
    },
    permission: {
      invoke: {
        src: 'hook',
        onDone: [{ guard: ({ event }) => event.output === true, target: 'budget' }, { target: 'deciding' }],
        onError: 'deciding',
      },
    },
    budget: {
      always: [
        { guard: 'budgetOk', target: 'running' },
        { target: 'deciding', actions: 'refuse' },
      ],
    },
    running: { invoke: { src: 'read', onDone: { target: 'deciding', actions: 'count' }, onError: 'deciding' } },
  },
});

const guardsShape = base.createMachine({
  id: 'guards',
  context: { rounds: 0, refused: 0 },
  initial: 'deciding',
  states: {
    deciding: { on: { propose: 'vetting' } },
    vetting: {
      // The first refusing gate wins; a call that passes them all runs. `not(...)` spelled out per gate, so each
      // refusal is its own named transition.
      always: [
        { guard: ({ event }) => !passes((event as Ev).args), target: 'deciding', actions: 'refuse' },
        { guard: ({ event }) => !passes((event as Ev).args), target: 'deciding', actions: 'refuse' },
        { guard: ({ event }) => !passes((event as Ev).args), target: 'deciding', actions: 'refuse' },
        { guard: ({ event }) => !passes((event as Ev).args), target: 'deciding', actions: 'refuse' },
        { guard: ({ context }) => context.rounds >= Number.MAX_SAFE_INTEGER, target: 'deciding', actions: 'refuse' },
        { target: 'running' },
      ],
    },
    running: { invoke: { src: 'read', onDone: { target: 'deciding', actions: 'count' }, onError: 'deciding' } },
  },
});

const gatelessShape = base.createMachine({
  id: 'gateless',
  context: { rounds: 0, refused: 0 },
  initial: 'deciding',
  states: {
    deciding: { on: { propose: 'running' } },
    running: { invoke: { src: 'read', onDone: { target: 'deciding', actions: 'count' }, onError: 'deciding' } },
  },
});

export const CHART_SHAPES: [string, AnyStateMachine][] = [
  ['gates as states, hooks invoked (today’s shape)', statesShape],
  ['gates as ordered guards on one transition', guardsShape],
  ['gateless loop (the floor)', gatelessShape],
];

/** Plays `rounds` rounds on each of `tasks` actors at once; resolves when all are done. */
async function play(machine: AnyStateMachine, tasks: number, rounds: number): Promise<void> {
  const args = { room: 'R7', attendees: 3 };
  await Promise.all(
    Array.from({ length: tasks }, () => {
      const actor = createActor(machine).start();
      return new Promise<void>((resolve, reject) => {
        actor.subscribe({
          next: (snapshot) => {
            if (!snapshot.matches('deciding')) return;
            const { rounds: done, refused } = snapshot.context as Ctx;
            if (refused > 0) reject(new Error(`chart shape ${machine.id} refused a valid call`));
            else if (done >= rounds) {
              actor.stop();
              resolve();
            } else queueMicrotask(() => actor.send({ type: 'propose', args }));
          },
          error: reject,
        });
        actor.send({ type: 'propose', args });
      });
    }),
  );
}

export interface ChartShapeRow {
  shape: string;
  tasks: number;
  usPerRound: number;
  allocatedBytesPerRound: number;
}

/** Each shape with 1 and `many` actors, `rounds` rounds per cell, after a warm-up; median of `passes` runs. */
export async function measureChartShapes(options: { rounds: number; many: number; passes: number }) {
  const rows: ChartShapeRow[] = [];
  for (const [shape, machine] of CHART_SHAPES) {
    for (const tasks of [1, options.many]) {
      const perTask = Math.max(1, Math.round(options.rounds / tasks));
      await play(machine, tasks, Math.min(perTask, 200));
      const runs: { us: number; bytes: number }[] = [];
      for (let pass = 0; pass < options.passes; pass++) {
        const allocations = allocationMark();
        const cpu = cpuMark();
        await play(machine, tasks, perTask);
        const used = cpuSince(cpu).main;
        runs.push({ us: used / (perTask * tasks), bytes: allocatedSince(allocations) / (perTask * tasks) });
      }
      runs.sort((a, b) => a.us - b.us);
      const mid = runs[Math.floor(runs.length / 2)]!;
      rows.push({ shape, tasks, usPerRound: mid.us, allocatedBytesPerRound: mid.bytes });
    }
  }
  return rows;
}

/** The cell's table: µs of main-thread CPU and bytes allocated per round, and each shape against the floor. */
export function chartShapeTable(rows: ChartShapeRow[], rounds: number): string {
  const floor = (tasks: number) => rows.find((r) => r.tasks === tasks && r.shape === CHART_SHAPES.at(-1)![0]);
  const lines = rows.map((row) => {
    const base = floor(row.tasks);
    const ratio = base ? (row.usPerRound / base.usPerRound).toFixed(2) : '—';
    const kb = (row.allocatedBytesPerRound / 1024).toFixed(1);
    return `| ${row.shape} | ${row.tasks} | ${row.usPerRound.toFixed(1)} | ${ratio}x | ${kb} KB |`;
  });
  return [
    '### Chart shape (XState alone: one read round, five gates, no store)',
    '',
    `${rounds.toLocaleString('en-US')} rounds per cell, median of 3 runs; see scripts/bench/chartShape.ts for the three charts.`,
    '',
    '| shape | tasks | main-thread CPU µs per round | × the gateless loop | JS heap allocated per round |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...lines,
  ].join('\n');
}
