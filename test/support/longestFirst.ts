/**
 * The order `npm test` hands test files to its workers: longest first, across every tier (vitest's own order runs the
 * projects one after another by name, and within one by the durations it cached: none on a clean checkout, as in CI,
 * and on a machine where several runs share node_modules, another run's). With two workers, a long file started last
 * is a tail where one core waits for the other; started first, the short files fill in around it.
 *
 * The seconds per file are test/support/fileSeconds.json, measured by a whole run (`npm run test:durations` writes it
 * from vitest's JSON report). They only order the files: a file not listed gets its tier's typical length, and a
 * stale figure costs some minutes of balance, never a verdict.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const TABLE = new URL('./fileSeconds.json', import.meta.url);

/** A file's tier's typical seconds, for a file the table does not list yet. */
const TIER_SECONDS: Record<string, number> = { paths: 30, package: 30, process: 10, browser: 8, redis: 4, unit: 1 };

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seconds = JSON.parse(readFileSync(TABLE, 'utf8')) as Record<string, number>;
    const root = this.ctx.config.root;
    const estimate = (spec: TestSpecification) =>
      seconds[relative(root, spec.moduleId)] ?? TIER_SECONDS[spec.project.name] ?? 1;
    const keyed = files.map((spec) => ({ spec, seconds: estimate(spec) }));
    // Stable: equal estimates keep vitest's order.
    return keyed.sort((a, b) => b.seconds - a.seconds).map(({ spec }) => spec);
  }
}
