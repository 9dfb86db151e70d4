/**
 * A batch is the set of calls one model turn proposed. Every call ends with exactly one observation, paired by
 * call id. Pure helpers over plain data.
 */
import type { CallOutcome, Verdict } from './actorContracts.js';
import type { ProposedCall } from './agentEvents.js';
import type {
  Batch,
  CallState,
  Catalog,
  Evidence,
  GateName,
  Json,
  Observation,
  SuccessCriterion,
} from './agentTypes.js';
import type { AcceptedCall, ProtocolProblem } from './protocol.js';
import { canonicalJson } from '../src/json/canonicalJson.js';
import { isJsonObject, utf8Length } from '../src/json/strictJson.js';

function blankCall(callId: string, tool: string, args: Json, catalog: Catalog): CallState {
  return {
    callId,
    tool,
    effect: catalog[tool]?.effect ?? 'read',
    args,
    argsHash: null,
    redactedArgs: null,
    idempotencyKey: null,
    needsConfirmation: false,
    confirmationSummary: null,
    confirmedBy: null,
    confirmationRequests: 0,
    phase: 'vetting',
    writeAttempts: 0,
    lookups: 0,
    observation: null,
  };
}

export function createBatch(turn: number, calls: AcceptedCall[], catalog: Catalog): Batch {
  return { turn, closed: false, calls: calls.map((c) => blankCall(c.callId, c.tool, c.args, catalog)) };
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
    const retryable = problem.code !== 'batch_rejected';
    return finished(state, rejection(state, problem.code, problem.summary, 'protocol', retryable));
  });
  return { turn, closed: false, calls };
}

export function rejection(
  call: Pick<CallState, 'callId' | 'tool'>,
  code: string,
  summary: string,
  gate: GateName | undefined,
  retryable: boolean,
): Observation {
  return gate === undefined
    ? { callId: call.callId, tool: call.tool, ok: false, code, summary, retryable }
    : { callId: call.callId, tool: call.tool, ok: false, code, summary, retryable, gate };
}

function finished(call: CallState, observation: Observation): CallState {
  return { ...call, phase: 'finished', observation };
}

/** Applies the schema, business and permission verdicts; rejected calls are finished with their observation. */
export function applyVerdicts(batch: Batch, verdicts: Verdict[]): Batch {
  const byId = new Map(verdicts.map((v) => [v.callId, v]));
  const calls = batch.calls.map((call) => {
    if (call.phase !== 'vetting') return call;
    const verdict = byId.get(call.callId);
    if (!verdict) {
      return finished(call, rejection(call, 'internal_error', 'the host could not vet this call', undefined, false));
    }
    const vetted: CallState = {
      ...call,
      args: verdict.args,
      argsHash: verdict.argsHash,
      redactedArgs: verdict.redactedArgs,
      idempotencyKey: verdict.idempotencyKey,
      needsConfirmation: verdict.needsConfirmation,
      confirmationSummary: verdict.confirmationSummary,
      phase: 'ready',
    };
    const failed = verdict.gates.find((g) => !g.ok);
    if (!failed) return vetted;
    const retryable = failed.gate !== 'permission';
    return finished(
      vetted,
      rejection(call, failed.code ?? `${failed.gate}_rejected`, failed.summary ?? '', failed.gate, retryable),
    );
  });
  return { ...batch, calls };
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
  const start = batch.calls.findIndex((c) => c.phase !== 'finished');
  if (start < 0) return null;
  const first = batch.calls[start]!;
  if (first.effect === 'write' || first.needsConfirmation) {
    return { kind: first.effect, callIds: [first.callId], needsConfirmation: first.needsConfirmation };
  }
  const callIds: string[] = [];
  for (const call of batch.calls.slice(start)) {
    if (call.phase === 'finished') continue;
    if (call.phase !== 'ready' || call.effect !== 'read' || call.needsConfirmation) break;
    callIds.push(call.callId);
  }
  return { kind: 'read', callIds, needsConfirmation: false };
}

export function isBatchComplete(batch: Batch | null): boolean {
  return batch !== null && batch.calls.every((c) => c.phase === 'finished');
}

export function findCall(batch: Batch | null, callId: string): CallState | undefined {
  return batch?.calls.find((c) => c.callId === callId);
}

export function updateCall(batch: Batch, callId: string, patch: Partial<CallState>): Batch {
  return { ...batch, calls: batch.calls.map((c) => (c.callId === callId ? { ...c, ...patch } : c)) };
}

export function finishCall(batch: Batch, callId: string, observation: Observation): Batch {
  return updateCall(batch, callId, { phase: 'finished', observation });
}

/** Gives every unfinished call a "not run" observation with `code` (budget stop, review, cancel, loop). */
export function skipUnfinished(batch: Batch, code: string, summary: string): Batch {
  return {
    ...batch,
    calls: batch.calls.map((c) =>
      c.phase === 'finished' ? c : finished(c, rejection(c, code, summary, undefined, false)),
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

/** Evidence of success: only ever from a validated tool output, never from model text. */
export function evidenceFrom(
  success: SuccessCriterion | null,
  call: CallState,
  value: Json,
): Evidence | null {
  if (!success || success.tool !== call.tool || !isJsonObject(value)) return null;
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
