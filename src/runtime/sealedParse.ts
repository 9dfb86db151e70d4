/**
 * Schema checks over sealed values: the parse the chart's gates run for a tool with sensitive fields, and the text
 * that says why a sealed value cannot be used. Apart from `sealing.ts` because the tool registry builds these parses
 * when tools are installed, and `sealing.ts` reads the registry.
 */
import type { Json } from '../../machines/context.js';
import type { ParseAnswer, TaskRef } from '../../machines/toolkit.js';
import type { z } from 'zod';
import type { Privacy, SealFailure } from '../privacy/privacy.js';

/**
 * The chart's schema check of a tool with sensitive fields (its input at the schema gate and the re-check, its
 * output when a reviewer reports a write's result), for one task: the task's sealed values are opened, checked
 * against the tool's schema, and sealed again, each with the token it came in (so its label, e.g. `card-1111`, is
 * what the approver sees). Sealing is deterministic, so the validated arguments, their hash and their idempotency key
 * do not depend on the values. A token of another task fails; what the schema says about a sensitive field is
 * replaced by a plain note (a message might quote the value).
 */
export function sealedParse(
  schema: z.ZodType,
  paths: readonly string[],
  privacy: Privacy,
): (value: unknown, task: TaskRef) => ParseAnswer {
  return (value, task) => {
    const opened = privacy.open(value as Json, paths, task);
    if (!opened.ok)
      return refused([{ path: opened.failure.path.split('.'), message: sealFailureText(opened.failure) }]);
    const parsed = schema.safeParse(opened.value);
    if (!parsed.success) {
      return refused(
        parsed.error.issues.map((issue) => ({
          path: issue.path,
          message: paths.some((path) => underPath(path, issue.path))
            ? 'invalid value (a sensitive field)'
            : issue.message,
        })),
      );
    }
    return { success: true, data: privacy.reseal(task, parsed.data as Json, paths, opened.opened) };
  };
}

function refused(issues: { path: readonly PropertyKey[]; message: string }[]): ParseAnswer {
  return { success: false, error: { issues } };
}

/** Why a sealed value cannot be used, for the model and the audit. */
export function sealFailureText(failure: SealFailure): string {
  return failure.reason === 'other_task'
    ? `the sealed value at ${failure.path} (${failure.label}) belongs to another task`
    : `the sealed value at ${failure.path} (${failure.label}) is not available: it was sealed by a process that no longer runs, or it is not a sealed value`;
}

function underPath(path: string, issuePath: readonly PropertyKey[]): boolean {
  const segments = path.split('.');
  return (
    segments.length <= issuePath.length &&
    segments.every((segment, i) => segment === '*' || segment === String(issuePath[i]))
  );
}
