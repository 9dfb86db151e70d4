/**
 * A process that starts tasks on Redis and holds them mid-read (their read never answers), then waits to be killed:
 * the tasks stay `running` under its leases, which expire once it is gone. Argument: JSON { url, prefix, count,
 * ttlMs, tenantCap? } (with `tenantCap`, the tasks hold their tenant's slots too). Prints `holding N` once every
 * task's read has started.
 */
import { createOrchestrator } from '../../src/orchestrator/orchestrator.js';
import { RedisStore } from '../../src/store/redis/redisStore.js';
import { E17 } from './harness.js';
import { noteWriter, readThenWrite, slowRead } from './takeover.js';

const { url, prefix, count, ttlMs, tenantCap } = JSON.parse(process.argv[2]!) as {
  url: string;
  prefix: string;
  count: number;
  ttlMs: number;
  tenantCap?: number;
};
const read = slowRead('gate');
const orchestrator = createOrchestrator({
  tools: [read.tool('holder'), noteWriter().tool],
  model: readThenWrite(),
  store: new RedisStore({ url, prefix }),
  lease: { ttlMs, renewEveryMs: Math.max(1, Math.floor(ttlMs / 3)) },
  expirySweepMs: 0,
  orphanSweepMs: 0,
  ...(tenantCap === undefined ? {} : { capacity: { tenantCap } }),
});
for (let i = 0; i < count; i++) await orchestrator.start({ principal: E17, goal: 'read, then note', taskId: `o${i}` });
while (read.started.length < count) await new Promise((resolve) => setTimeout(resolve, 10));
console.log(`holding ${count}`);
setInterval(() => {}, 1_000);
