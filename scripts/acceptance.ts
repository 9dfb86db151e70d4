/**
 * `npm run acceptance`: the design sources' acceptance run over the demo's booking and refund tools, on the memory
 * store and on Redis: about 10,000 tool calls with faults injected, every invariant checked, a table per fault class
 * and the metrics printed, the JSON report written. Exits 1 when an invariant failed (naming the task and seed to
 * replay), 2 on a bad command line or a Redis that does not answer.
 *
 *   npm run acceptance -- [--calls 10000] [--seed 1] [--stores memory,redis] [--concurrency 8] [--only 17,204] [--out DIR]
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  type AcceptanceReport,
  FAULT_CLASSES,
  formatReport,
  planForCalls,
  runAcceptance,
} from '../src/acceptance/index.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { demoAcceptanceDomain } from '../examples/booking/acceptanceDomain.js';

const USAGE =
  'usage: npm run acceptance -- [--calls N] [--seed N] [--stores memory,redis] [--concurrency N] [--only i,j] [--out DIR]';

function fail(message: string): never {
  console.error(`acceptance: ${message}\n${USAGE}`);
  process.exit(2);
}

function integer(name: string, text: string | undefined, fallback: number, min: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min)
    fail(`--${name} must be an integer of at least ${min}, not "${text}"`);
  return value;
}

let parsed;
try {
  parsed = parseArgs({
    options: {
      calls: { type: 'string' },
      seed: { type: 'string' },
      stores: { type: 'string' },
      concurrency: { type: 'string' },
      only: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean' },
    },
  }).values;
} catch (error) {
  fail((error as Error).message);
}
if (parsed.help) {
  console.log(USAGE);
  process.exit(0);
}
const calls = integer('calls', parsed.calls, 10_000, FAULT_CLASSES.length * 4);
const seed = integer('seed', parsed.seed, 1, 0);
const concurrency = integer('concurrency', parsed.concurrency, 8, 1);
const only = parsed.only
  ?.split(',')
  .map((i) =>
    i.trim() === ''
      ? fail(`--only takes task indexes separated by commas, not "${parsed.only}"`)
      : integer('only', i.trim(), 0, 0),
  );
const stores = (parsed.stores ?? 'memory,redis').split(',').map((s) => s.trim());
for (const store of stores)
  if (store !== 'memory' && store !== 'redis') fail(`unknown store "${store}" (memory or redis)`);
const out = parsed.out ?? join('.data', 'acceptance');
// The report's folder is made before the run, so that a path that cannot be written to fails at once.
try {
  await mkdir(out, { recursive: true });
} catch (error) {
  fail(`cannot write the report to ${out}: ${(error as Error).message}`);
}

async function openStore(kind: string): Promise<{ store: TaskStore; close(): Promise<void> }> {
  if (kind === 'memory') return { store: new MemoryStore(), close: async () => {} };
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const { RedisStore } = await import('../src/redis.js');
  const { Redis } = await import('ioredis');
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    retryStrategy: () => null,
  });
  let lastError: Error | null = null;
  client.on('error', (error: Error) => (lastError = error));
  try {
    await client.connect();
    await client.ping();
  } catch (error) {
    client.disconnect();
    fail(
      `Redis does not answer at ${url} (${(lastError ?? (error as Error)).message}); start one, set REDIS_URL, or pass --stores memory`,
    );
  }
  const prefix = `acceptance-${process.pid}-${Date.now()}`;
  const store = new RedisStore({ client, prefix });
  return {
    store,
    async close() {
      // This run's keys only (a fresh prefix), never the rest of the database.
      let cursor = '0';
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', `{${prefix}}*`, 'COUNT', 1_000);
        cursor = next;
        if (keys.length) await client.unlink(...keys);
      } while (cursor !== '0');
      await store.close?.();
      client.disconnect();
    },
  };
}

const reports: AcceptanceReport[] = [];
const plan = planForCalls(calls, seed);
for (const kind of stores) {
  const { store, close } = await openStore(kind);
  const interactive = process.stderr.isTTY;
  let shown = 0;
  try {
    const report = await runAcceptance({
      domain: demoAcceptanceDomain(),
      plan,
      store,
      storeName: kind,
      concurrency,
      only,
      onProgress(done, total, failures) {
        const tenth = Math.floor((done * 10) / total);
        if (interactive) process.stderr.write(`\r${kind}: ${done}/${total} tasks, ${failures} with errors `);
        else if (tenth > shown || done === total) {
          shown = tenth;
          process.stderr.write(`${kind}: ${done}/${total} tasks, ${failures} with errors\n`);
        }
      },
    }).catch((error: unknown) => {
      // A plan, an index or an option the kit refuses: a bad command line, said plainly.
      if (error instanceof TypeError && error.message.startsWith('acceptance: '))
        fail(error.message.slice('acceptance: '.length));
      throw error;
    });
    if (interactive) process.stderr.write('\n');
    reports.push(report);
    console.log(`${formatReport(report, { replay: `npm run acceptance -- --calls ${calls} --stores ${kind}` })}\n`);
    // A replay of some tasks does not overwrite the full run's report.
    const file = join(out, only ? `report-${kind}-only-${only.join('-')}.json` : `report-${kind}.json`);
    await writeFile(file, `${JSON.stringify({ calls, ...report }, null, 2)}\n`);
    console.log(`JSON report: ${file}\n`);
  } finally {
    await close();
  }
}
process.exitCode = reports.every((r) => r.ok) ? 0 : 1;
