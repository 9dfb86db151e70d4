/**
 * Entries the machine emits for the append-only journal of a task: the audit trail (every decision) and the
 * transcript (what the model is shown). The runtime appends them with the snapshot that produced them, so the
 * snapshot stays the same size however long the task runs.
 */
import type {
  BudgetLimits,
  Effect,
  FinalStatus,
  GateName,
  Json,
  ModelReservation,
  ModelUsage,
  Observation,
  StopReason,
} from './agentTypes.js';

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
  | { kind: 'refusal'; at: number; turn: number; text: string }
  /** A host note to the model that its previous output could not be used. */
  | { kind: 'invalid_output'; at: number; turn: number; detail: string };

export type ConfirmationAction = 'requested' | 'granted' | 'refused' | 'rejected' | 'expired';

export type AuditEntry = { at: number; turn: number } & (
  | {
      kind: 'task_started';
      userId: string;
      tenantId: string;
      scopes: string[];
      goal: string;
      limits: BudgetLimits;
      policyVersion: string;
    }
  | { kind: 'model_requested'; reservation: ModelReservation }
  | { kind: 'model_output'; output: string; usage: ModelUsage; calls: number }
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
      code: string | null;
      expiresAt: number | null;
    }
  | { kind: 'user_answered'; userId: string }
  | { kind: 'cancel_requested'; by: string; reason: string; deferred: boolean }
  | { kind: 'task_stopped'; status: FinalStatus; reason: StopReason }
);

export type AuditKind = AuditEntry['kind'];
