/**
 * The host policy the machine enforces, as a zod schema (its type inferred): persisted with each task, so a restart
 * enforces the same numbers. Re-exported by `context.ts` with the rest of the machine's data.
 */
import { z } from 'zod';
import { compensableStopSchema } from './compensations.js';
import { DEFAULT_PLANNING, planningPolicySchema } from './plans.js';
import { SHORT, count } from './lib/schemaParts.js';

/** Host policy that the machine enforces. Persisted with the task so a restart enforces the same numbers. */
export const policySchema = z.strictObject({
  /** Version of the host's policy; confirmations are bound to it. */
  version: z.string().min(1),
  maxCallsPerBatch: z.number().int().positive(),
  maxArgumentBytes: z.number().int().positive(),
  /** Turns in which some call was rejected by a gate, before the task stops. */
  maxRejectedTurns: count,
  /** Malformed model outputs re-asked before the task stops with protocol_error. */
  maxInvalidOutputs: count,
  confirmationTtlMs: z.number().int().positive(),
  /** How many times one call's confirmation is asked (after expiry or changed arguments) before giving up. */
  maxConfirmationRequests: z.number().int().positive(),
  /** Lookups of one unknown write before it goes to review. */
  maxReconcileAttempts: count,
  /** Tool output larger than this (canonical JSON bytes) reaches the model as a truncated preview. */
  observationCapBytes: z.number().int().positive(),
  /** A call refused at the permission or mandate gate, proposed again: `stop` ends the task, `replan` refuses again. */
  onRepeatedDenial: z.enum(['stop', 'replan']),
  /** The scope a reviewer must hold to resolve a task waiting for review. */
  reviewScope: z.string().min(1),
  /** How long the model's question waits for the user's answer. */
  answerTtlMs: z.number().int().positive(),
  /** An unanswered question: `stop` ends the task (`no_answer`), `replan` tells the model nobody answered. */
  onAnswerExpiry: z.enum(['stop', 'replan']),
  /** A model that stays unreachable this long (after its retries) fails the task; until then the task waits. */
  modelOutageMs: z.number().int().nonnegative(),
  /** Waits between model attempts during an outage: doubling from the first to the longest. */
  modelWakeMs: z.strictObject({ first: z.number().int().positive(), longest: z.number().int().positive() }),
  /**
   * A write that moves money runs unconfirmed only while this task's writes, it included, move at most this much
   * (minor units), whatever its tool's rule says. 0 (the default): every money-moving write is confirmed.
   */
  unconfirmedMoneyUpTo: count,
  /** Who confirms a `high_risk` write: approvers holding this scope (other than the requester), or null: the requester. */
  highRiskApproval: z
    .strictObject({ approverScope: z.string().min(1), approvals: z.number().int().min(1).max(16) })
    .nullable(),
  /**
   * The Rule of Two: once a task has seen untrusted input (a tool output marked untrusted) and holds sensitive data
   * (a sealed value), every write is confirmed (`confirm`, the default), whatever its tool's rule says.
   */
  ruleOfTwo: z.enum(['confirm', 'off']),
  /** A read that ended unknown this many times in a row: a write that depends on it stops the task (`could_not_verify`). */
  maxUnknownReads: z.number().int().positive(),
  /**
   * Stops after which the writes this task made are undone by their tools' compensating writes (`compensation`),
   * newest first, each through the gates. Default: every stop that did not meet the goal; `[]`: none are undone.
   */
  compensateOn: z.array(compensableStopSchema).max(3),
  /** How long a task waits, paused, for its user to come back before it is cancelled (`user_away`). */
  awayTtlMs: z.number().int().positive(),
  /** Plan-and-execute: whether the model proposes a plan, who approves it, how often it may re-plan. */
  planning: planningPolicySchema.default(DEFAULT_PLANNING),
  /** Safe defaults the host loosened for this task, each with the reason it gave; recorded in the task's audit at start. */
  loosened: z
    .array(z.strictObject({ option: z.string().min(1).max(SHORT), reason: z.string().min(1).max(1_000) }))
    .max(32),
});

export type Policy = z.infer<typeof policySchema>;
