/**
 * The order in which vitest starts the test files: the longest first, so that the short ones fill the other worker at
 * the end instead of one long file running alone after everything else. Vitest orders by the durations it cached
 * from the last run (in node_modules/.vite), but a fresh checkout (CI's `npm ci`) has none: it then runs the tiers in
 * alphabetical order of their names and each tier's largest files first: the long explorations of the chart with
 * small files (machinePathsPresence, machinePathsUndo) started after every browser, package and larger paths file,
 * and test/workers.process.test.ts (2,000 tasks on 1, 2 and 4 worker processes, then a kill -9) after those, so the
 * run ended with one long file running alone.
 *
 * So the files known to be long (measured on a shared two-core machine) start first, in this order, whatever the
 * cache says; every other file follows in vitest's own order. A file missing from the list is never an error.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Longest first: seconds measured at TEST_TIME_SCALE=3 on the shared two-core machine, two files at a time, while
 * four other sessions loaded it (CI's own figures are lower; the order is what counts).
 */
export const LONG_FILES = [
  'test/machinePathsOneTurn.paths.test.ts', // ~520 s
  'test/machinePaths.paths.test.ts', // ~520 s
  'test/machinePathsPresence.paths.test.ts', // ~330 s
  'test/machinePathsUndo.paths.test.ts', // ~250 s
  'test/workers.process.test.ts', // ~210 s
  'test/machinePathsWorkflow.paths.test.ts', // ~105 s
  'test/machinePathsPlan.paths.test.ts', // ~86 s
];

export class LongFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification) => {
      const index = LONG_FILES.findIndex((file) => spec.moduleId.endsWith(`/${file}`));
      return index === -1 ? LONG_FILES.length : index;
    };
    // Array.prototype.sort is stable: files off the list keep vitest's order.
    return [...sorted].sort((a, b) => rank(a) - rank(b));
  }
}
