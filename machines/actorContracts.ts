/**
 * The contract between the agent machine and the invoked actors the runtime provides (`machine.provide`).
 * Inputs are persisted with the snapshot (XState re-runs restored invocations with them), so they are plain JSON.
 * Every output carries `at`, the host clock when the actor finished.
 */
import type { ModelEvent } from './agentEvents.js';
import type { Json, Observation, Principal } from './agentTypes.js';

export interface ModelActorInput {
  taskId: string;
  turn: number;
  /** Results of the previous batch, paired by call id (empty on the first turn). */
  observations: Observation[];
  /** Transport retries (timeouts, 429, 5xx) this turn may spend; checked against the retry budget. */
  retryAllowance: number;
}

/** The model actor resolves with exactly one `model.*` event and how many transport retries it spent. */
export type ModelActorOutput = ModelEvent & { retriesUsed: number };

export interface CallRef {
  callId: string;
  tool: string;
  args: Json;
}

export interface VetActorInput {
  taskId: string;
  principal: Principal;
  calls: CallRef[];
}

export interface GateDecision {
  gate: 'schema' | 'business' | 'permission';
  ok: boolean;
  code: string | null;
  summary: string | null;
}

export interface Verdict {
  callId: string;
  /** The schema-validated arguments (what will run) or, if the schema rejected them, the proposed ones. */
  args: Json;
  argsHash: string;
  redactedArgs: Json;
  /** For writes: derived from task + tool + args hash. */
  idempotencyKey: string | null;
  /** In gate order; stops at the first rejection. */
  gates: GateDecision[];
  needsConfirmation: boolean;
  confirmationSummary: string | null;
}

export interface VetActorOutput {
  at: number;
  verdicts: Verdict[];
}

/** A finished call attempt as the executors report it. `value` is the schema-validated output. */
export type CallOutcome =
  | { kind: 'ok'; value: Json }
  | { kind: 'error'; code: string; summary: string; retryable: boolean }
  /** A write whose effect may or may not have happened (timeout, crash, unclassified failure). */
  | { kind: 'unknown'; code: string; summary: string };

export interface ReadsActorInput {
  taskId: string;
  principal: Principal;
  calls: CallRef[];
  /** Retries all these reads together may spend (the remaining retry budget). */
  retryAllowance: number;
}

export interface ReadResult {
  callId: string;
  outcome: CallOutcome;
  attempts: number;
  durationMs: number;
}

export interface ReadsActorOutput {
  at: number;
  results: ReadResult[];
  retriesUsed: number;
}

export interface WriteActorInput {
  taskId: string;
  principal: Principal;
  call: CallRef;
  idempotencyKey: string;
  /** 1 for the first attempt, higher for same-key retries after a lookup found nothing. */
  attempt: number;
}

export interface WriteActorOutput {
  at: number;
  outcome: CallOutcome;
  durationMs: number;
}

export interface LookupActorInput {
  taskId: string;
  principal: Principal;
  call: CallRef;
  idempotencyKey: string;
  /** 1 for the first lookup of this write; later lookups back off first. */
  attempt: number;
}

export type LookupResult =
  | { kind: 'found'; value: Json }
  | { kind: 'not_found' }
  | { kind: 'inconclusive'; code: string; summary: string };

export interface LookupActorOutput {
  at: number;
  result: LookupResult;
  durationMs: number;
}
