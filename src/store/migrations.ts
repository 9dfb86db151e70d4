/**
 * Brings an envelope of an older machine version to the current one, on read, before it is validated. Each step is
 * explicit, only ever maps what changed, and leaves anything it does not recognise as it was (validation and the
 * restore checks then refuse it with their specific reason). A version with no step here is refused on read.
 *
 * - agent/1 -> agent/2: adds `writtenKeys` (writes that succeeded), empty: an agent/1 task has no record of them.
 * - agent/2 -> agent/3: call phases take the chart's state names (`running` becomes `reading`, `writing` or
 *   `reconciling`; the call awaiting confirmation becomes `awaitingConfirmation`) and the batch names its current
 *   call. Vetting became a state per gate: an agent/2 task that rested in `vetting` (its validation hooks were
 *   running) cannot be placed in one of them and is refused; nothing of its batch had run.
 * - agent/3 -> agent/4: the task gains a mandate (none), a memory of denials (empty), money in its budget (none
 *   used, and no limit: an agent/3 task was started without a money budget, and keeps the freedom it had; every
 *   other gate still applies), and the policy fields of agent/4 at their defaults
 *   (`DEFAULT_POLICY`). A call's `needsConfirmation` becomes the requirement it stood for (the task's user confirms,
 *   re-plan on reject, ask again on expiry); a granted confirmation records the hash it was given for and its one
 *   decision. A pending confirmation waits for the task's user. A task that ended in `reviewRequired` (then final)
 *   waits for a reviewer: the write it held is reopened, so a reviewer can resolve it. Questions asked under agent/3
 *   do not expire (they did not then).
 * - agent/4 -> agent/5: the task records which model and prompt its decisions came from. An agent/4 task did not,
 *   so it starts with an "unrecorded" model (no version, no prompt version) until its next model turn names the one
 *   that answered. Tool versions in the catalog, and session ids, stay absent (both are optional).
 * - agent/5 -> agent/6: safe by default; see `migrateToAgent6.ts`.
 * - agent/6 -> agent/7: compensation; see `migrateToAgent7.ts`.
 * - agent/7 -> agent/8: vetting's synchronous gates are one state; see `migrateToAgent8.ts`.
 */
import { UnsupportedVersionError } from '../errors.js';
import { DEFAULT_POLICY } from '../defaults.js';
import { toAgent6Context } from './migrateToAgent6.js';
import { toAgent7Context } from './migrateToAgent7.js';
import { toAgent8 } from './migrateToAgent8.js';

export const MIGRATED_VERSIONS = ['agent/1', 'agent/2', 'agent/3', 'agent/4', 'agent/5', 'agent/6', 'agent/7'] as const;

type Raw = Record<string, unknown>;

const isObject = (value: unknown): value is Raw => typeof value === 'object' && value !== null && !Array.isArray(value);

export function migrate(taskId: string, version: string, envelope: Raw): Raw {
  if (version === 'agent/7') return toAgent8(envelope);
  let current = envelope;
  if (version === 'agent/1') current = toAgent2(current);
  if (version === 'agent/1' || version === 'agent/2') current = toAgent3(taskId, current);
  if (version !== 'agent/4' && version !== 'agent/5' && version !== 'agent/6') current = toAgent4(current);
  if (version !== 'agent/5' && version !== 'agent/6') current = toAgent5(current);
  if (version !== 'agent/6') current = withContext(current, toAgent6Context, 'agent/6');
  return toAgent8(withContext(current, toAgent7Context, 'agent/7'));
}

/** The model of an agent/4 task's decisions was not recorded. */
export const UNRECORDED_PROVENANCE = { model: { id: 'unrecorded', version: null }, prompt: null } as const;

function toAgent5(envelope: Raw): Raw {
  return withContext(
    envelope,
    (context) => ({ ...context, provenance: context.provenance ?? UNRECORDED_PROVENANCE }),
    'agent/5',
  );
}

function withContext(envelope: Raw, change: (context: Raw, snapshot: Raw) => Raw, machineVersion: string): Raw {
  const snapshot = envelope.snapshot;
  if (!isObject(snapshot) || !isObject(snapshot.context)) return { ...envelope, machineVersion };
  return { ...envelope, machineVersion, snapshot: { ...snapshot, context: change(snapshot.context, snapshot) } };
}

function toAgent2(envelope: Raw): Raw {
  return withContext(envelope, (context) => ({ ...context, writtenKeys: context.writtenKeys ?? [] }), 'agent/2');
}

function toAgent3(taskId: string, envelope: Raw): Raw {
  const snapshot = isObject(envelope.snapshot) ? envelope.snapshot : {};
  if (snapshot.value === 'vetting') {
    throw new UnsupportedVersionError(
      taskId,
      'machine version "agent/2" rested in state "vetting" (its validation was running), which agent/3 splits into one state per gate; it cannot be migrated. No call of its batch had run',
    );
  }
  const value = snapshot.value;
  const executing = isObject(value) && typeof value.executing === 'string' ? value.executing : null;
  return withContext(
    envelope,
    (context) => {
      const batch = context.batch;
      if (!isObject(batch) || !Array.isArray(batch.calls)) return context;
      const pending = isObject(context.pendingConfirmation) ? context.pendingConfirmation.callId : null;
      let current: unknown = null;
      const calls = batch.calls.map((call) => {
        if (!isObject(call)) return call;
        if (call.phase === 'running' && (executing === 'writing' || executing === 'reconciling')) {
          current = call.callId;
          return { ...call, phase: executing };
        }
        if (call.phase === 'running' && executing === 'reading') return { ...call, phase: 'reading' };
        if (call.phase === 'ready' && executing === 'awaitingConfirmation' && call.callId === pending) {
          current = call.callId;
          return { ...call, phase: 'awaitingConfirmation' };
        }
        return call;
      });
      return { ...context, batch: { ...batch, calls, current } };
    },
    'agent/3',
  );
}

