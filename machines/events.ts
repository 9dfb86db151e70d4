/**
 * The event vocabulary of the agent machine, declared once as zod schemas; the TS types are inferred.
 *
 * The prefix says who may send an event: `model.*` only comes from the invoked model actor (the host API refuses
 * to forward it), `user.*`, `review.*`, `operator.*` and `task.*` only through the host API with the caller's authenticated user
 * and scopes, `timer.*` only from the host's scheduler. Every event carries `at`, the host's clock when it was received, so guards can
 * compare times without reading a clock themselves. The done and error events of invoked actors are in `actors.ts`.
 */
import { z } from 'zod';
import { jsonSchema, modelUsageSchema, subtaskOutcomeSchema } from './context.js';
import { INPUT_LIMITS } from './limits.js';

const at = z.number().int().nonnegative();
/** Bounds on text a host event may carry (it is persisted and shown to the model). */
const TEXT = INPUT_LIMITS.eventText;
const SHORT = INPUT_LIMITS.eventShort;
/** How much of an unusable model output the audit keeps. */
export const RECEIVED = 4_096;

/** One proposed call as the model emitted it. The call id may be missing: the protocol gate decides. */
export const proposedCallSchema = z.strictObject({
  callId: z.string().optional(),
  name: z.string(),
  arguments: z.string(),
});

export const modelEventSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('model.toolsProposed'),
    at,
    calls: z.array(proposedCallSchema).min(1),
    text: z.string().nullable(),
    usage: modelUsageSchema,
  }),
  /**
   * A plan, proposed as a call of the host's `propose_plan` tool (alone in its reply): the arguments as the model sent
   * them; the plan gate parses and checks them.
   */
  z.strictObject({
    type: z.literal('model.planProposed'),
    at,
    callId: z.string().min(1).max(SHORT),
    arguments: z.string(),
    text: z.string().nullable(),
    usage: modelUsageSchema,
  }),
  /** A workflow's decision, given as a call of the host's `submit_decision` (alone in its reply). */
  z.strictObject({
    type: z.literal('model.decided'),
    at,
    callId: z.string().min(1).max(SHORT),
    arguments: z.string(),
    text: z.string().nullable(),
    usage: modelUsageSchema,
  }),
  z.strictObject({ type: z.literal('model.answered'), at, text: z.string().min(1), usage: modelUsageSchema }),
  z.strictObject({ type: z.literal('model.askedUser'), at, question: z.string().min(1), usage: modelUsageSchema }),
  z.strictObject({ type: z.literal('model.refused'), at, reason: z.string(), usage: modelUsageSchema }),
  /** `received`: the output as the model gave it (capped, redacted), for the audit; null when there was none. */
  z.strictObject({
    type: z.literal('model.invalidOutput'),
    at,
    detail: z.string(),
    received: z.string().max(RECEIVED).nullable().optional(),
    usage: modelUsageSchema,
  }),
]);

const userId = z.string().min(1).max(SHORT);
/** The deciding session's scopes, from the host's session (never from a request body): approvers need theirs. */
const scopes = z.array(z.string().min(1).max(SHORT)).max(256);
/** The host session the event came from (the caller's `principal.sessionId`), for the audit. */
const sessionId = z.string().min(1).max(SHORT).optional();

/** A user's confirmation of the pending call: the HTTP service's confirm body is built from its fields. */
export const userConfirmedSchema = z.strictObject({
  type: z.literal('user.confirmed'),
  at,
  confirmationId: z.string().min(1).max(SHORT),
  argsHash: z.string().min(1).max(SHORT),
  userId,
  scopes,
  policyVersion: z.string().min(1).max(SHORT),
  sessionId,
});
export const userRejectedSchema = z.strictObject({
  type: z.literal('user.rejected'),
  at,
  confirmationId: z.string().min(1).max(SHORT),
  userId,
  scopes,
  reason: z.string().max(SHORT).nullable(),
  sessionId,
});
export const userAnsweredSchema = z.strictObject({
  type: z.literal('user.answered'),
  at,
  text: z.string().min(1).max(TEXT),
  userId,
  sessionId,
});
/**
 * The task's user went away (their session closed, the page was left) or came back: the host's session says so, never
 * the model. While the user is away the task pauses before its next model turn and before any write.
 */
export const userLeftSchema = z.strictObject({ type: z.literal('user.left'), at, userId, sessionId });
export const userReturnedSchema = z.strictObject({ type: z.literal('user.returned'), at, userId, sessionId });
export const taskCancelledSchema = z.strictObject({
  type: z.literal('task.cancelled'),
  at,
  reason: z.string().max(SHORT),
  by: z.string().min(1).max(SHORT),
  sessionId,
});

/**
 * An operator of the task's tenant asks the model again now, before the outage's wake-up time. `actor` is the caller
 * the host attaches from the session (never from a request body): the host checks it against the caller again
 * (`hostRefusal`), and the chart's guard reads it.
 */
export const operatorRetryModelSchema = z.strictObject({
  type: z.literal('operator.retryModel'),
  at,
  actor: z.strictObject({ userId, tenantId: userId, operator: z.boolean() }),
  sessionId,
});

export const hostEventSchema = z.discriminatedUnion('type', [
  userConfirmedSchema,
  userRejectedSchema,
  userAnsweredSchema,
  userLeftSchema,
  userReturnedSchema,
  taskCancelledSchema,
  /**
   * A reviewer's finding about the write a task waits on: it `happened` (with the result the reviewer found, checked
   * against the tool's output schema), it `not_happened`, or `retry` it with the same idempotency key.
   */
  z.strictObject({
    type: z.literal('review.resolved'),
    at,
    userId,
    scopes,
    resolution: z.enum(['happened', 'not_happened', 'retry']),
    result: jsonSchema.nullable(),
    note: z.string().max(SHORT).nullable(),
    sessionId,
  }),
  operatorRetryModelSchema,
  z.strictObject({ type: z.literal('timer.confirmationExpired'), at, confirmationId: z.string().min(1).max(SHORT) }),
  z.strictObject({ type: z.literal('timer.answerExpired'), at }),
  z.strictObject({ type: z.literal('timer.modelRetryDue'), at }),
  z.strictObject({ type: z.literal('timer.awayExpired'), at }),
]);

/**
 * A child task (sub-task) ended: its outcome, read by the orchestrator from the child's stored state and sent to the
 * parent. Never forwarded from the host API (not in `HOST_EVENT_TYPES`): only the orchestrator sends it.
 */
export const subtaskFinishedSchema = z.strictObject({
  type: z.literal('subtask.finished'),
  at,
  childTaskId: z.string().min(1).max(SHORT),
  outcome: subtaskOutcomeSchema,
});

export type ModelEvent = z.infer<typeof modelEventSchema>;
export type HostEvent = z.infer<typeof hostEventSchema>;
export type ProposedCall = z.infer<typeof proposedCallSchema>;
export type SubtaskFinished = z.infer<typeof subtaskFinishedSchema>;
/**
 * Sent by the runtime alone, never by a host: a task restored into a state that decides at once (an eventless state,
 * e.g. `vetting.judging` after a migration) takes its decision on it. No state handles it.
 */
export interface TaskRestored {
  type: 'task.restored';
  at: number;
}
export type AgentEvent = ModelEvent | HostEvent | SubtaskFinished | TaskRestored;
export type HostEventOf<T extends HostEvent['type']> = Extract<HostEvent, { type: T }>;

/** Event types the host API may forward to a task. Everything else is refused at the API edge. */
export const HOST_EVENT_TYPES = hostEventSchema.options.map((option) => option.shape.type.value);
