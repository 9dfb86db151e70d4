/**
 * The contract between the agent machine and the invoked actors the runtime provides (`machine.provide`), and the
 * done/error events those actors send back. Inputs are persisted with the snapshot (XState re-runs restored
 * invocations with them), so they are plain JSON. Every output carries `at`, the host clock when the actor
 * finished. Actors report every expected failure as output data; an error event means a bug in the runtime.
 */
import type { CallCode, ModelFailureCode } from './failures.js';
import type { Json, Observation, Principal, Provenance } from './context.js';
import type { AgentEvent, ModelEvent } from './events.js';
import type { CompactionReason, Summariser } from './compactions.js';

/** The invoked actors, by invoke id (the key of `snapshot.children`) and by implementation name (`src`). */
export const ACTORS = {
  model: 'model',
  validate: 'validateCall',
  authorize: 'authorizeCall',
  recheck: 'recheckCall',
  reads: 'executeReads',
  write: 'executeWrite',
  lookup: 'lookupWrite',
  summarise: 'summariseConversation',
} as const;

export interface ModelActorInput {
  taskId: string;
  turn: number;
  /** Results of the previous batch, paired by call id (empty on the first turn). */
  observations: Observation[];
  /** Transport retries (timeouts, 429, 5xx) this turn may spend; checked against the retry budget. */
  retryAllowance: number;
}

export interface ModelFailure {
  code: ModelFailureCode;
  message: string;
  /** The last failure was transient (the retries ran out) rather than a refused request. */
  transient: boolean;
}

/** The turn was asked again with its conversation compacted harder, after the provider refused it as too long. */
export interface ModelCompaction {
  level: number;
  after: 'context_too_long';
  /** The provider's refusal (one line, capped, keys masked by the adapter). */
  message: string;
}

/** Exactly one `model.*` event, or why the turn produced none; either way, the transport retries it spent. */
export type ModelActorOutput =
  | {
      kind: 'replied';
      at: number;
      retriesUsed: number;
      event: ModelEvent;
      provenance?: Provenance;
      compaction?: ModelCompaction;
    }
  | { kind: 'failed'; at: number; retriesUsed: number; failure: ModelFailure };

/** Input of the summariser of `compacting`: why, and whether it may ask the model (its turn is reserved). */
export interface SummariseActorInput {
  taskId: string;
  turn: number;
  reason: CompactionReason;
  /** The model may be asked for the summary: the summariser is `model` and the budget held a turn for it. */
  mayAskModel: boolean;
}

/**
 * What `compacting` recorded: the summary that now stands for the transcript entries before `throughIndex`, what it
 * replaced (the entry range, counts and a hash of the entries), and the estimate before and after. `summary` null:
 * there was nothing old enough to replace.
 */
export interface SummariseActorOutput {
  at: number;
  summary: {
    text: string;
    source: Summariser;
    fallback: string | null;
    throughIndex: number;
    throughTurn: number;
  } | null;
  replaced: { fromIndex: number; toIndex: number; entries: number; turns: number; hash: string } | null;
  summaryBytes: number;
  summaryHash: string | null;
  tokensBefore: number;
  tokensAfter: number;
  /** What a model summariser's turn spent (null: the model was not asked). */
  usage: { inputTokens: number; outputTokens: number; costMicros: number } | null;
}

/** A call as the runtime runs it: its validated arguments. */
export interface CallRef {
  callId: string;
  tool: string;
  args: Json;
}

/** Input of the business-validation and authorization hooks of one call. */
export interface CheckActorInput {
  taskId: string;
  principal: Principal;
  call: CallRef;
}

/** What a host hook decided. Anything but a plain `{ ok: true }` from the hook is a refusal. */
export type CheckVerdict = { ok: true } | { ok: false; code: string; summary: string };

export interface CheckActorOutput {
  at: number;
  verdict: CheckVerdict;
  durationMs: number;
}

