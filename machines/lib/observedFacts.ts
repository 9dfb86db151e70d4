/**
 * What a task learned from its trusted results, kept small and plain: which reads ended unknown (their facts are
 * unverified until the same read succeeds later), what the task was exposed to (untrusted input, sensitive
 * data: the Rule of Two), and which identifiers trusted results and the user's own text named (to check that a final
 * answer claims nothing a tool did not return). Pure.
 */
import type { AgentContext, Exposure, Json, UnverifiedRead } from '../context.js';
import { CONTEXT_BOUNDS } from '../context.js';
import { UNVERIFIED } from '../failures.js';
import type { ToolRules } from '../toolkit.js';

/**
 * A read that ended with one of these established nothing: besides "we do not know" (a timeout, unavailable), a
 * crash of the tool (`tool_error`: a host's code throws a plain error far more often than a TransientToolError), an
 * answer its output schema refuses, an attempt aborted. A tool's own failure code (`not_found`) is an answer.
 */
const READ_ESTABLISHED_NOTHING: ReadonlySet<string> = new Set([
  ...UNVERIFIED,
  'tool_error',
  'invalid_output',
  'aborted',
]);

/**
 * The mark that stands for unverified reads the context had no room left to track: tool names never contain a space,
 * so no read clears it, and every write that depends on any read is refused while it stands (fail closed: which
 * facts it covered is no longer known).
 */
export const UNTRACKED_READS = 'reads no longer tracked';

/**
 * In a mark's `args`: a read of other arguments ended unknown and was no longer tracked, so no success clears the
 * mark (the read that would verify it is not known).
 */
const UNTRACKED_ARGS = '*';

/**
 * The unverified marks after a read of `tool` with arguments `args` (their hash) ended with `code` ('ok' for a
 * result), at `at`. A success verifies what that read asked, not what a read of other arguments asked: the mark
 * goes once every read of the tool that ended unknown has since succeeded. The lists are bounded, and what does not
 * fit is never dropped into "verified": it turns into a mark no read clears.
 */
export function markRead(
  marks: readonly UnverifiedRead[],
  tool: string,
  code: string,
  at: number,
  args: string,
): UnverifiedRead[] {
  const mark = marks.find((m) => m.tool === tool);
  const others = marks.filter((m) => m.tool !== tool);
  if (READ_ESTABLISHED_NOTHING.has(code)) {
    const unknown = boundArgs([...(mark?.args ?? []).filter((a) => a !== args), args]);
    return boundMarks([...others, { tool, code, times: (mark?.times ?? 0) + 1, at, args: unknown }]);
  }
  if (code !== 'ok' || !mark) return [...marks];
  // A mark recorded before marks kept their reads' arguments: any success of the tool clears it, as it did then.
  const left = mark.args?.filter((a) => a !== args) ?? [];
  return left.length === 0 ? others : marks.map((m) => (m === mark ? { ...m, args: left } : m));
}

/** At most `unverifiedArgs` arguments: the oldest that do not fit become UNTRACKED_ARGS, first in the list. */
function boundArgs(args: string[]): string[] {
  if (args.length <= CONTEXT_BOUNDS.unverifiedArgs) return args;
  const tracked = args.filter((a) => a !== UNTRACKED_ARGS);
  return [UNTRACKED_ARGS, ...tracked.slice(-(CONTEXT_BOUNDS.unverifiedArgs - 1))];
}

/** At most `unverified` marks: the oldest that do not fit merge into one UNTRACKED_READS mark, kept first. */
function boundMarks(marks: UnverifiedRead[]): UnverifiedRead[] {
  if (marks.length <= CONTEXT_BOUNDS.unverified) return marks;
  const tracked = marks.filter((m) => m.tool !== UNTRACKED_READS);
  const dropped = tracked.slice(0, tracked.length - (CONTEXT_BOUNDS.unverified - 1));
  const merged = [...marks.filter((m) => m.tool === UNTRACKED_READS), ...dropped];
  const latest = merged.reduce((a, b) => (b.at >= a.at ? b : a));
  const untracked: UnverifiedRead = {
    tool: UNTRACKED_READS,
    code: latest.code,
    times: Math.max(...merged.map((m) => m.times)),
    at: latest.at,
    args: [UNTRACKED_ARGS],
  };
  return [untracked, ...tracked.slice(dropped.length)];
}

/**
 * The unverified reads a write of `rules` depends on: those it names (`dependsOn`), or every one when it names none.
 * The mark of reads no longer tracked counts for every write that depends on any read.
 */
export function blockingReads(context: AgentContext, rules: ToolRules | undefined): UnverifiedRead[] {
  if (context.unverified.length === 0) return [];
  const dependsOn = rules?.dependsOn;
  if (dependsOn === undefined) return [...context.unverified];
  if (dependsOn.length === 0) return [];
  return context.unverified.filter((mark) => mark.tool === UNTRACKED_READS || dependsOn.includes(mark.tool));
}

