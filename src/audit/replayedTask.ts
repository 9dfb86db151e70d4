/**
 * What a replay of the audit journal holds: the task as `replayAudit` reconstructs it after N entries. Its own module
 * so the fold's step (`replayFold.ts`) and the fold (`replayAudit.ts`) share it without importing each other.
 */
import type {
  BudgetCounters,
  BudgetLimits,
  FinalStatus,
  GateName,
  Json,
  ModelReservation,
  StopReason,
} from '../../machines/context.js';
import type { AuditEntry } from '../../machines/journal.js';
import type { TaskState } from '../../machines/tags.js';

export type ReplayStatus = TaskState;

/** A tool call of the latest batch, as far as the journal tells. */
export interface ReplayedCall {
  callId: string;
  tool: string;
  effect: 'read' | 'write' | null;
  args: Json | null;
  argsHash: string | null;
  idempotencyKey: string | null;
  /** `ok`, a failure code, a gate's rejection code, or null while it waits or runs. */
  result: string | null;
  /** The gate that rejected it, if one did. */
  gate: GateName | null;
  attempts: number;
  durationMs: number | null;
}

export interface ReplayedConfirmation {
  id: string;
  callId: string;
  tool: string;
  argsHash: string;
  requestedAt: number;
  expiresAt: number | null;
  /** 1 for the first request of this call, 2 after it was asked again, ... */
  request: number;
}

/** One decision of the host, in journal order. */
export interface ReplayedDecision {
  seq: number;
  turn: number;
  at: number;
  /** `check`: a gate asked one of the tool's hooks (its decision follows as a `gate`). */
  kind:
    | 'gate'
    | 'check'
    | 'confirmation'
    | 'tool'
    | 'lookup'
    | 'review'
    | 'outage'
    | 'stop'
    | 'cancel'
    | 'user'
    | 'compensation'
    | 'plan'
    | 'workflow'
    | 'subtask';
  /** Gate name, confirmation action, tool name... */
  name: string;
  /** pass / reject / stop for gates; ok or a code for tools; found / not_found / inconclusive for lookups. */
  decision: string;
  code: string | null;
  summary: string | null;
  tool: string | null;
  callId: string | null;
}

/** A transition the task took, as the runtime recorded it (`src/audit/chartMoves.ts`). */
export interface ReplayedTransition {
  from: string;
  to: string;
  /** The audit entry it was recorded in (its index in the journal). */
  seq: number;
  /** Its event (`always` for an eventless one), and its guard as text (null when it has none). */
  event: string;
  guard: string | null;
  /**
   * Its number in the chart's transition list, as the diagrams number it (`describeChart(...).edges[n - 1]`); null
   * when an earlier chart recorded it (`chartHistory.ts`), whose numbering today's diagrams do not share.
   */
  edge: number | null;
}

export interface ReplayedTask {
  /** Entries folded so far. */
  step: number;
  /**
   * The machine state as a dotted path (`executing.awaitingConfirmation`), as the runtime recorded it; null before
   * `task_started`, and where the journal holds no record of it (see `recorded`).
   */
  state: string | null;
  /**
   * Whether `state` is what the runtime recorded. False for entries written before transitions were recorded (or
   * recorded by another version of the chart): the state is then unknown (null), except where the caller gave the
   * task's current state for the journal's end (`replayAudit`'s `current`).
   */
  recorded: boolean;
  /** The chart fingerprint the journal declared last (the `moves` of the first entry of each save). */
  chart: string | null;
  status: ReplayStatus;
  turn: number;
  /** Every state entered, in order (a state entered twice appears twice), as far as recorded. */
  visited: string[];
  transitions: ReplayedTransition[];
  budget: { limits: BudgetLimits | null; used: BudgetCounters };
  pendingConfirmation: ReplayedConfirmation | null;
  /** The calls of the latest batch. */
  lastResults: ReplayedCall[];
  decisions: ReplayedDecision[];
  /** The model asked the user something and no answer came yet (the text is in the transcript). */
  waitingForAnswer: boolean;
  cancelRequested: { by: string; reason: string } | null;
  outcome: { status: FinalStatus; reason: StopReason } | null;
  /** The last entry folded. */
  last: AuditEntry | null;
  /** The reservation of the model turn in progress (settled to the actual usage by its model_output). */
  turnReservation: ModelReservation | null;
  /** The turn's reservation is debited now (given back while waiting out an outage, and when the turn fails). */
  reservationHeld?: boolean;
  /** What a model summariser's call in `compacting` reserved, until its `compaction` entry settles it. */
  compactionReserve?: ModelReservation | null;
}
