/**
 * Counts the chart's microsteps per read round of the bench's workload (one model turn proposing one no-op read with
 * every gate, and that read): `npx tsx scripts/bench/microsteps.ts [K]`. Reads XState's `@xstate.microstep`
 * inspection events of one task of K rounds, and of one of 2K, and prints the difference per round.
 */
import { createOrchestrator } from '../../src/index.js';
import { MemoryStore } from '../../src/store/memoryStore.js';
import { BENCH_PRINCIPAL, goalFor, projectOptions } from './workload.js';

async function microsteps(k: number): Promise<number> {
  let count = 0;
  const orchestrator = createOrchestrator({
    ...projectOptions(new MemoryStore()),
    inspect: (event) => {
      if (event.type === '@xstate.microstep') count++;
    },
  });
  const status = await orchestrator.run({ principal: BENCH_PRINCIPAL, goal: goalFor(k), taskId: `m${k}` });
  if (status.state !== 'answered') throw new Error(`the task ended ${status.state}`);
  await orchestrator.close();
  return count;
}

const k = Number(process.argv[2] ?? 10);
const short = await microsteps(k);
const long = await microsteps(2 * k);
console.log(`microsteps: ${short} for K=${k}, ${long} for K=${2 * k}: ${(long - short) / k} per read round`);
