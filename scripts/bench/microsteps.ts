/**
 * Counts what the chart and the runtime do per read round of the bench's workload (one model turn proposing one
 * no-op read with every gate, and that read): `npx tsx scripts/bench/microsteps.ts [K]`. Reads XState's inspection
 * events (microsteps, actions, actors started) and counts the AbortControllers and timers made, of one task of K
 * rounds and of one of 2K, and prints the difference per round.
 */
import { createOrchestrator } from '../../src/index.js';
import { MemoryStore } from '../../src/store/memoryStore.js';
import { BENCH_PRINCIPAL, goalFor, projectOptions } from './workload.js';

interface Counts {
  microsteps: number;
  actions: number;
  actors: number;
  abortControllers: number;
  timers: number;
}

const live = { abortControllers: 0, timers: 0 };
const NativeAbortController = globalThis.AbortController;
globalThis.AbortController = class extends NativeAbortController {
  constructor() {
    super();
    live.abortControllers++;
  }
};
const nativeSetTimeout = globalThis.setTimeout;
globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
  live.timers++;
  return nativeSetTimeout(...args);
}) as typeof setTimeout;

async function count(k: number): Promise<Counts> {
  const counts = { microsteps: 0, actions: 0, actors: 0 };
  const orchestrator = createOrchestrator({
    ...projectOptions(new MemoryStore()),
    inspect: (event) => {
      if (event.type === '@xstate.microstep') counts.microsteps++;
      else if (event.type === '@xstate.action') counts.actions++;
      else if (event.type === '@xstate.actor') counts.actors++;
    },
  });
  live.abortControllers = 0;
  live.timers = 0;
  const status = await orchestrator.run({ principal: BENCH_PRINCIPAL, goal: goalFor(k), taskId: `m${k}` });
  if (status.state !== 'answered') throw new Error(`the task ended ${status.state}`);
  const result = { ...counts, ...live };
  await orchestrator.close();
  return result;
}

const k = Number(process.argv[2] ?? 10);
const short = await count(k);
const long = await count(2 * k);
const per = (name: keyof Counts) => `${name} ${(long[name] - short[name]) / k}`;
console.log(
  `per read round (K=${k} vs ${2 * k}): ${(['microsteps', 'actions', 'actors', 'abortControllers', 'timers'] as const).map(per).join(', ')}`,
);
