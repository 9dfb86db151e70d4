/**
 * The service's request and response shapes, as zod schemas: handlers parse every body, query and header with
 * them (a failure is a 400 naming the field), and the OpenAPI document is generated from the same schemas.
 */
import { z } from 'zod';
import { confirmationReasonSchema, riskClassSchema } from '../../machines/calls.js';
import {
  taskCancelledSchema,
  userAnsweredSchema,
  userConfirmedSchema,
  userRejectedSchema,
} from '../../machines/events.js';
import { startRequestSchema } from '../orchestrator/options.js';
import { TASK_STATES, type TaskState, taskSummarySchema } from '../store/summary.js';
import { taskStatusSchema } from '../orchestrator/statusSchema.js';
import { WAITING_REASONS, type WaitingReason } from '../orchestrator/taskSearch.js';

/** A task id as the orchestrator takes it. */
const id = startRequestSchema.shape.taskId.unwrap();

/**
 * Every error the service answers with, as an RFC 9457 problem (`application/problem+json`, src/http/problem.ts):
 * the standard members, the service's machine-readable `code`, and `message` (the same sentence as `detail`).
 */
export const problemSchema = z.strictObject({
  /** A URN per code: `urn:statechart-agent:problem:task_not_found`. */
  type: z.string(),
  /** The code in words, the same for every problem of this type. */
  title: z.string(),
  /** The HTTP status; on a refused decision, the task's status after it (nothing changed), as before. */
  status: z.union([z.int(), taskStatusSchema]),
  /** This occurrence, in a sentence. */
  detail: z.string(),
  code: z.string(),
  message: z.string(),
});

/**
 * What a caller may send to start a task: the goal in their words, a task id, and `input`, which the host's
 * `startRequest` reads for itself (an order id, a ticket, a request on record). Goal and task id are the core's own
 * schemas (`startRequestSchema`), so the service accepts exactly what the orchestrator does. The rules are not here:
 * see `CALLER_FORBIDDEN_FIELDS`.
 */
export const startBodySchema = startRequestSchema.pick({ goal: true, taskId: true }).extend({
  input: z
    .unknown()
    .optional()
    .describe("The host's own field: what the host reads to find this request in its records (an order id, a ticket)."),
});

/**
 * The start request's fields a caller may never set (principal, mandate, limits, success criterion): every field of
 * the core's start request that the body does not have, so a field the core gains later is the host's until the
 * body is given it on purpose.
 */
export const CALLER_FORBIDDEN_FIELDS: readonly string[] = Object.keys(startRequestSchema.shape).filter(
  (field) => !Object.hasOwn(startBodySchema.shape, field),
);

/** A comma-separated list of `values`. */
const listOf = <V extends string>(values: readonly V[]) =>
  z
    .string()
    .max(512)
    .transform((text) =>
      text
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.enum(values as [V, ...V[]])).min(1));

export const listQuerySchema = z.strictObject({
  /** Comma-separated task states. */
  state: listOf<TaskState>(TASK_STATES).optional(),
  /** Comma-separated: what the task waits for (confirmation, approval, answer, model, review, user_away). */
  waitingFor: listOf<WaitingReason>(WAITING_REASONS).optional(),
  /** Only tasks waiting on a call of this tool (its confirmation, or the review of its write). */
  tool: z.string().min(1).max(128).optional(),
  /** `me`: only tasks waiting for a decision of the caller (a confirmation they may give, their question). */
  waiting: z.literal('me').optional(),
  /** Only the tasks of this user (an operator's filter; anyone else sees their own anyway). */
  user: z.string().min(1).max(256).optional(),
  /** Only tasks whose id contains this text. */
  q: z.string().min(1).max(256).optional(),
  /** Only tasks created at least this long ago (ms). */
  olderThanMs: z.coerce.number().int().min(0).optional(),
  limit: z.coerce.number().int().min(1).max(500).optional(),
  /** Tasks to skip, for paging (with `limit`). */
  offset: z.coerce.number().int().min(0).max(100_000).optional(),
});

export const taskParamsSchema = z.strictObject({ taskId: id });

export const auditQuerySchema = z.strictObject({ from: z.coerce.number().int().min(0).optional() });
export const replayQuerySchema = z.strictObject({ at: z.coerce.number().int().min(0).optional() });