/** The text of a sealed value's token (`[[sealed:label:…]]`, see src/privacy/tokens.ts): the task holds sensitive data. */
const SEALED = '[[sealed:';

/** True when `value` holds a sealed value's token anywhere (a string, or a key). */
export function holdsSealedValue(value: Json | undefined): boolean {
  if (typeof value === 'string') return value.includes(SEALED);
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some(holdsSealedValue);
  for (const [key, item] of Object.entries(value)) if (key.includes(SEALED) || holdsSealedValue(item)) return true;
  return false;
}

/** `exposure` after a trusted result of `tool` (its output `value`) reached the task. */
export function exposedTo(
  exposure: Exposure,
  tool: string,
  rules: ToolRules | undefined,
  value: Json,
  at: number,
): Exposure {
  const untrusted = exposure.untrustedInput === null && rules?.untrustedOutput === true;
  const sensitive = exposure.sensitiveData === null && holdsSealedValue(value);
  if (!untrusted && !sensitive) return exposure;
  return {
    untrustedInput: untrusted ? { tool, at } : exposure.untrustedInput,
    sensitiveData: sensitive ? { source: tool, at } : exposure.sensitiveData,
  };
}

/** Failures whose text the host wrote itself: nothing the tool said reached the task. */
const HOST_WORDED: ReadonlySet<string> = new Set(['timeout', 'aborted', 'interrupted']);

/**
 * `exposure` after a failure of `tool` (its `code` and `summary`) reached the task. The summary of a tool's own
 * failure is the tool's text (an MCP server's `isError` answer, a thrown error's message): an untrusted tool's text
 * is untrusted input, and a sealed value in it is sensitive data, as in a result.
 */
export function exposedToFailure(
  exposure: Exposure,
  tool: string,
  rules: ToolRules | undefined,
  code: string,
  summary: string,
  at: number,
): Exposure {
  return HOST_WORDED.has(code) ? exposure : exposedTo(exposure, tool, rules, summary, at);
}

/**
 * An identifier as answers name them: one word of letters, digits, `-` and `_`, holding an upper-case letter and a
 * digit ("B7", "TX-9001", "O-1001"), at most 64 characters. Amounts, dates, times and plain words are not identifiers,
 * nor is a part of a longer token (a time stamp, an e-mail address, a URL): a `.`, `:`, `/`, `@` or `+` joining it to
 * more letters or digits makes it a part.
 */
const IDENTIFIER =
  /(?<![\w-]|\w[.:/@+])(?=[\w-]*[A-Z])(?=[\w-]*\d)[A-Za-z0-9][\w-]{0,62}[A-Za-z0-9](?![\w-]|[.:/@+]\w)/g;
const IS_IDENTIFIER = /^(?=.*[A-Z])(?=.*\d)[A-Za-z0-9][\w-]{0,62}[A-Za-z0-9]$/;

/** The identifiers a text names, in order, without repeats. */
export function identifiersIn(text: string): string[] {
  return [...new Set(text.match(IDENTIFIER) ?? [])];
}

/** Leaves of one result looked at for identifiers, at most: a huge result does not make a round slow. */
const LEAVES = 256;

/** The identifiers a trusted result holds: its string values (and object keys) that are identifiers themselves. */
export function identifiersOf(value: Json): string[] {
  const found = new Set<string>();
  let leaves = 0;
  const visit = (item: Json): void => {
    if (leaves >= LEAVES) return;
    if (typeof item === 'string') {
      leaves += 1;
      if (item.length <= 64 && IS_IDENTIFIER.test(item)) found.add(item);
      return;
    }
    if (item === null || typeof item !== 'object') return;
    if (Array.isArray(item)) {
      for (const element of item) visit(element);
      return;
    }
    for (const element of Object.values(item)) visit(element);
  };
  visit(value);
  return [...found];
}

/** `observed` with `ids` added as the newest (a repeat moves to the end), bounded. */
export function observe(observed: readonly string[], ids: readonly string[]): string[] {
  if (ids.length === 0) return [...observed];
  const fresh = new Set(ids);
  return [...observed.filter((id) => !fresh.has(id)), ...fresh].slice(-CONTEXT_BOUNDS.observedIds);
}

/**
 * Identifiers the answer names that nothing the task trusts contains: not a trusted result, not the evidence, not the
 * goal nor the user's answers (whose identifiers are observed when they arrive).
 */
export function unsupportedIdentifiers(context: AgentContext, answer: string): string[] {
  const named = identifiersIn(answer);
  if (named.length === 0) return [];
  const known = new Set(context.observedIds);
  for (const evidence of context.evidence) for (const id of identifiersOf(evidence.fields)) known.add(id);
  return named.filter((id) => !known.has(id)).slice(0, 16);
}
