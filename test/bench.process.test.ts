/**
 * The bench (scripts/bench.ts) as a smoke test: run as a child process with `--tiny` (K of a few rounds, one pass)
 * on the test Redis, it must print every table with finite ratios and leave no key behind. Nothing about speed is
 * asserted: the figures of a tiny run on a shared machine mean nothing.
 */
import { existsSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { useTestRedis } from './support/redis.js';
import { ChildPool, PROJECT_ROOT } from './support/workers.js';
import { markdownRows, tableRows } from './support/markdownTable.js';

const redis = await useTestRedis();
const pool = new ChildPool();
const peerInstalled = existsSync(
  `${PROJECT_ROOT}bench/langgraph/node_modules/@langchain/langgraph-checkpoint-sqlite/package.json`,
);

afterEach(() => pool.killAll());
afterAll(() => redis?.stop());

/** "0.48x" or "21x" as a number; anything else as NaN. */
const ratioOf = (cell: string) => (/^\d+(\.\d+)?x$/.test(cell) ? Number(cell.slice(0, -1)) : Number.NaN);

/** Keys left under the run's prefix. */
async function keysLeft(runId: string | undefined): Promise<string[]> {
  expect(runId).toBeDefined();
  const client = redis!.connect();
  const left: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `{${runId}-*`, 'COUNT', 1_000);
    cursor = next;
    left.push(...keys);
  } while (cursor !== '0');
  return left;
}

async function runBench(args: string[]) {
  const { code, out, err } = await pool.run('scripts/bench.ts', ['--tiny', ...args], {
    env: { REDIS_URL: redis!.url },
    timeoutMs: 20_000,
  });
  expect(code, err).toBe(0);
  return { out, err, runId: /keys under \{(bench-[0-9a-f]+)-\*\}/.exec(err)?.[1] };
}

describe.skipIf(!redis)('the bench, tiny', () => {
  it('prints throughput, cost and targets, with a finite ratio to the bare loop for every cell, and cleans up', async () => {
    const { out, runId } = await runBench([]);
    const throughput = tableRows(out, 'Throughput');
    const project = throughput.filter((row) => row[2] === 'this project, RedisStore');
    expect(project.length).toBe(4); // 2 K x 2 task counts
    for (const row of project) expect(Number.isFinite(ratioOf(row[4]!)), row.join(' | ')).toBe(true);
    expect(throughput.some((row) => row[2] === 'bare XState + Redis loop')).toBe(true);
    expect(tableRows(out, 'Cost per round').length).toBe(throughput.length);
    const targets = tableRows(out, 'Targets');
    expect(targets.length).toBeGreaterThanOrEqual(10);
    for (const row of targets) expect(['yes', '**no**', '—']).toContain(row[2]);
    expect(tableRows(out, 'Other measurements').length).toBeGreaterThanOrEqual(3);

    expect(await keysLeft(runId)).toEqual([]);
  });

  it('profiles a round by part against the bare loop (scripts/bench/roundProfile.ts)', async () => {
    const { code, out, err } = await pool.run('scripts/bench/roundProfile.ts', ['--k', '3', '--tasks', '2'], {
      env: { REDIS_URL: redis!.url },
      timeoutMs: 20_000,
    });
    expect(code, err).toBe(0);
    const rows = markdownRows(out);
    const byPart = new Map(rows.map((row) => [row[0]!, row.slice(1)]));
    for (const part of ['xstate', 'machines/ (guards, steps)', '**all**']) expect(byPart.has(part), out).toBe(true);
    // The bare loop runs no guard or step of the chart; every figure is a finite number.
    expect(byPart.get('machines/ (guards, steps)')![1]).toBe('0');
    for (const row of rows) {
      expect(Number.isFinite(Number(row[1])) && Number.isFinite(Number(row[2])), row.join(' | ')).toBe(true);
      expect(Number.isFinite(ratioOf(row[3]!)), row.join(' | ')).toBe(true);
    }
    expect(await keysLeft(/keys under \{(roundprof-[0-9a-f]+)-\*\}/.exec(err)?.[1])).toEqual([]);
  });

  it.skipIf(!peerInstalled)('with --peers, adds LangGraph cells and a finite ratio to them', async () => {
    const { out } = await runBench(['--peers']);
    const throughput = tableRows(out, 'Throughput');
    expect(throughput.filter((row) => row[2] === 'LangGraph + SqliteSaver').length).toBe(4);
    for (const row of throughput.filter((r) => r[2] === 'this project, RedisStore'))
      expect(Number.isFinite(ratioOf(row[5]!)), row.join(' | ')).toBe(true);
    const vsPeer = tableRows(out, 'Targets').filter((row) => row[0]!.includes('LangGraph'));
    expect(vsPeer.length).toBe(2);
    for (const row of vsPeer) expect(Number.isFinite(ratioOf(row[1]!))).toBe(true);
  });
});
