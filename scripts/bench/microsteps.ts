/**
 * Counts what the chart and the runtime do per read round of the bench's workload (one model turn proposing one
 * no-op read with every gate, and that read): `npx tsx scripts/bench/microsteps.ts [K]`. Reads XState's inspection
 * events (microsteps, actions, actors started) and counts the AbortControllers and timers made, of one task of K
 * rounds and of one of 2K, and prints the difference per round.
 */
import { createOrchestrator } from '../../src/index.js';
import { MemoryStore } from '../../src/store/memoryStore.js';
import { COUNT_KEYS, type Counts, inspectionCounter, live } from './liveCounts.js';
import { BENCH_PRINCIPAL, goalFor, projectOptions } from './workload.js';

async function count(k: number): Promise<Counts> {
  const counter = inspectionCounter();
  const orchestrator = createOrchestrator({ ...projectOptions(new MemoryStore()), inspect: counter.inspect });
  live.abortControllers = 0;
  live.timers = 0;
  const status = await orchestrator.run({ principal: BENCH_PRINCIPAL, goal: goalFor(k), taskId: `m${k}` });
  if (status.state !== 'answered') throw new Error(`the task ended ${status.state}`);
  const result = counter.now();
  await orchestrator.close();
  return result;
}

const k = Number(process.argv[2] ?? 10);
const short = await count(k);
const long = await count(2 * k);
const per = (name: keyof Counts) => `${name} ${(long[name] - short[name]) / k}`;
console.log(`per read round (K=${k} vs ${2 * k}): ${COUNT_KEYS.map(per).join(', ')}`);
