/**
 * Compensation, the data: a write whose tool names a compensating write (`cancel_booking` for `reserve_room`) is
 * remembered when it succeeds, with the undo its tool derived from the trusted result; when the task stops in a way
 * the policy says must be undone, the remembered writes are compensated newest first, each a call of its own through
 * the gates, and the outcome lists what became of each. Part of the task's data model (`context.ts` re-exports it).
 */
import { z } from 'zod';
import { FINAL_STATUSES, STOP_CODES } from './failures.js';
import { SHORT, jsonSchema, time } from './lib/schemaParts.js';

/** The stops that may be undone: never `done` or `answered`, which met (or claimed nothing beyond) their results. */
export const COMPENSABLE_STOPS = ['failed', 'budget_exhausted', 'cancelled'] as const;
export const compensableStopSchema = z.enum(COMPENSABLE_STOPS);

/** How many succeeded writes a task remembers for compensation (a task's write budget is far smaller by default). */
export const MAX_COMPENSABLE = 32;

/** A write that succeeded and names a compensation: the undo its tool derived from the arguments and the result. */
export const compensableWriteSchema = z.strictObject({
  /** The write's call id. */
  callId: z.string().min(1),
  tool: z.string().min(1).max(SHORT),
  idempotencyKey: z.string().nullable(),
  at: time,
  /** The compensating call, or null when its arguments could not be derived (`problem` says why). */
  undo: z.strictObject({ tool: z.string().min(1).max(SHORT), args: jsonSchema }).nullable(),
  problem: z.string().max(1_000).nullable(),
});

/** What became of one compensation. */
export const COMPENSATION_RESULTS = [
  /** The compensating write succeeded (or had already succeeded in this task: same tool and arguments). */
  'compensated',
  /** It ran and failed, or a gate refused it: the effect stands. */
  'failed',
  /** The task stopped again (a second cancel, a policy that cancels) before it ran: the effect stands. */
  'not_run',
  /** Its arguments could not be derived from the write's result: the effect stands. */
  'not_compensable',
] as const;

export const compensationSchema = z.strictObject({
  /** The write being undone. */
  ofCallId: z.string().min(1),
  tool: z.string().min(1).max(SHORT),
  /** The compensating tool, and the call id its call ran under (null when it was not derived). */
  undoTool: z.string().min(1).max(SHORT).nullable(),
  callId: z.string().nullable(),
  result: z.enum(COMPENSATION_RESULTS),
  /** The failure code (the tool's, or the gate's), null when compensated. */
  code: z.string().max(SHORT).nullable(),
  summary: z.string().max(1_000),
});

/**
 * A stop being unwound: the outcome the task stopped with (applied once its compensations have run), when, and the
 * compensations in the order they run (newest write first).
 */
export const unwindingSchema = z.strictObject({
  since: time,
  stop: z.strictObject({
    status: z.enum(FINAL_STATUSES),
    reason: z.strictObject({ code: z.enum(STOP_CODES), message: z.string(), detail: jsonSchema.optional() }),
    answer: z.string().nullable(),
    unsupportedIds: z.array(z.string().max(SHORT)).max(16),
  }),
  compensations: z.array(compensationSchema).max(MAX_COMPENSABLE),
  /** True once every compensation has its result: the task then ends with `stop`. */
  finished: z.boolean(),
});

export type CompensableStop = z.infer<typeof compensableStopSchema>;
export type CompensableWrite = z.infer<typeof compensableWriteSchema>;
export type Compensation = z.infer<typeof compensationSchema>;
export type CompensationResult = (typeof COMPENSATION_RESULTS)[number];
export type Unwinding = z.infer<typeof unwindingSchema>;