/** `Last-Event-ID` (header or `lastEventId` query): `N` after entry N, `N.status` after the status event of N. */
export const lastEventIdSchema = z
  .string()
  .regex(/^\d{1,9}(\.status)?$/, 'must be an event id this stream sent: N or N.status')
  .transform((text) => ({ seq: Number(text.split('.')[0]), statusSent: text.endsWith('.status') }));

export const eventsQuerySchema = z.strictObject({ lastEventId: z.string().max(32).optional() });

// The decisions' bodies are the caller's fields of the host events they become, with the events' own bounds: the
// service refuses exactly what the orchestrator would. The rest of each event (who, when, scopes) is the session's.
export const confirmBodySchema = z.strictObject({
  confirmationId: userConfirmedSchema.shape.confirmationId,
  /** The hash of exactly the arguments the caller saw (`pendingConfirmation.argsHash`). */
  argsHash: userConfirmedSchema.shape.argsHash,
});
export const rejectBodySchema = z.strictObject({
  confirmationId: userRejectedSchema.shape.confirmationId,
  reason: userRejectedSchema.shape.reason.unwrap().optional(),
});
export const answerBodySchema = z.strictObject({ text: userAnsweredSchema.shape.text });
export const cancelBodySchema = z.strictObject({ reason: taskCancelledSchema.shape.reason.optional() });
export const emptyBodySchema = z.strictObject({});

/** A task as the list shows it: the store's summary (without its timer), and why the caller sees it. */
export const summarySchema = taskSummarySchema.omit({ wakeAt: true }).extend({
  /** Why the caller sees it: their own task, a confirmation they may approve, or (an operator) their tenant's. */
  access: z.enum(['owner', 'approver', 'operator']),
  /** What it waits for, null when it waits for nothing (running, finished). */
  waitingFor: z.enum(WAITING_REASONS).nullable(),
  /** The tool it waits on (its pending confirmation's, or the reviewed write's), else null. */
  tool: z.string().nullable(),
});

export const decisionResultSchema = z.strictObject({
  accepted: z.literal(true),
  code: z.string().nullable(),
  message: z.string(),
  status: taskStatusSchema,
});

export const earlierProposalSchema = z.strictObject({
  callId: z.string(),
  turn: z.number(),
  args: z.unknown(),
  /** What became of it: `ok`, or the refusal's code (outside_mandate, confirmation_rejected...). */
  result: z.string().nullable(),
  summary: z.string().nullable(),
  /** Fields whose value differs from the pending call's: `{ field, was, now }`. */
  differences: z.array(z.strictObject({ field: z.string(), was: z.unknown(), now: z.unknown() })),
});

export const inboxItemSchema = z.strictObject({
  taskId: z.string(),
  goal: z.string(),
  confirmationId: z.string(),
  tool: z.string(),
  /** Exactly the arguments that will run (as the tool shows them to approvers). */
  args: z.unknown(),
  argsHash: z.string(),
  summary: z.string(),
  requestedBy: z.string(),
  requestedAt: z.number(),
  expiresAt: z.number(),
  timeLeftMs: z.number(),
  decideAs: z.enum(['requester', 'approver']),
  approverScope: z.string().nullable(),
  approvals: z.strictObject({ given: z.number(), required: z.number() }),
  /** Why the host asks (the tool's rule, a write's default, its risk class, money, the Rule of Two), and its risk class. */
  reasons: z.array(confirmationReasonSchema),
  risk: riskClassSchema,
  /**
   * The money at stake (minor units): what this call moves by its tool's `amount` rule (null when it cannot be read
   * off the arguments shown), and the task's money budget (used so far, and its limit, null when unlimited).
   */
  money: z.strictObject({
    amount: z.number().nullable(),
    used: z.number(),
    limit: z.number().nullable(),
  }),
  /** What the user asked for, as the host recorded it at start (the refund's order and most), or null. */
  mandate: z.strictObject({ kind: z.string(), terms: z.unknown() }).nullable(),
  /** Whether the caller may approve or reject it now (`Orchestrator.may`), and why not. */
  may: z.strictObject({
    confirm: z.boolean(),
    reject: z.boolean(),
    refused: z.array(z.strictObject({ action: z.string(), code: z.string(), message: z.string() })),
  }),
  earlier: z.array(earlierProposalSchema),
});

