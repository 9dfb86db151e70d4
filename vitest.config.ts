import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/support/longestFirst.js';
import { scaled } from './test/support/timeScale.js';

/**
 * Tests in tiers, by file name. The rest are unit tests (`npm run test:unit`, half a minute): in process, no
 * exhaustive exploration, no child process, no Redis. `*.paths.test.ts` explore the chart exhaustively (minutes),
 * `*.redis.test.ts` need Redis, `*.process.test.ts` run child processes (the CLIs, the demo, the README's examples,
 * worker processes killed with SIGKILL; some need Redis), `*.browser.test.ts` need Chromium, `*.package.test.ts` pack
 * the package and install it into new projects (npm registry). `npm test` runs every tier.
 *
 * No verdict rests on wall time: a timeout only reports a hang. TEST_TIME_SCALE multiplies every timeout (these two
 * and the tests' own, through test/support/timeScale.ts); a loaded machine raises it.
 *
 * Two test files at a time at least, of every tier at once (vitest's default is one worker per core but one: a single
 * file at a time on a two-core machine, where most files leave a core idle while they wait on a child process, Redis,
 * Chromium or npm). The files of a run share nothing that another file writes: each uses fresh Redis key prefixes or
 * its own redis-server on a free port, free ports, its own temporary directories and child processes, and the
 * package tier's files only read the tarball packed once for the run. `--maxWorkers=1` runs one file at a time.
 *
 * The files start longest first, whatever their tier (test/support/longestFirst.ts, from the seconds in
 * test/support/fileSeconds.json): a long file started last would leave one core idle at the end of the run.
 */
const TIERS = ['paths', 'redis', 'process', 'browser', 'package'];
/** Longer limits where each test is long by nature: an exploration of the chart, `npm install` and `tsc` runs. */
const SLOW: Record<string, { testTimeout: number; hookTimeout: number }> = {
  paths: { testTimeout: scaled(120_000), hookTimeout: scaled(30_000) },
  package: { testTimeout: scaled(120_000), hookTimeout: scaled(240_000) },
};

/**
 * The tiers whose files share one module graph per worker, as the unit tier's do: most of such a file's own time is
 * importing the library (and Fastify, ioredis, BullMQ) again, not its tests. Measured on this 2-core machine, each
 * tier alone, `--isolate=true` then `false`: redis 117 s -> 79 s wall (CPU 93 s -> 51 s), browser 200 s -> 152 s
 * (CPU 138 s -> 94 s). Not the process tier: its time is its child processes' (313 s wall, CPU 362 s isolated; 428 s,
 * CPU 391 s shared). The files of these tiers leave no global state behind either (each test file is still evaluated
 * afresh; only the modules it imports are shared).
 */
const SHARED: Record<string, { isolate: boolean }> = {
  redis: { isolate: false },
  browser: { isolate: false },
};

/** `npm pack` once for the package tier's files, started with the run (test/support/packOnce.ts). */
const SETUP: Record<string, { globalSetup: string[] }> = {
  package: { globalSetup: ['test/support/packOnce.ts'] },
};

export default defineConfig({
  test: {
    testTimeout: scaled(20_000),
    hookTimeout: scaled(30_000),
    maxWorkers: Math.max(2, availableParallelism() - 1),
    sequence: { sequencer: LongestFirst },
    // expect.poll's own default (1 s) is a fixed limit too.
    expect: { poll: { timeout: scaled(5_000) } },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: TIERS.map((tier) => `test/**/*.${tier}.test.ts`),
          // The files of a worker share one module graph: 25 s instead of 55 s here, most of it importing the library
          // again for each file. So a unit test leaves no global state behind (timers, env, patched modules).
          isolate: false,
        },
      },
      ...TIERS.map((tier) => ({
        extends: true as const,
        test: { name: tier, include: [`test/**/*.${tier}.test.ts`], ...SLOW[tier], ...SETUP[tier], ...SHARED[tier] },
      })),
    ],
  },
});
