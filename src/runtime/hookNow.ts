/**
 * A tool's `validate` or `authorize` hook asked at once, for a tool that declares them synchronous (`hooks: 'sync'`):
 * the gates' guards reach it through the toolkit (`validateNow`, `authorizeNow`). The verdicts are the invoked
 * actors' (`actors/checks.ts`): only a plain `{ ok: true }` passes.
 */
import type { CallRef, CheckVerdict } from '../../machines/actors.js';
import type { AgentContext } from '../../machines/context.js';
import { copyOf } from '../../machines/lib/arguments.js';
import { cap, errorName } from '../../machines/lib/text.js';
import { taskFacts } from '../../machines/lib/toolRules.js';
import type { Privacy } from '../privacy/privacy.js';
import type { Tool, ValidationContext } from '../tool.js';
import { parseArguments, principalCopy } from './actors/callAttempt.js';
import { type CallSealing, scopeOf, sealVerdict } from './sealing.js';

export type Hook = 'validate' | 'authorize';
export const HOOK_NAMES: Record<Hook, string> = { validate: 'business validation', authorize: 'authorization' };

/** Never aborted: a synchronous hook has no timer and nothing to cancel. */
const NEVER_ABORTED = new AbortController().signal;

/**
 * One call's `validate` or `authorize` hook of a tool that declares them synchronous (`hooks: 'sync'`), asked by the
 * gate's guard in the step that judges the call, for the task whose context it is. The same verdicts as `runCheck`
 * (never throws): a throw is `unavailable`, and so is a promise (the tool said its hooks answer at once).
 */
export function checkNow(privacy: Privacy, tool: Tool, hook: Hook, call: CallRef, context: AgentContext): CheckVerdict {
  const what = HOOK_NAMES[hook];
  const run = tool[hook] as ((args: unknown, ctx: ValidationContext) => unknown) | undefined;
  if (!run) return { ok: false, code: 'unavailable', summary: `${what} of ${call.tool} is not installed` };
  const args = parseArguments(privacy, scopeOf(context), tool, call.args);
  if (!args.ok) return { ok: false, code: args.code, summary: args.summary };
  const ctx: ValidationContext = {
    taskId: context.taskId,
    principal: principalCopy(context.principal),
    signal: NEVER_ABORTED,
    mandate: context.mandate === null ? null : copyOf(context.mandate),
    task: taskFacts(context),
  };
  let result: unknown;
  try {
    result = run.call(tool, args.value, ctx);
  } catch (error) {
    return { ok: false, code: 'unavailable', summary: `${what} failed (${errorName(error)})` };
  }
  if (typeof (result as { then?: unknown } | null)?.then === 'function') {
    void Promise.resolve(result).catch(() => {});
    return {
      ok: false,
      code: 'unavailable',
      summary: `${what} of ${call.tool} returned a promise, but the tool declares hooks: 'sync'`,
    };
  }
  return verdictOf(hook, result, args.sealing);
}

/** Only a plain `{ ok: true }` passes; anything else is a refusal, sealed, its summary capped. */
export function verdictOf(hook: Hook, value: unknown, sealing: CallSealing): CheckVerdict {
  const result = value as Partial<{ ok: unknown; code: unknown; summary: unknown }> | null | undefined;
  if (result?.ok === true) return { ok: true };
  // Sealed before it is cut: a cut must not leave part of a value a whole one would have matched.
  const verdict = sealVerdict(sealing, {
    ok: false,
    code:
      typeof result?.code === 'string' ? result.code : hook === 'authorize' ? 'permission_denied' : 'invalid_arguments',
    summary: typeof result?.summary === 'string' ? result.summary : `${HOOK_NAMES[hook]} did not return { ok: true }`,
  });
  return verdict.ok ? verdict : { ...verdict, summary: cap(verdict.summary) };
}
