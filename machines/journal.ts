/**
 * What the machine emits besides its snapshot: entries for the task's append-only journals (the audit trail of
 * every decision, and the transcript of what the model is shown), and its answer to a host event. The runtime
 * appends the entries with the snapshot that produced them, so the snapshot stays the same size however long the
 * task runs; the answer goes back to whoever sent the event.
 */
import { type MachineEvent, type ModelCompaction, eventTime } from './actors.js';
import { sessionOf } from './lib/session.js';
import type {
  AgentContext,
  BudgetLimits,
  CallState,
  Compensation,
  ConfirmationReason,
  Mandate,
  Effect,
  FinalStatus,
  ForkLink,
  GateName,
  Json,
  ModelReservation,
  ModelUsage,
  Observation,
  PlanEstimate,
  PlanStepStatus,
  Policy,
  Provenance,
  RiskClass,
  StopReason,
  SubtaskShare,
} from './context.js';
import type { ReplyCode } from './failures.js';
import type { CompactionReason, Summariser } from './compactions.js';

/** A warning recorded when a task starts: `no_success_criterion`, a task that may write but can never end `done`. */
export type StartWarning = 'no_success_criterion';

export type TranscriptEntry =
  | { kind: 'goal'; at: number; text: string }
  | {
      kind: 'proposal';
      at: number;
      turn: number;
      text: string | null;
      calls: { callId: string; tool: string; arguments: string }[];
    }
  | { kind: 'result'; at: number; turn: number; observation: Observation }
  | { kind: 'answer'; at: number; turn: number; text: string }
  | { kind: 'question'; at: number; turn: number; text: string }
  | { kind: 'user_answer'; at: number; text: string }
  /** The user did not answer the model's question in time (policy `onAnswerExpiry: 'replan'`). */
  | { kind: 'no_answer'; at: number; turn: number; question: string }
  | { kind: 'refusal'; at: number; turn: number; text: string }
  /** A host note to the model that its previous output could not be used. */
  | { kind: 'invalid_output'; at: number; turn: number; detail: string }
  /** The host's note of a plan's progress: the steps' statuses, from tool results (shown to the model as facts). */
  | { kind: 'plan_progress'; at: number; turn: number; text: string };

/** `approved`: one approval of several recorded; `granted`: the last decision needed, the call may run. */
export type ConfirmationAction = 'requested' | 'approved' | 'granted' | 'refused' | 'rejected' | 'expired';

/**
 * What every audit entry says about where its decision came from. Entries written before agent/5 lack these fields.
 */
export interface AuditStamp {
  /** The model the task's decisions come from, as of this entry: the configured id and the reported version. */
  model: Provenance['model'];
  /** The version of the model adapter's prompt. */
  prompt: string | null;
  /** The host policy's version. */
  policy: string;
  /** The host session of the event behind the entry: the caller's for a user's event, else the task's own. */
  session: string | null;
  /** For an entry about a tool: the tool's version when the task started. */
  toolVersion?: string | null;
}

