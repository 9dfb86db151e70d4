/**
 * The call the vetting gates judge, as the ordered guards of `vetting.judging` see it. No step runs before them
 * (one microstep decides a call), so "the call being judged" is computed here, purely: the current call when there
 * is one (a hook of an invoked state, a write being re-checked), else the next call still to vet. Past the schema,
 * the gates judge what would run: the next call as `acceptArguments` would leave it (validated arguments, their hash,
 * their redacted form, a write's idempotency key). That view is computed once per call object and schema, and
 * `acceptArguments` stores that very object, so that the steps of the transition see the call the guards saw.
 */
import type { AgentContext, CallState, Json } from '../context.js';
import type { ToolRules, Toolkit } from '../toolkit.js';
import { checkArguments, copyOf, toJson } from './arguments.js';
import { currentCall } from './batch.js';
import { canonicalHash, idempotencyKeyFor } from './hashing.js';

export interface Judged {
  /** The call as the gates past the schema see it (as proposed when the schema refuses it). */
  call: CallState;
  /** The installed tool's input schema accepts the arguments. */
  schemaOk: boolean;
}

const judged = new WeakMap<CallState, { schema: unknown; result: Judged }>();

/** The next call still to vet, in proposal order, or undefined when every call is judged. */
export function nextToVet(context: AgentContext): CallState | undefined {
  const calls = context.batch?.calls;
  if (!calls) return undefined;
  // A plain loop: the guards and steps ask several times a round, and a callback is a new closure per ask.
  for (let i = 0; i < calls.length; i++) if (calls[i]!.phase === 'vetting') return calls[i];
  return undefined;
}

/** The call being judged as stored (its arguments as proposed until `acceptArguments`): current, else next to vet. */
export function pendingCall(context: AgentContext): CallState | undefined {
  return currentCall(context.batch) ?? nextToVet(context);
}

/** The call being judged: the current one, else the next still to vet (with its accepted arguments, if any). */
export function judgedCall(context: AgentContext, toolkit: Toolkit): CallState | undefined {
  return judge(context, toolkit)?.call;
}

export function judge(context: AgentContext, toolkit: Toolkit): Judged | undefined {
  const current = currentCall(context.batch);
  if (current) {
    const check = checkArguments(current.tool, toolkit.rules(current.tool), current.args, context);
    return { call: current, schemaOk: check.ok };
  }
  const next = nextToVet(context);
  if (!next) return undefined;
  const rules = toolkit.rules(next.tool);
  const cached = judged.get(next);
  if (cached && cached.schema === rules?.input) return cached.result;
  const result = accept(context, next, rules, toolkit);
  judged.set(next, { schema: rules?.input, result });
  // The accepted view is itself the next call once stored: the same answer holds for it.
  if (result.call !== next) judged.set(result.call, { schema: rules?.input, result });
  return result;
}

function accept(context: AgentContext, call: CallState, rules: ToolRules | undefined, toolkit: Toolkit): Judged {
  const check = checkArguments(call.tool, rules, call.args, context);
  if (!check.ok) return { call, schemaOk: false };
  const args = check.args;
  // `check.text` is the canonical JSON of `args`: hashed as is, not written again.
  const argsHash = canonicalHash(toolkit.sha256, check.text);
  return {
    schemaOk: true,
    call: {
      ...call,
      args,
      argsHash,
      redactedArgs: rules?.redact ? redacted(rules, check.parsed) : args,
      idempotencyKey:
        call.effect === 'write' ? idempotencyKeyFor(toolkit.sha256, context.taskId, call.tool, argsHash) : null,
    },
  };
}

function redacted(rules: ToolRules, parsed: unknown): Json {
  try {
    return toJson(rules.redact!(copyOf(parsed)));
  } catch {
    return '[redaction failed]';
  }
}