const V4_POLICY = {
  onRepeatedDenial: DEFAULT_POLICY.onRepeatedDenial,
  reviewScope: DEFAULT_POLICY.reviewScope,
  answerTtlMs: DEFAULT_POLICY.answerTtlMs,
  onAnswerExpiry: DEFAULT_POLICY.onAnswerExpiry,
  modelOutageMs: DEFAULT_POLICY.modelOutageMs,
  modelWakeMs: DEFAULT_POLICY.modelWakeMs,
};

function toAgent4(envelope: Raw): Raw {
  const snapshot = isObject(envelope.snapshot) ? envelope.snapshot : null;
  const held = snapshot?.value === 'reviewRequired' && isObject(snapshot.context) ? heldWrite(snapshot.context) : null;
  const migrated = withContext(
    envelope,
    (context) => {
      const next: Raw = {
        ...context,
        mandate: context.mandate ?? null,
        questionExpiresAt: context.questionExpiresAt ?? null,
        review: context.review ?? null,
        outage: context.outage ?? null,
        denied: context.denied ?? [],
        policy: isObject(context.policy) ? { ...V4_POLICY, ...context.policy } : context.policy,
        budget: withMoney(context.budget),
        pendingConfirmation: isObject(context.pendingConfirmation)
          ? { approverScope: null, approvalsRequired: 1, approvals: [], ...context.pendingConfirmation }
          : context.pendingConfirmation,
        batch:
          isObject(context.batch) && Array.isArray(context.batch.calls)
            ? { ...context.batch, calls: context.batch.calls.map(toV4Call) }
            : context.batch,
      };
      return held ? reopen(next, held) : next;
    },
    'agent/4',
  );
  if (!held || !isObject(migrated.snapshot)) return migrated;
  // No longer final: the task waits for a reviewer.
  const { output: _output, ...rest } = migrated.snapshot;
  return { ...migrated, snapshot: { ...rest, status: 'active' } };
}

function withMoney(budget: unknown): unknown {
  if (!isObject(budget) || !isObject(budget.limits) || !isObject(budget.used)) return budget;
  return {
    ...budget,
    limits: { money: Number.MAX_SAFE_INTEGER, ...budget.limits },
    used: { money: 0, ...budget.used },
  };
}

function toV4Call(call: unknown): unknown {
  if (!isObject(call) || !('needsConfirmation' in call)) return call;
  const { needsConfirmation, ...rest } = call;
  rest.runAs = null;
  rest.resendAfter = null;
  const confirmedBy = isObject(call.confirmedBy)
    ? {
        confirmationId: call.confirmedBy.confirmationId,
        argsHash: call.argsHash,
        at: call.confirmedBy.at,
        decisions: [{ userId: call.confirmedBy.userId, as: 'requester', scope: null, at: call.confirmedBy.at }],
      }
    : (call.confirmedBy ?? null);
  const confirmation =
    needsConfirmation === true
      ? { approverScope: null, approvals: 1, onReject: 'replan', onExpiry: 'ask_again' }
      : null;
  return { ...rest, confirmation, confirmedBy };
}

/** The write an agent/3 `reviewRequired` task stopped on (its outcome names it), or null. */
function heldWrite(context: Raw): { callId: string; summary: string; at: number } | null {
  const outcome = isObject(context.outcome) ? context.outcome : null;
  const reason = outcome && isObject(outcome.reason) ? outcome.reason : null;
  const detail = reason && isObject(reason.detail) ? reason.detail : null;
  if (!detail || typeof detail.callId !== 'string') return null;
  const at =
    typeof context.waitingSince === 'number'
      ? context.waitingSince
      : typeof context.startedAt === 'number'
        ? context.startedAt
        : 0;
  return {
    callId: detail.callId,
    summary: typeof reason?.message === 'string' ? reason.message : 'the outcome of the write could not be established',
    at,
  };
}

function reopen(context: Raw, held: { callId: string; summary: string; at: number }): Raw {
  const batch = isObject(context.batch) ? context.batch : null;
  const list: unknown[] = batch && Array.isArray(batch.calls) ? batch.calls : [];
  const call = list.find((c): c is Raw => isObject(c) && c.callId === held.callId);
  if (!batch || !call) return context;
  const calls = list.map((c) => (c === call ? { ...call, phase: 'awaitingReview', observation: null } : c));
  return {
    ...context,
    outcome: null,
    batch: { ...batch, calls, current: held.callId, closed: false },
    review: {
      callId: held.callId,
      tool: call.tool,
      idempotencyKey: call.idempotencyKey ?? null,
      reason: 'write_outcome_unknown',
      summary: held.summary,
      since: held.at,
    },
    waitingSince: held.at,
  };
}
