/**
 * A batch is the set of calls one model turn proposed. Every call ends with exactly one observation, paired by
 * call id. Pure helpers over plain data.
 */
import type { AcceptedCall, ProtocolProblem } from './protocol.js';
import type { CallOutcome } from '../actors.js';
import type { ProposedCall } from '../events.js';
import type { Batch, CallState, Catalog, Evidence, GateName, Json, Observation, SuccessCriterion } from '../context.js';
import { isRetryable } from '../failures.js';
import { canonicalJson } from './canonicalJson.js';
import { isJsonObject, utf8Length } from './strictJson.js';

function blankCall(callId: string, tool: string, args: Json, catalog: Catalog): CallState {
  return {
    callId,
    tool,
    effect: catalog[tool]?.effect ?? 'read',
    args,
    argsHash: null,
    redactedArgs: null,
    idempotencyKey: null,
    confirmation: null,
    confirmationSummary: null,
    confirmedBy: null,
    confirmationRequests: 0,
    phase: 'vetting',
    writeAttempts: 0,
    lookups: 0,
    observation: null,
    runAs: null,
    resendAfter: null,
  };
}

export function createBatch(
  turn: number,
  calls: readonly Pick<AcceptedCall, 'callId' | 'tool' | 'args'>[],
  catalog: Catalog,
): Batch {
  return { turn, closed: false, current: null, calls: calls.map((c) => blankCall(c.callId, c.tool, c.args, catalog)) };
}

/** A batch refused whole at the protocol gate: every call already has its (rejection) observation. */
export function rejectedBatch(
  turn: number,
  proposed: ProposedCall[],
  problems: ProtocolProblem[],
  catalog: Catalog,
): Batch {
  const calls = proposed.map((call, index) => {
    const problem = problems[index]!;
    const state = blankCall(problem.callId ?? `#${index + 1}`, call.name, null, catalog);
    return {
      ...state,
      phase: 'finished' as const,
      observation: rejection(state, problem.code, problem.summary, 'protocol'),
    };
  });
  return { turn, closed: false, current: null, calls };
}

/**
 * A failed observation. Retryable unless the code says otherwise (`failures.ts`); a refusal at the permission
 * gate never is: proposing the same call again cannot help.
 */
export function rejection(
  call: Pick<CallState, 'callId' | 'tool'>,
  code: string,
  summary: string,
  gate?: GateName,
  retryable = gate === 'permission' ? false : isRetryable(code),
): Observation {
  const base = { callId: call.callId, tool: call.tool, ok: false as const, code, summary, retryable };
  return gate === undefined ? base : { ...base, gate };
}

export interface Step {
  kind: 'read' | 'write';
  callIds: string[];
  needsConfirmation: boolean;
}

/**
 * The next thing to run, in proposal order: a run of consecutive reads that need no confirmation runs together
 * (concurrently); a write, or any call that needs confirmation, runs alone.
 */
export function nextStep(batch: Batch | null): Step | null {
  if (!batch) return null;
  // Plain loops: the guards ask this several times a round.
  const calls = batch.calls;
  let start = 0;
  while (start < calls.length && calls[start]!.phase === 'finished') start++;
  if (start === calls.length) return null;
  const first = calls[start]!;
  if (first.effect === 'write' || first.confirmation !== null) {
    return { kind: first.effect, callIds: [first.callId], needsConfirmation: first.confirmation !== null };
  }
  const callIds: string[] = [];
  for (let i = start; i < calls.length; i++) {
    const call = calls[i]!;
    if (call.phase === 'finished') continue;
    if (call.phase !== 'ready' || call.effect !== 'read' || call.confirmation !== null) break;
    callIds.push(call.callId);
  }
  return { kind: 'read', callIds, needsConfirmation: false };
}

/** The first call of the next step (the one a confirmation or a write is about). */
export function nextCall(batch: Batch | null): CallState | undefined {
  const step = nextStep(batch);
  return step ? findCall(batch, step.callIds[0]!) : undefined;
}

export function isBatchComplete(batch: Batch | null): boolean {
  return batch !== null && batch.calls.every((c) => c.phase === 'finished');
}

export function findCall(batch: Batch | null, callId: string | null): CallState | undefined {
  if (callId === null || !batch) return undefined;
  // A plain loop: no closure per look-up, and the guards look several times a round.
  const calls = batch.calls;
  for (let i = 0; i < calls.length; i++) if (calls[i]!.callId === callId) return calls[i];
  return undefined;
}

