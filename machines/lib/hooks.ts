/**
 * A tool's synchronous hooks (`hooks: 'sync'`), as the gates' guards ask them: `validate` (business validation) and
 * `authorize` (resource permission) of the call being judged, through the toolkit (host code the runtime provides,
 * like the tool's other rules). The verdict is kept per call object and hook, so the step that refuses the call
 * reads the answer the guard had, and the hook is asked once per call.
 */
import { type CheckVerdict, type MachineEvent, outputOf } from '../actors.js';
import type { AgentContext, CallState } from '../context.js';
import { currentCall } from './batch.js';
import type { SyncCheck, Toolkit } from '../toolkit.js';

export type HookName = 'validate' | 'authorize';

const verdicts = new WeakMap<CallState, Map<SyncCheck, CheckVerdict>>();

/** True when the tool's `hook` exists and answers asynchronously: it runs in its invoked state. */
export function isAsyncHook(toolkit: Toolkit, tool: string, hook: HookName): boolean {
  const rules = toolkit.rules(tool);
  if (!rules) return false;
  return hook === 'validate'
    ? rules.validates && rules.validateNow === undefined
    : rules.authorizes && rules.authorizeNow === undefined;
}

/** The synchronous `hook`'s verdict on `call`, or null when the tool has no synchronous one. */
export function syncVerdict(
  context: AgentContext,
  call: CallState,
  toolkit: Toolkit,
  hook: HookName,
): CheckVerdict | null {
  const rules = toolkit.rules(call.tool);
  const ask = hook === 'validate' ? rules?.validateNow : rules?.authorizeNow;
  if (!ask) return null;
  const known = verdicts.get(call)?.get(ask);
  if (known) return known;
  let verdict: CheckVerdict;
  try {
    verdict = ask({ callId: call.callId, tool: call.tool, args: call.args }, context);
  } catch {
    // The runtime's hook never throws; one that does is not trusted with a pass.
    verdict = { ok: false, code: 'unavailable', summary: `the ${hook} hook of ${call.tool} failed` };
  }
  const kept = verdicts.get(call) ?? new Map<SyncCheck, CheckVerdict>();
  verdicts.set(call, kept.set(ask, verdict));
  return verdict;
}

const DONE_VALIDATE = 'xstate.done.actor.validate';
const DONE_AUTHORIZE = 'xstate.done.actor.authorize';

/**
 * The answer of the invoked `validating` or `authorizing` state to judge, or null when `event` carries none for the
 * call being judged. XState hands eventless transitions the event of their macrostep: once the invoked state's call
 * is refused or admitted (no current call), the done event that decided it still reaches `vetting.judging`'s guards
 * for the NEXT call, and must not answer for it (its own synchronous hook, or none, does).
 */
export function invokedVerdict(context: AgentContext, event: MachineEvent, hook: HookName): CheckVerdict | null {
  if (event.type !== (hook === 'validate' ? DONE_VALIDATE : DONE_AUTHORIZE)) return null;
  if (currentCall(context.batch) === undefined) return null;
  return outputOf(event, hook).verdict;
}
