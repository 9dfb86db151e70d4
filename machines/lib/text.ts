/** Short, safe text for observations and stop reasons: one line, capped, no stacks or nested causes. */
import type { z } from 'zod';

const SUMMARY_LIMIT = 300;

/** One line of at most 300 characters. */
export function cap(text: string, limit = SUMMARY_LIMIT): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > limit ? `${line.slice(0, limit)}…` : line;
}

/** A zod error as one short line: "room_id: Invalid input: expected string; end_at: ...". */
export function zodSummary(error: z.ZodError): string {
  return cap(
    error.issues
      .slice(0, 5)
      .map((issue) => `${issue.path.length ? `${issue.path.join('.')}: ` : ''}${issue.message}`)
      .join('; '),
  );
}

/** An error's name and first line, capped. Never throws, whatever was thrown (a null-prototype object, a symbol). */
export function safeErrorText(error: unknown): string {
  try {
    if (error instanceof Error) return cap(`${String(error.name)}: ${String(error.message).split('\n')[0]}`);
    return cap(String(error));
  } catch {
    return Object.prototype.toString.call(error);
  }
}

/** Only an error's name: a message may name internal hosts or data. */
export function errorName(error: unknown): string {
  try {
    return error instanceof Error ? String(error.name) : typeof error;
  } catch {
    return typeof error;
  }
}