export type AuditEntry = {
  at: number;
  turn: number;
  /**
   * The chart's transitions this entry saw, as the runtime recorded them (never the chart's steps): see
   * `src/audit/chartMoves.ts`. Absent in entries written before transitions were recorded.
   */
  moves?: string;
} & Partial<AuditStamp> &
  (
    | {
        kind: 'task_started';
        userId: string;
        tenantId: string;
        scopes: string[];
        goal: string;
        mandate: Mandate | null;
        limits: BudgetLimits;
        policyVersion: string;
        /** Safe defaults the host loosened for this task, with its reasons (absent before agent/6). */
        loosened?: Policy['loosened'];
        /** What is worth a look about how it started (absent before agent/6). */
        warnings?: StartWarning[];
        /** The host-defined flow the task follows, if any. */
        workflow?: string;
        /** A fork: the task it copies and the step it was copied at. */
        forkedFrom?: ForkLink;
      }
    /**
     * `offered`: the tools the host's offer rule (and a plan in force) gave this turn, absent when neither narrows them;
     * `planOffered`: the model may propose a plan this turn.
     */
    | { kind: 'model_requested'; reservation: ModelReservation; offered?: string[]; planOffered?: boolean }
    /**
     * For an unusable output, why it was refused (`detail`) and what the model sent (`received`, capped and redacted).
     * `compaction`: the provider refused the turn's prompt as too long, and this reply came from asking again with the
     * conversation compacted harder (src/model/compaction.ts).
     */
    | {
        kind: 'model_output';
        output: string;
        usage: ModelUsage;
        calls: number;
        detail?: string;
        received?: string | null;
        compaction?: ModelCompaction;
      }
    | {
        kind: 'gate';
        gate: GateName;
        decision: 'pass' | 'reject' | 'stop';
        callId: string | null;
        tool: string | null;
        argsHash: string | null;
        code: string | null;
        summary: string | null;
      }
    /**
     * A gate that asks one of the tool's hooks started asking: business validation, resource permission, or (`recheck`)
     * all of them again, with the principal's current session and the rate limit, right before a write runs.
     */
    | {
        kind: 'check_started';
        gate: 'business' | 'permission' | 'recheck';
        callId: string;
        tool: string;
        argsHash: string | null;
      }
    | {
        kind: 'tool_started';
        callId: string;
        tool: string;
        effect: Effect;
        argsHash: string | null;
        args: Json;
        idempotencyKey: string | null;
        attempt: number;
        confirmationId: string | null;
        /** Money debited for it (minor units), 0 when it moves none or is a retry. */
        money: number;
      }
    | {
        kind: 'tool_finished';
        callId: string;
        tool: string;
        code: string;
        durationMs: number;
        attempts: number;
        idempotencyKey: string | null;
      }
    | {
        kind: 'write_lookup';
        callId: string;
        tool: string;
        idempotencyKey: string;
        result: 'found' | 'not_found' | 'inconclusive';
        durationMs: number;
      }
    | {
        kind: 'confirmation';
        action: ConfirmationAction;
        confirmationId: string;
        callId: string;
        tool: string;
        argsHash: string;
        userId: string | null;
        /** How the deciding user decided: as the requester, or as an approver under `scope`. */
        decidedAs: 'requester' | 'approver' | null;
        scope: string | null;
        code: string | null;
        expiresAt: number | null;
        /** For a request: why it is asked, and the tool's risk class (absent before agent/6). */
        reasons?: ConfirmationReason[];
        risk?: RiskClass;
        /** For a rejection: the reason its person typed, sealed like every text a user sends (absent when none). */
        reason?: string;
      }
    | {
        kind: 'review';
        /** `held`: the task waits for a reviewer; `resolved`: a reviewer decided; `refused`: a resolution was refused. */
        action: 'held' | 'resolved' | 'refused';
        callId: string;
        tool: string;
        idempotencyKey: string | null;
        userId: string | null;
        scope: string | null;
        /** The reason it was held, the resolution, or the refusal's code. */
        code: string;
        summary: string;
      }
    | {
        kind: 'model_outage';
        /** `retry_refused`: an operator's early retry the chart did not take (`code` says why). */
        action: 'waiting' | 'retrying' | 'gave_up' | 'retry_refused';
        attempts: number;
        wakeAt: number | null;
        error: string;
        /** An operator's early retry (or its refusal): who asked, as `tenant:user`. Absent for the timer's. */
        by?: string;
        code?: string;
      }
    | { kind: 'question_expired'; question: string }
    | { kind: 'user_answered'; userId: string }
    | { kind: 'cancel_requested'; by: string; reason: string; deferred: boolean }
    | { kind: 'task_stopped'; status: FinalStatus; reason: StopReason }
    /** A stop whose writes are undone first: the stop it will end with, and the compensations in the order they run. */
    | { kind: 'compensation_started'; status: FinalStatus; reason: StopReason; compensations: Compensation[] }
    /** The task's user left or returned (the host said so), the task paused or resumed for it, or the pause expired. */
    | {
        kind: 'presence';
        action: 'left' | 'returned' | 'paused' | 'resumed' | 'expired';
        userId: string;
        expiresAt: number | null;
      }
    /**
     * A plan: proposed (waiting for approval), refused by a check, adopted (with or without approval), rejected or
     * expired unapproved, or one of its steps settled by a tool result (`step`).
     */
    | {
        kind: 'plan';
        action: 'proposed' | 'refused' | 'adopted' | 'rejected' | 'expired' | 'step';
        planId: string | null;
        callId: string;
        hash: string | null;
        code: string | null;
        summary: string;
        steps?: { id: string; tool: string; effect: Effect; dependsOn: string[] }[];
        estimate?: PlanEstimate;
        step?: {
          id: string;
          tool: string;
          status: PlanStepStatus;
          callId: string | null;
          observedAt: number | null;
          evidence: string[];
        };
      }
    /**
     * A workflow's step: the program's call started (`call`), the model's decision taken or refused, a step's fact
     * recorded (`step`, with the step that comes next), or the flow ended.
     */
    | {
        kind: 'workflow';
        action: 'call' | 'decided' | 'refused' | 'step' | 'ended';
        workflow: string;
        step: string | null;
        next: string | null;
        callId: string | null;
        code: string | null;
        summary: string;
      }
    /**
     * A sub-task: the child's share of the budgets taken from the parent as its start is sent (`reserved`, with the
     * share; its money is in the `tool_started` entry), the child started (the parent waits), or the child ended and
     * its outcome came back as the call's result (`finished`, with what of the share went back), or its start did not
     * happen (`released`: the whole share went back). A call refused at a gate is a `gate` entry.
     */
    | {
        kind: 'subtask';
        action: 'reserved' | 'started' | 'finished' | 'released';
        callId: string;
        tool: string;
        childTaskId: string;
        status: FinalStatus | null;
        summary: string;
        share?: SubtaskShare;
        returned?: SubtaskShare;
        /** What the child spent above its share (`finished`): charged to the parent. */
        charged?: SubtaskShare;
      }
    /**
     * The chart entered `compacting`: why, who is to summarise, and what a model summariser's call reserved from the
     * budget (null: no model call). A refusal's turn is charged nothing from here (it reported no usage).
     */
    | {
        kind: 'compaction_started';
        reason: CompactionReason;
        summariser: Summariser;
        reserved: ModelReservation | null;
      }
    /**
     * The chart compacted the conversation (`compacting`): why, who wrote the summary (and why the facts note stood in
     * for it, `fallback`), the transcript entries it replaces in what the model is sent (index range, counts, a hash of
     * the entries), the estimate before and after, and the summary's size and hash. The transcript keeps every entry.
     */
    | {
        kind: 'compaction';
        reason: CompactionReason;
        /** The provider's refusal that led here (`context_too_long`), else null. */
        refusal: string | null;
        source: Summariser | null;
        fallback: string | null;
        replaced: { fromIndex: number; toIndex: number; entries: number; turns: number; hash: string } | null;
        throughTurn: number | null;
        tokensBefore: number;
        tokensAfter: number;
        summaryBytes: number;
        summaryHash: string | null;
        usage: ModelUsage | null;
      }
    /** Every compensation has its result; `task_stopped` follows. */
    | { kind: 'compensation_finished'; compensations: Compensation[] }
  );

