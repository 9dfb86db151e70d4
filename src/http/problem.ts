/**
 * Every error of the service as an RFC 9457 problem (`application/problem+json`): `type` (a URN per code), `title`
 * (the same for every problem of that type), `status` (the HTTP status), `detail` (this occurrence), and the
 * service's own members beside them: `code`, the stable machine-readable code clients match on, and `message`,
 * the same sentence as `detail`, kept for the clients that read it before.
 *
 * One exception, kept for compatibility: a refused decision's body has always carried the task's status after the
 * refusal (nothing changed) in `status`. It stays there; RFC 9457 (section 3.1) has a client ignore a member whose
 * type is not the one it specifies, so a problem+json client takes the HTTP status from the response line instead.
 */
export const PROBLEM_MEDIA_TYPE = 'application/problem+json';

/** The `type` of a problem with `code`: a URN, stable as the code is (`urn:statechart-agent:problem:task_not_found`). */
export function problemType(code: string): string {
  return `urn:statechart-agent:problem:${code}`;
}

/** The `title` of a problem with `code`: the code in words (`task_not_found` -> "Task not found"). */
export function problemTitle(code: string): string {
  const words = code.replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

export interface Problem {
  type: string;
  title: string;
  /** The HTTP status; on a refused decision, the task's status (see the module doc). */
  status: number | unknown;
  detail: string;
  code: string;
  message: string;
  /** A recorded event's id (202 `event_pending`). */
  eventId?: string;
}

/** The problem body for an error answered with `statusCode`. */
export function problemOf(
  statusCode: number,
  body: { code: string; message: string; status?: unknown; eventId?: string },
): Problem {
  const { code, message, status, eventId } = body;
  return {
    type: problemType(code),
    title: problemTitle(code),
    status: status !== undefined ? status : statusCode,
    detail: message,
    code,
    message,
    ...(eventId !== undefined ? { eventId } : {}),
  };
}
