import { defineConfig } from 'vitest/config';

/**
 * Tests in tiers, by file name: `*.paths.test.ts` explore the chart exhaustively (tens of seconds),
 * `*.redis.test.ts` need Redis, `*.process.test.ts` kill real worker processes (and need Redis),
 * `*.browser.test.ts` need Chromium, `*.package.test.ts` pack the package and install it into new projects (npm
 * registry); the rest are unit tests (`npm run test:unit`). `npm test` runs every tier.
 */
const TIERS = ['paths', 'redis', 'process', 'browser', 'package'];

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 30_000,
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: TIERS.map((tier) => `test/**/*.${tier}.test.ts`) } },
      ...TIERS.map((tier) => ({ extends: true as const, test: { name: tier, include: [`test/**/*.${tier}.test.ts`] } })),
    ],
  },
});
