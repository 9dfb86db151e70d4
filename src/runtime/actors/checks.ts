/**
 * The business-validation and authorization actors: run one call's `validate` or `authorize` hook with the tool's
 * timeout. Only a plain `{ ok: true }` passes; a throw, a timeout or any other value is a refusal, reported as data
 * (the chart's guards judge it). A thrown error's message never reaches the model: it may name internal hosts.
 */
import type { CheckActorInput, CheckActorOutput, CheckVerdict } from '../../../machines/actors.js';
import { copyOf } from '../../../machines/lib/arguments.js';
import { errorName } from '../../../machines/lib/text.js';
import { taskFacts } from '../../../machines/lib/toolRules.js';
import type { Tool, ValidationContext, ValidationResult } from '../../tool.js';
import type { ActorHost } from '../actorHost.js';
import { type Cancel, runWithTimeout } from '../timeouts.js';
import { fromTask } from './taskLogic.js';
import { scopeOf } from '../sealing.js';
import { HOOK_NAMES as WHAT, type Hook, verdictOf } from '../hookNow.js';
import { parseArguments, principalCopy } from './callAttempt.js';

export function checkActor(host: ActorHost, hook: Hook) {
  return fromTask<CheckActorOutput, CheckActorInput>(async ({ input, stop }) => {
    const started = host.clock.now();
    const verdict = await runCheck(host, hook, input, stop);
    return { at: host.clock.now(), verdict, durationMs: Math.max(0, host.clock.now() - started) };
  });
}

/** One call's `validate` or `authorize` hook, as a verdict (never throws). */
export async function runCheck(
  host: ActorHost,
  hook: Hook,
  input: CheckActorInput,
  stop: Cancel,
): Promise<CheckVerdict> {
  const what = WHAT[hook];
  const tool = host.registry.get(input.call.tool);
  const run = tool?.[hook] as
    ((args: unknown, ctx: ValidationContext) => ValidationResult | Promise<ValidationResult>) | undefined;
  if (!tool || !run)
    return { ok: false, code: 'unavailable', summary: `${what} of ${input.call.tool} is not installed` };
  const { privacy } = host.registry;
  const context = host.task(input.taskId).context();
  const args = parseArguments(privacy, scopeOf(context), tool as Tool, input.call.args);
  if (!args.ok) return { ok: false, code: args.code, summary: args.summary };
  // The hook sees what the user asked for (a copy: it cannot change the task's), and what the task did so far.
  const mandate = context.mandate === null ? null : copyOf(context.mandate);
  const principal = principalCopy(input.principal);
  const facts = taskFacts(context);
  // Not wrapped in an async function: a hook that answers synchronously is taken as is, with no timer. Its signal is
  // made only if it looks.
  const timed = await runWithTimeout(host.clock, tool.timeoutMs, stop, (s) =>
    run.call(tool, args.value, {
      taskId: input.taskId,
      principal,
      get signal() {
        return s.signal;
      },
      mandate,
      task: facts,
    }),
  ).catch((error: unknown) => ({ kind: 'error' as const, error }));
  if (timed.kind === 'done') return verdictOf(hook, timed.value, args.sealing);
  if (timed.kind === 'timeout')
    return { ok: false, code: 'unavailable', summary: `${what} did not finish within ${tool.timeoutMs} ms` };
  if (timed.kind === 'aborted') return { ok: false, code: 'unavailable', summary: `${what} was aborted` };
  return { ok: false, code: 'unavailable', summary: `${what} failed (${errorName(timed.error)})` };
}