export type AuditKind = AuditEntry['kind'];

/** The chart's answer to a host event: whether it changed the task, and why not or what happens now. */
export interface HostReply {
  accepted: boolean;
  code: ReplyCode | null;
  message: string;
}

/** What the machine emits (`actor.on(type, ...)`). */
export type MachineEmitted =
  | { type: 'audit'; entry: AuditEntry }
  | { type: 'transcript'; entry: TranscriptEntry }
  | { type: 'reply'; reply: HostReply };

type AuditBody = AuditEntry extends infer E
  ? E extends unknown
    ? Omit<E, 'at' | 'turn' | 'moves' | keyof AuditStamp>
    : never
  : never;
type GateBody = Omit<
  Extract<AuditEntry, { kind: 'gate' }>,
  'kind' | 'at' | 'turn' | 'moves' | keyof AuditStamp | 'callId' | 'tool' | 'argsHash'
>;

/** The host time of `event` (every event carries one). */
export function timeOf(context: AgentContext, event: MachineEvent): number {
  return eventTime(event, context.startedAt);
}

/** An audit entry stamped with the event's time and the current turn (a round makes a dozen: see `copied`). */
export function auditEntry(context: AgentContext, event: MachineEvent, body: AuditBody): AuditEntry {
  const tool = 'tool' in body && typeof body.tool === 'string' ? body.tool : null;
  return copied(stamped(context, event, tool), body, null);
}

/** `entry` with the keys of `body` (but `skip`) added in their order, as a spread would, without a copy between. */
function copied(entry: Record<string, unknown>, body: object, skip: string | null): AuditEntry {
  for (const key in body) if (key !== skip) entry[key] = (body as Record<string, unknown>)[key];
  return entry as AuditEntry;
}

/** A new entry's time, turn and stamp (`AuditStamp`; `toolVersion` for an entry about a `tool` that has a name). */
function stamped(context: AgentContext, event: MachineEvent, tool: string | null): Record<string, unknown> {
  const entry: Record<string, unknown> = {
    at: timeOf(context, event),
    turn: context.turn,
    model: context.provenance.model,
    prompt: context.provenance.prompt,
    policy: context.policy.version,
    session: sessionOf(context, event),
  };
  if (tool) entry.toolVersion = context.catalog[tool]?.version ?? null;
  return entry;
}

/** A gate decision, about one call or (without `call`) about the task: `{ kind, callId, tool, argsHash, ...body }`. */
export function gateEntry(
  context: AgentContext,
  event: MachineEvent,
  body: GateBody & { call?: Pick<CallState, 'callId' | 'tool' | 'argsHash'> },
): AuditEntry {
  const { call } = body;
  const entry = stamped(context, event, call?.tool ?? null);
  entry.kind = 'gate';
  entry.callId = call?.callId ?? null;
  entry.tool = call?.tool ?? null;
  entry.argsHash = call?.argsHash ?? null;
  return copied(entry, body, 'call');
}
