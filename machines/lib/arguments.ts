/**
 * The schema gate's check of one call's arguments against the installed tool's input schema. Pure; computed once
 * per arguments object (the guard and the step of one transition both ask), since zod parsing is the costly part.
 */
import type { Json } from '../context.js';
import type { ToolRules } from '../toolkit.js';
import { canonicalJson } from './canonicalJson.js';
import { safeErrorText, zodSummary } from './text.js';

export type ArgumentCheck =
  /** `args`: the validated value as plain JSON (what will run); `parsed`: as the tool's schema typed it. */
  | { ok: true; args: Json; parsed: unknown }
  | { ok: false; code: 'unknown_tool' | 'invalid_arguments'; summary: string };

const checked = new WeakMap<object, { rules: ToolRules | undefined; result: ArgumentCheck }>();

export function checkArguments(tool: string, rules: ToolRules | undefined, args: Json): ArgumentCheck {
  const key = args !== null && typeof args === 'object' ? args : null;
  const cached = key ? checked.get(key) : undefined;
  if (cached && cached.rules === rules) return cached.result;
  const result = check(tool, rules, args);
  if (key) checked.set(key, { rules, result });
  // The validated value parses to itself: the same answer holds for it (the steps that follow ask with it).
  if (result.ok && result.args !== null && typeof result.args === 'object') checked.set(result.args, { rules, result });
  return result;
}

function check(tool: string, rules: ToolRules | undefined, args: Json): ArgumentCheck {
  if (!rules) return { ok: false, code: 'unknown_tool', summary: `no tool named ${tool} is installed` };
  const parsed = rules.input.safeParse(args);
  if (!parsed.success) return { ok: false, code: 'invalid_arguments', summary: zodSummary(parsed.error) };
  let value: Json;
  try {
    value = toJson(parsed.data);
  } catch (error) {
    return { ok: false, code: 'invalid_arguments', summary: safeErrorText(error) };
  }
  // The executors parse these arguments again before running them. A schema whose output does not parse to itself
  // (a transform) would run other arguments than the ones hashed, confirmed and keyed.
  const again = rules.input.safeParse(value);
  let same = false;
  try {
    same = again.success && canonicalJson(toJson(again.data)) === canonicalJson(value);
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
  return { ok: true, args: value, parsed: parsed.data };
}

/** Round-trips through canonical JSON: rejects non-JSON values, drops prototypes. */
export function toJson(value: unknown): Json {
  return JSON.parse(canonicalJson(value)) as Json;
}
