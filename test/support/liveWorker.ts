/**
 * A worker process for the live-event tests: drives tasks on Redis, one model turn per `step` line on stdin.
 * Argument: JSON { url, prefix, ttlMs, steps, sweepMs }. Its only tool, `paced_read` (`pacedRead`), waits for a
 * `step` line (each line releases one read, waiting or to come); the model calls it `steps` times, then answers.
 *
 * Prints `READY`; `READING <taskId> <n>` when this process's n-th read of the task starts; `SAVED <taskId> <audit
 * length> <ms since epoch>` once each save resolved (its acknowledgment, for the latency of the events it carried).
 * Commands: `start <taskId>`, `step`. With `sweepMs`, it takes over orphaned tasks by itself (a dead worker's).
 */
import { createInterface } from 'node:readline';
import { createOrchestrator } from '../../src/orchestrator/orchestrator.js';
import { RedisStore } from '../../src/store/redis/redisStore.js';
import type { SaveRequest } from '../../src/store/taskStore.js';
import { E17 } from './harness.js';
import { pacedModel, pacedRead } from './livePaced.js';

const { url, prefix, ttlMs, steps, sweepMs } = JSON.parse(process.argv[2]!) as {
  url: string;
  prefix: string;
  ttlMs: number;
  steps: number;
  sweepMs?: number;
};

/** The store, saying when each save was acknowledged. */
class AckStore extends RedisStore {
  override async save(request: SaveRequest): Promise<void> {
    await super.save(request);
    console.log(`SAVED ${request.envelope.taskId} ${request.envelope.journal.audit} ${Date.now()}`);
  }
}

const reads = new Map<string, number>();
const read = pacedRead((taskId) => {
  const n = (reads.get(taskId) ?? 0) + 1;
  reads.set(taskId, n);
  console.log(`READING ${taskId} ${n}`);
});
const orchestrator = createOrchestrator({
  tools: [read.tool],
  model: pacedModel(steps),
  store: new AckStore({ url, prefix }),
  lease: { ttlMs, renewEveryMs: Math.max(1, Math.floor(ttlMs / 3)) },
  expirySweepMs: 0,
  orphanSweepMs: sweepMs ?? 0,
});

createInterface({ input: process.stdin }).on('line', (line) => {
  const [command, taskId] = line.trim().split(' ');
  if (command === 'step') read.step();
  else if (command === 'start')
    orchestrator.start({ principal: E17, goal: 'read step by step', taskId: taskId! }).catch((error: Error) => {
      console.log(`FAILED ${error.name} ${error.message}`);
    });
});
console.log('READY');
