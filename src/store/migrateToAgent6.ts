/**
 * agent/5 -> agent/6 ("safe by default"). What agent/6 adds to a task, for a task that started before it:
 *
 * - policy: the safe defaults (every money-moving write confirmed, the Rule of Two on, two unknown reads in a row stop
 *   a write that depends on them) and no loosenings. An in-flight task gets the safe values, not the freedom it had:
 *   a write it admitted unconfirmed and has not started re-checking is asked for a confirmation at its re-check
 *   (`rechecking.arguments`) if the new rules want one; a write already past that point (its hooks re-checking, or
 *   sent) finishes under the rules it was admitted with. A host that loosened a default for new tasks does not loosen
 *   it for these (they started without its reason).
 * - budget: no turn settled yet counts as the largest (a turn in flight settles against the reservation it made).
 * - what the task learned: no read marked unverified (agent/5 did not record it), no untrusted input seen, sensitive
 *   data only if the goal holds a sealed value, and the identifiers of the goal, mandate and principal.
 * - confirmations: a requirement or a pending request says why it was asked (`tool_rule`: agent/5 asked only by the
 *   tool's rule) and the tool's risk class (`writable` for a write, `read_only` for a read).
 *
 * Outcomes keep what they said: an agent/5 task that ended `done` without a criterion stays `done`.
 */
import { holdsSealedValue, identifiersIn, identifiersOf, observe } from '../../machines/lib/observedFacts.js';
import type { Json } from '../../machines/context.js';
import { DEFAULT_POLICY } from '../defaults.js';

type Raw = Record<string, unknown>;

const isObject = (value: unknown): value is Raw => typeof value === 'object' && value !== null && !Array.isArray(value);

const V6_POLICY = {
  unconfirmedMoneyUpTo: DEFAULT_POLICY.unconfirmedMoneyUpTo,
  highRiskApproval: DEFAULT_POLICY.highRiskApproval,
  ruleOfTwo: DEFAULT_POLICY.ruleOfTwo,
  maxUnknownReads: DEFAULT_POLICY.maxUnknownReads,
  loosened: [],
};

/** The agent/6 context of an agent/5 one; anything it does not recognise is left for validation to refuse. */
export function toAgent6Context(context: Raw): Raw {
  const goal = typeof context.goal === 'string' ? context.goal : '';
  const startedAt = typeof context.startedAt === 'number' ? context.startedAt : 0;
  const principal = isObject(context.principal) ? context.principal : {};
  const mandate = isObject(context.mandate) ? context.mandate : null;
  const userIds = [
    principal.userId,
    principal.tenantId,
    ...identifiersIn(goal),
    ...(mandate ? identifiersOf((mandate.terms ?? null) as Json) : []),
  ];
  const batch = context.batch;
  return {
    ...context,
    policy: isObject(context.policy) ? { ...V6_POLICY, ...context.policy } : context.policy,
    budget: isObject(context.budget)
      ? { largestTurn: { tokens: 0, costMicros: 0 }, ...context.budget }
      : context.budget,
    unverified: context.unverified ?? [],
    exposure: context.exposure ?? {
      untrustedInput: null,
      sensitiveData: holdsSealedValue(goal) ? { source: 'goal', at: startedAt } : null,
    },
    observedIds:
      context.observedIds ??
      observe(
        [],
        userIds.filter((id): id is string => typeof id === 'string' && /^[\w-]{2,64}$/.test(id)),
      ),
    pendingConfirmation: isObject(context.pendingConfirmation)
      ? {
          reasons: ['tool_rule'],
          risk: riskOfCall(context, context.pendingConfirmation.callId),
          ...context.pendingConfirmation,
        }
      : context.pendingConfirmation,
    batch: isObject(batch) && Array.isArray(batch.calls) ? { ...batch, calls: batch.calls.map(toV6Call) } : batch,
  };
}

function toV6Call(call: unknown): unknown {
  if (!isObject(call) || !isObject(call.confirmation)) return call;
  return {
    ...call,
    confirmation: {
      reasons: ['tool_rule'],
      risk: call.effect === 'read' ? 'read_only' : 'writable',
      ...call.confirmation,
    },
  };
}

function riskOfCall(context: Raw, callId: unknown): 'read_only' | 'writable' {
  const batch = isObject(context.batch) ? context.batch : null;
  const calls: unknown[] = batch && Array.isArray(batch.calls) ? batch.calls : [];
  const call = calls.find((c): c is Raw => isObject(c) && c.callId === callId);
  return call?.effect === 'read' ? 'read_only' : 'writable';
}
