import { defineConfig } from 'vitest/config';
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
 */
const TIERS = ['paths', 'redis', 'process', 'browser', 'package'];
/** Longer limits where each test is long by nature: an exploration of the chart, `npm install` and `tsc` runs. */
const SLOW: Record<string, { testTimeout: number; hookTimeout: number }> = {
  paths: { testTimeout: scaled(120_000), hookTimeout: scaled(30_000) },
  package: { testTimeout: scaled(120_000), hookTimeout: scaled(240_000) },
};

export default defineConfig({
  test: {
    testTimeout: scaled(20_000),
    hookTimeout: scaled(30_000),
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
        test: { name: tier, include: [`test/**/*.${tier}.test.ts`], ...SLOW[tier] },
      })),
    ],
  },
});