/** Input of the re-check right before a write runs: the call as it will run, for the task's principal. */
export interface RecheckActorInput {
  taskId: string;
  principal: Principal;
  call: CallRef;
  /**
   * A write sent again with the same key: business validation is not asked again (a first attempt that did take
   * effect would change the facts it checks); the session, the resource permission and the rate limit are.
   */
  resend: boolean;
}

/**
 * Fresh verdicts right before a write: the principal as the host's session sees it now (null when the session is
 * gone), and the tool's hooks on the exact arguments. A tool without a hook, or without a rate limit, passes it.
 */
export interface RecheckActorOutput {
  /** The call re-checked: a done event that reaches the gate's guards for another call does not answer for it. */
  callId: string;
  at: number;
  principal: Principal | null;
  /** Why there is no principal when the host could not say (it threw, timed out, answered for someone else). */
  sessionError: string | null;
  business: CheckVerdict;
  permission: CheckVerdict;
  rate: CheckVerdict;
  durationMs: number;
}

/** A finished call attempt as the executors report it. `value` is the schema-validated output. */
export type CallOutcome =
  | { kind: 'ok'; value: Json }
  | { kind: 'error'; code: string; summary: string; retryable: boolean }
  /** A write whose effect may or may not have happened (timeout, crash, unclassified failure). */
  | { kind: 'unknown'; code: CallCode; summary: string }
  /** A write the tool found inconsistent (`needs_review`): a human decides what happened. */
  | { kind: 'review'; code: 'needs_review'; summary: string };

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
  /** The hash the arguments were validated, keyed and confirmed under: the executor checks them against it. */
  argsHash: string;
  idempotencyKey: string;
  /** 1 for the first attempt, higher for same-key retries after a lookup found nothing. */
  attempt: number;
}

export interface WriteActorOutput {
  at: number;
  outcome: CallOutcome;
  durationMs: number;
}

export type LookupActorInput = WriteActorInput;

export type LookupResult =
  | { kind: 'found'; value: Json }
  | { kind: 'not_found' }
  | { kind: 'inconclusive'; code: 'timeout' | 'lookup_failed' | 'unknown_tool' | 'invalid_output'; summary: string };

export interface LookupActorOutput {
  at: number;
  result: LookupResult;
  durationMs: number;
}

interface ActorOutputs {
  model: ModelActorOutput;
  validate: CheckActorOutput;
  authorize: CheckActorOutput;
  recheck: RecheckActorOutput;
  reads: ReadsActorOutput;
  write: WriteActorOutput;
  lookup: LookupActorOutput;
  summarise: SummariseActorOutput;
}

export type ActorId = keyof ActorOutputs;
export type DoneEvent<Id extends ActorId> = { type: `xstate.done.actor.${Id}`; output: ActorOutputs[Id] };
export type ErrorEvent<Id extends ActorId> = { type: `xstate.error.actor.${Id}`; error: unknown };

/** Every event the chart can see: the external vocabulary plus the done/error events of its invoked actors. */
export type MachineEvent =
  | AgentEvent
  | { [Id in ActorId]: DoneEvent<Id> }[ActorId]
  | ErrorEvent<ActorId>
  | { type: 'xstate.init'; input?: { startedAt?: number } };

/** Host time of an event: `at` on external events, `output.at` on our actors' done events. */
export function eventTime(event: MachineEvent, fallback: number): number {
  if ('at' in event && typeof event.at === 'number') return event.at;
  if ('output' in event && event.output && typeof event.output.at === 'number') return event.output.at;
  return fallback;
}

/** The output of one of our invoked actors' done events; throws if `event` is not that done event. */
export function outputOf<Id extends ActorId>(event: MachineEvent, id: Id): ActorOutputs[Id] {
  if (event.type !== `xstate.done.actor.${id}`) {
    throw new Error(`expected the done event of actor "${id}", got "${event.type}"`);
  }
  return (event as DoneEvent<Id>).output;
}