/** The call the current single-call state works on (`batch.current`). */
export function currentCall(batch: Batch | null): CallState | undefined {
  return findCall(batch, batch?.current ?? null);
}

export function updateCall(batch: Batch, callId: string, patch: Partial<CallState>): Batch {
  // A copy with the call replaced: several steps a round update a call (a callback is a new closure). `slice`, not
  // `new Array(n)`: the batch's list stays a packed array, as every other list of calls is.
  const calls = batch.calls;
  const updated = calls.slice();
  for (let i = 0; i < calls.length; i++) {
    const c = calls[i]!;
    if (c.callId === callId) updated[i] = { ...c, ...patch };
  }
  return { ...batch, calls: updated };
}

/** Gives the call its observation; it is no longer the current call. */
export function finishCall(batch: Batch, callId: string, observation: Observation): Batch {
  const updated = updateCall(batch, callId, { phase: 'finished', observation });
  return batch.current === callId ? { ...updated, current: null } : updated;
}

/** Gives every unfinished call a "not run" observation with `code` (budget stop, review, cancel, loop). */
export function skipUnfinished(batch: Batch, code: string, summary: string): Batch {
  return {
    ...batch,
    current: null,
    calls: batch.calls.map((c) =>
      c.phase === 'finished'
        ? c
        : { ...c, phase: 'finished', observation: rejection(c, code, summary, undefined, false) },
    ),
  };
}

/** The model-facing observation of an executed call. Output above `capBytes` is cut to a preview string. */
export function observationOf(call: CallState, outcome: CallOutcome, capBytes: number): Observation {
  if (outcome.kind === 'ok') {
    const text = canonicalJson(outcome.value);
    if (utf8Length(text) <= capBytes) {
      return { callId: call.callId, tool: call.tool, ok: true, data: outcome.value, truncated: false };
    }
    return { callId: call.callId, tool: call.tool, ok: true, data: cutToBytes(text, capBytes), truncated: true };
  }
  const retryable = outcome.kind === 'error' ? outcome.retryable : false;
  return rejection(call, outcome.code, outcome.summary, undefined, retryable);
}

function cutToBytes(text: string, capBytes: number): string {
  let end = Math.min(text.length, capBytes);
  while (end > 0 && utf8Length(text.slice(0, end)) > capBytes) end = Math.floor(end * 0.9);
  return text.slice(0, end);
}

/** Fields of a write's result kept as evidence when the task declares no criterion: its first scalar fields. */
const EVIDENCE_FIELDS = 8;

/**
 * Evidence: only ever from a validated tool output, never from model text. With a success criterion, a result that
 * meets it; without one, any write that succeeded (its scalar fields), which the outcome lists without claiming it
 * meets a goal.
 */
export function evidenceFrom(success: SuccessCriterion | null, call: CallState, value: Json): Evidence | null {
  if (!isJsonObject(value)) return null;
  if (success === null) {
    if (call.effect !== 'write') return null;
    const scalars = Object.entries(value)
      .filter(([, v]) => v === null || typeof v !== 'object')
      .slice(0, EVIDENCE_FIELDS);
    return {
      tool: call.tool,
      callId: call.callId,
      idempotencyKey: call.idempotencyKey,
      fields: Object.fromEntries(scalars),
    };
  }
  if (success.tool !== call.tool) return null;
  const fields: Record<string, Json> = {};
  for (const [key, expected] of Object.entries(success.match ?? {})) {
    if (value[key] !== expected) return null;
    fields[key] = expected;
  }
  for (const key of success.require ?? []) {
    const present = value[key];
    if (present === undefined || present === null || present === '') return null;
    fields[key] = present;
  }
  return { tool: call.tool, callId: call.callId, idempotencyKey: call.idempotencyKey, fields };
}

/** The loop-detection key of a call: tool and the first 64 bits of its arguments hash. */
export function callKey(tool: string, argsHash: string): string {
  return `${tool}:${argsHash.replace(/^sha256:/, '').slice(0, 16)}`;
}

/**
 * True when the host's gates refused a call of the batch. A user's refusal of a confirmation is the user's
 * decision, not a refused proposal, so it does not count towards the rejected-turns limit.
 */
export function hasHostRejection(batch: Batch | null): boolean {
  if (!batch) return false;
  const calls = batch.calls;
  for (let i = 0; i < calls.length; i++) {
    const o = calls[i]!.observation;
    if (o?.ok === false && o.gate !== undefined && o.gate !== 'confirmation') return true;
  }
  return false;
}
