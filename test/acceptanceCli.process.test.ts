/**
 * `npm run acceptance` (scripts/acceptance.ts) run as a child process: the report it prints and writes, and its exit
 * codes. The kit itself is tested in process in acceptance.test.ts.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scaled } from './support/timeScale.js';
import { PROJECT_ROOT, runCommand } from './support/workers.js';

describe('npm run acceptance', () => {
  const tsx = join(PROJECT_ROOT, 'node_modules', '.bin', 'tsx');
  const script = join(PROJECT_ROOT, 'scripts', 'acceptance.ts');
  const acceptance = (args: string[]) =>
    runCommand(tsx, [script, ...args], { name: 'npm run acceptance', timeoutMs: 60_000 });

  it(
    'prints the table, writes the JSON report and exits 0 when every invariant holds',
    { timeout: scaled(60_000) },
    async () => {
      const out = await mkdtemp(join(tmpdir(), 'acceptance-'));
      try {
        const {
          code,
          out: stdout,
          err: stderr,
          transcript,
        } = await acceptance(['--calls', '120', '--seed', '5', '--stores', 'memory', '--out', out]);
        expect(code, transcript).toBe(0);
        expect(stdout).toMatch(/acceptance: booking and refunds \(demo\) on the memory store, seed 5: \d+ tasks/);
        expect(stdout).toMatch(/\| injected_output +\|/);
        expect(stdout).toContain('every invariant held');
        expect(stderr).toMatch(/memory: \d+\/\d+ tasks, 0 with errors/);
        const report = JSON.parse(await readFile(join(out, 'report-memory.json'), 'utf8'));
        expect(report).toMatchObject({ ok: true, store: 'memory', seed: 5, failures: [] });
      } finally {
        await rm(out, { recursive: true, force: true });
      }
    },
  );

  it('refuses a bad command line with exit code 2 and says why', async () => {
    const failed = await acceptance(['--stores', 'postgres']);
    expect(failed).toMatchObject({
      code: 2,
      err: expect.stringContaining('unknown store "postgres" (memory or redis)'),
    });
    const tooFew = await acceptance(['--calls', '3']);
    expect(tooFew).toMatchObject({
      code: 2,
      err: expect.stringContaining('--calls must be an integer of at least 52'),
    });
  });
});