/** Why a caller sees a task: their own, a confirmation waiting for their approval, or one they decided as approver. */
export const accessSchema = z.enum(['owner', 'approver', 'decided', 'operator']);

/**
 * What the caller may do on the task now, computed server-side from the rules that decide when they act
 * (`Orchestrator.may`: the host's refusals and the chart's guards); a page shows exactly these controls.
 */
export const maySchema = z.strictObject({
  confirm: z.boolean(),
  reject: z.boolean(),
  cancel: z.boolean(),
  answer: z.boolean(),
  /** Let the stepped model take its turn (the task's user, when the service steps its model). */
  next: z.boolean(),
  /** Each decision the task's state offers but not to this caller, with the refusal it would get. */
  refused: z.array(
    z.strictObject({
      action: z.enum(['confirm', 'reject', 'cancel', 'answer']),
      code: z.string(),
      message: z.string(),
    }),
  ),
});

export const sessionSchema = z.strictObject({
  principal: z.strictObject({ userId: z.string(), tenantId: z.string(), scopes: z.array(z.string()) }),
  /** Send it as `x-csrf-token` with every decision made from a browser (a request that carries cookies). */
  csrfToken: z.string(),
  stepping: z.boolean(),
});

/** A reviewer's finding about the held write (`orchestrator.resolveReview`); `result` only with `happened`. */
export const reviewBodySchema = z
  .strictObject({
    resolution: z.enum(['happened', 'not_happened', 'retry']),
    /** What the write did, as its tool's output (checked against the tool's output schema): with `happened` only. */
    result: z.unknown().optional(),
    note: z.string().min(1).max(256).optional(),
  })
  .refine((body) => body.resolution === 'happened' || body.result === undefined, {
    message: 'result goes with resolution happened only',
    path: ['result'],
  })
  .refine((body) => body.resolution !== 'happened' || body.result !== undefined, {
    message: 'resolution happened needs the result the reviewer found',
    path: ['result'],
  });

/** Why the task is erased, as a short code kept in its tombstone (`gdpr_erasure`): never personal data. */
/** An early model retry takes nothing from the body: who asks is the session's. */
export const retryModelBodySchema = z.strictObject({});

/** A fork: the step (number of audit entries, as `/replay?at=N` counts them) to copy the task at. */
export const forkBodySchema = z.strictObject({ step: z.int().min(1) });

export const eraseBodySchema = z.strictObject({
  reason: z.string().regex(/^[a-z0-9_.:-]{1,64}$/, 'a short code such as gdpr_erasure (a-z, 0-9, _ . : -)'),
  /** Cancel the task first when this process runs it (a write in flight is reconciled); default false: 409. */
  cancelRunning: z.boolean().optional(),
});

export const tombstoneSchema = z.strictObject({
  schemaVersion: z.number(),
  taskId: z.string(),
  erasedAt: z.number(),
  reason: z.string(),
  /** Who erased it (`tenant:user` over HTTP). */
  by: z.string().nullable(),
  removed: z.strictObject({
    snapshot: z.boolean(),
    audit: z.number(),
    transcript: z.number(),
    quarantine: z.boolean(),
  }),
});

export const historySchema = z.strictObject({
  taskId: z.string(),
  state: z.enum(TASK_STATES as [TaskState, ...TaskState[]]),
  /** The transcript (what the model was shown, redacted as stored) grouped by model turn. */
  turns: z.array(z.strictObject({ turn: z.number(), entries: z.array(z.unknown()) })),
  /** Every call the model proposed, with its result (redacted as stored) or where it stands. */
  calls: z.array(
    z.strictObject({
      callId: z.string(),
      tool: z.string(),
      turn: z.number(),
      /** The arguments as the model wrote them, redacted as stored. */
      arguments: z.string(),
      phase: z.enum(['finished', 'awaiting_confirmation', 'outcome_unknown', 'pending', 'not_run']),
      /** Its observation (redacted as stored), or null while it has none. */
      result: z.unknown(),
    }),
  ),
  /** The task's audit trail, each entry with its `seq`. */
  audit: z.array(z.unknown()),
});

export type StartBody = z.infer<typeof startBodySchema>;
export type InboxItem = z.infer<typeof inboxItemSchema>;
export type EarlierProposal = z.infer<typeof earlierProposalSchema>;
