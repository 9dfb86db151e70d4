/**
 * The schema gate's check of one call's arguments against the installed tool's input schema. Pure; computed once
 * per arguments object (the guard and the step of one transition both ask), since zod parsing is the costly part.
 */
import type { Json } from '../context.js';
import type { TaskRef, ToolRules } from '../toolkit.js';
import { canonicalJson } from './canonicalJson.js';
import { identityFieldInArguments } from './identityFields.js';
import { errorName, safeErrorText, zodSummary } from './text.js';

export type ArgumentCheck =
  /**
   * `args`: the validated value as plain JSON (what will run); `parsed`: as the tool's schema typed it; `text`: the
   * canonical JSON of `args` (what its hash is of).
   */
  | { ok: true; args: Json; parsed: unknown; text: string }
  | { ok: false; code: 'unknown_tool' | 'invalid_arguments'; summary: string };

const checked = new WeakMap<object, { schema: unknown; result: ArgumentCheck }>();

/**
 * The check of `args` against the tool's input schema. Never throws: a schema that throws, or is asynchronous (zod
 * refuses an async refinement in a synchronous parse), refuses the call. `parsed` is shared between callers: hand
 * a host function `copyOf(parsed)`, so that one that changes its argument cannot change what the next one sees.
 */
export function checkArguments(
  tool: string,
  rules: ToolRules | undefined,
  args: Json,
  task: TaskSource,
): ArgumentCheck {
  const key = args !== null && typeof args === 'object' ? args : null;
  const schema = rules?.input;
  const cached = key ? checked.get(key) : undefined;
  if (cached && cached.schema === schema) return cached.result;
  // The task's reference is made only when the schema is asked (most asks of a round find the answer above).
  const result = check(tool, rules, args, taskRef(task));
  if (key) checked.set(key, { schema, result });
  // The validated value parses to itself: the same answer holds for it (the steps that follow ask with it).
  if (result.ok && result.args !== null && typeof result.args === 'object')
    checked.set(result.args, { schema, result });
  return result;
}

/**
 * A private copy of a validated value, for one host function: what `structuredClone` gives, faster for the plain
 * data the chart holds (arrays and plain objects, copied here; anything else, such as a `Date` a schema made, goes
 * to `structuredClone`). Several calls a round copy arguments and the principal, and `structuredClone` serialises.
 * As with `structuredClone`, a value met twice is copied once: what the original shares the copy shares, a cycle
 * stays a cycle, and a value reached by many paths (a DAG) costs one visit, not one per path.
 */
export function copyOf<T>(value: T): T {
  if (value === null || typeof value !== 'object') return copyPlain(value, 0, null) as T;
  const copied = copyPlain(value, 0, new Map());
  return (copied === TOO_DEEP ? structuredClone(value) : copied) as T;
}

/** Past this depth the value is handed to `structuredClone` whole (the walk is recursive: the stack is the limit). */
const MAX_DEPTH = 64;
const TOO_DEEP = Symbol('too deep');

/** `seen`: each object met so far and its copy (null only for a value that is not an object). */
function copyPlain(value: unknown, depth: number, seen: Map<object, unknown> | null): unknown {
  if (value === null || typeof value !== 'object') return typeof value === 'function' ? structuredClone(value) : value;
  if (seen!.has(value)) return seen!.get(value);
  if (depth > MAX_DEPTH) return TOO_DEEP;
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return cloned(value, seen!);
    const out: unknown[] = new Array(value.length);
    seen!.set(value, out);
    for (let i = 0; i < value.length; i++) {
      const item = copyPlain(value[i], depth + 1, seen);
      if (item === TOO_DEEP) return TOO_DEEP;
      out[i] = item;
    }
    return out;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return cloned(value, seen!);
  const out: Record<string, unknown> = {};
  seen!.set(value, out);
  for (const key of Object.keys(value)) {
    const item = copyPlain((value as Record<string, unknown>)[key], depth + 1, seen);
    if (item === TOO_DEEP) return TOO_DEEP;
    // An own `__proto__` key (JSON.parse makes them) stays a key, as structuredClone keeps it; never a prototype.
    if (key === '__proto__')
      Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
    else out[key] = item;
  }
  return out;
}

/** `structuredClone`'s copy of a value this walk does not copy itself, remembered so that it is made once. */
function cloned(value: object, seen: Map<object, unknown>): unknown {
  const copy = structuredClone(value);
  seen.set(value, copy);
  return copy;
}

function parse(
  rules: ToolRules,
  value: unknown,
  task: TaskRef,
): { success: true; data: unknown } | { success: false; summary: string } {
  try {
    const parsed = rules.parseInput ? rules.parseInput(value, task) : rules.input.safeParse(value);
    return parsed.success
      ? { success: true, data: parsed.data }
      : { success: false, summary: zodSummary(parsed.error as never) };
  } catch (error) {
    // Only the error's name: the model sees this, and a message may name internal hosts or data.
    return { success: false, summary: `the input schema of ${rules.name} failed (${errorName(error)})` };
  }
}

function check(tool: string, rules: ToolRules | undefined, args: Json, task: TaskRef): ArgumentCheck {
  if (!rules) return { ok: false, code: 'unknown_tool', summary: `no tool named ${tool} is installed` };
  const parsed = parse(rules, args, task);
  if (!parsed.success) return { ok: false, code: 'invalid_arguments', summary: parsed.summary };
  let text: string;
  let value: Json;
  try {
    text = canonicalJson(parsed.data);
    value = JSON.parse(text) as Json;
  } catch (error) {
    return { ok: false, code: 'invalid_arguments', summary: safeErrorText(error) };
  }
  // The executors parse these arguments again before running them. A schema whose output does not parse to itself
  // (a transform) would run other arguments than the ones hashed, confirmed and keyed. (Canonical JSON parses back to
  // a value with the same canonical JSON, so `text` is that of `value` too.)
  const again = parse(rules, value, task);
  let same: boolean;
  try {
    same = again.success && canonicalJson(again.data) === text;
  } catch {
    same = false;
  }
  if (!same) {
    return {
      ok: false,
      code: 'invalid_arguments',
      summary: `the validated arguments of ${tool} do not validate to themselves; the tool's input schema transforms them`,
    };
  }
  // defineTool refused identity fields the schema names; a record or an open object lets the model choose keys.
  const identity = identityFieldInArguments(value);
  if (identity) {
    return {
      ok: false,
      code: 'invalid_arguments',
      summary:
        identity.kind === 'field'
          ? `the arguments of ${tool} carry an identity field at ${identity.path}; identity comes from the host's principal, not from arguments`
          : `${identity.detail}; identity fields are checked only within that bound`,
    };
  }
  return { ok: true, args: value, parsed: parsed.data, text };
}

/** Round-trips through canonical JSON: rejects non-JSON values, drops prototypes. */
export function toJson(value: unknown): Json {
  return JSON.parse(canonicalJson(value)) as Json;
}

/** What a task's reference is read off: its context. */
export type TaskSource = { taskId: string; principal: { tenantId: string }; startedAt: number };

/** The task a check is for, from its context. */
export function taskRef(context: TaskSource): TaskRef {
  return { taskId: context.taskId, tenantId: context.principal.tenantId, startedAt: context.startedAt };
}
