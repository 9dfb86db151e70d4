/**
 * One factor for every wall-clock limit of the tests: the per-test and hook timeouts (vitest.config.ts), a wait for
 * a child process's line or exit, the deadline of a polling loop. Each limit is how long a hang may take to be
 * reported, never what a verdict rests on, so a loaded machine raises the factor (`TEST_TIME_SCALE=4 npm test`) and
 * only the time to report a hang changes.
 */

/** The factor from TEST_TIME_SCALE (1 when unset). */
export const TIME_SCALE = parseTimeScale(process.env.TEST_TIME_SCALE);

/** `ms` (a limit as it is on a quiet machine) times the factor. */
export function scaled(ms: number): number {
  return Math.ceil(ms * TIME_SCALE);
}

export function parseTimeScale(value: string | undefined): number {
  if (value === undefined || value.trim() === '') return 1;
  const factor = Number(value);
  if (!Number.isFinite(factor) || factor < 1) {
    throw new Error(
      `TEST_TIME_SCALE must be a number of at least 1 (it multiplies the tests' timeouts); got "${value}"`,
    );
  }
  return factor;
}
