/**
 * Compensation, the steps: a write that succeeded is remembered with the undo its tool derives; a stop the policy
 * says must be undone becomes a batch of compensating calls (newest write first) that the vetting and executing
 * states run like any other, every gate included; once they all have a result, the task ends with the stop it was
 * unwinding, its outcome listing what became of each write.
 */
import type { AgentContext, CallState, Compensation, Json, Observation } from '../context.js';
import { MAX_COMPENSABLE } from '../context.js';
import { createBatch } from '../lib/batch.js';
import { copyOf, toJson } from '../lib/arguments.js';
import { safeErrorText } from '../lib/text.js';
import { auditEntry, timeOf } from '../journal.js';
import type { Toolkit } from '../toolkit.js';
import type { Step } from './step.js';

/** True when a stop with `status` makes this task undo its writes first (the guard `mustCompensate` asks it). */
export function willCompensate(context: AgentContext, status: string): boolean {
  return (
    context.unwinding === null &&
    context.compensable.length > 0 &&
    (context.policy.compensateOn as readonly string[]).includes(status)
  );
}

/**
 * The task's compensable writes once `call` succeeded with `value`: the undo its tool derives from the validated
 * arguments and the trusted result, or, when the rule throws or gives something that is not JSON, the reason it
 * cannot be undone. Compensating writes themselves are not remembered (an undo is not undone).
 */
export function rememberWrite(
  context: AgentContext,
  call: CallState,
  value: Json,
  at: number,
  toolkit: Toolkit,
): AgentContext['compensable'] {
  const rule = toolkit.rules(call.tool)?.compensation;
  // One entry per business intent (its idempotency key): call ids are only unique within a batch.
  const known = context.compensable.some((c) => c.idempotencyKey !== null && c.idempotencyKey === call.idempotencyKey);
  if (!rule || context.unwinding !== null || known) return context.compensable;
  let undo: { tool: string; args: Json } | null = null;
  let problem: string | null = null;
  try {
    const args = rule.args(copyOf(call.args), copyOf(value)) as unknown;
    if (args instanceof Promise) {
      args.catch(() => {});
      problem = `the compensation rule of ${call.tool} returned a promise; it must be synchronous`;
    } else undo = { tool: rule.tool, args: toJson(args) };
  } catch (error) {
    problem = `the compensation rule of ${call.tool} failed: ${safeErrorText(error)}`.slice(0, 1_000);
  }
  const entry = { callId: call.callId, tool: call.tool, idempotencyKey: call.idempotencyKey, at, undo, problem };
  // Past the bound (far above the default write budget) later writes are not remembered: the oldest stay undoable.
  if (context.compensable.length >= MAX_COMPENSABLE) return context.compensable;
  return [...context.compensable, entry];
}

/**
 * The stop just recorded (its outcome) is held while the task's writes are undone: one compensating call per write,
 * newest first, as a batch the vetting states take from `choosing`. The outcome is applied when they have all run.
 */
export const beginCompensation: Step = (context, event) => {
  const outcome = context.outcome!;
  const at = timeOf(context, event);
  const order = [...context.compensable].reverse();
  const compensations: Compensation[] = order.map((write, index) => ({
    ofCallId: write.callId,
    tool: write.tool,
    undoTool: write.undo?.tool ?? null,
    callId: write.undo ? `undo-${index + 1}` : null,
    result: write.undo ? 'not_run' : 'not_compensable',
    code: write.undo ? null : 'not_compensable',
    summary: write.undo ? 'not run yet' : (write.problem ?? 'no compensation could be derived'),
  }));
  const calls = order.flatMap((write, index) =>
    write.undo ? [{ callId: `undo-${index + 1}`, tool: write.undo.tool, args: write.undo.args }] : [],
  );
  const stop = {
    status: outcome.status,
    reason: outcome.reason,
    answer: outcome.answer,
    unsupportedIds: outcome.unsupportedIds ?? [],
  };
  return {
    context: {
      unwinding: { since: at, stop, compensations, finished: false },
      batch: createBatch(context.turn, calls, context.catalog),
      outcome: null,
      // The stop that is being unwound answered it; a cancel from now on stops the compensations themselves.
      cancelRequested: null,
      pendingConfirmation: null,
    },
    audit: [
      auditEntry(context, event, {
        kind: 'compensation_started',
        status: outcome.status,
        reason: outcome.reason,
        compensations,
      }),
    ],
  };
};

/** What became of each compensation, from its call's observation (none yet: `not_run`). */
export function compensationResults(context: AgentContext): Compensation[] {
  const unwinding = context.unwinding;
  if (!unwinding) return [];
  return unwinding.compensations.map((c) => {
    if (c.callId === null) return c;
    const observation = context.batch?.calls.find((call) => call.callId === c.callId)?.observation ?? null;
    return observation ? { ...c, ...resultOf(observation) } : c;
  });
}

function resultOf(observation: Observation): Pick<Compensation, 'result' | 'code' | 'summary'> {
  if (observation.ok) return { result: 'compensated', code: null, summary: 'the compensating write succeeded' };
  // The same undo already succeeded in this task (the model asked for it): the effect is undone.
  if (observation.code === 'duplicate_write')
    return { result: 'compensated', code: null, summary: 'already undone by the same write earlier in this task' };
  const notRun = ['cancelled', 'budget_exhausted', 'internal_error'].includes(observation.code);
  return {
    result: notRun ? 'not_run' : 'failed',
    code: observation.code,
    summary: observation.summary.slice(0, 1_000),
  };
}

/** A one-line account of the compensations, appended to the stop's message. */
export function describeCompensations(compensations: readonly Compensation[]): string {
  const undone = compensations.filter((c) => c.result === 'compensated').length;
  const standing = compensations.filter((c) => c.result !== 'compensated').map((c) => `${c.tool} ${c.ofCallId}`);
  return `undid ${undone} of ${compensations.length} write${compensations.length === 1 ? '' : 's'}${
    standing.length ? ` (still in effect: ${standing.join(', ')})` : ''
  }`;
}

/** Every compensation has a result: the task ends with the stop it was unwinding, the results in its outcome. */
export const finishCompensation: Step = (context, event) => {
  const unwinding = context.unwinding!;
  const compensations = compensationResults(context);
  const { status, answer, unsupportedIds } = unwinding.stop;
  const reason = {
    ...unwinding.stop.reason,
    message: `${unwinding.stop.reason.message}; ${describeCompensations(compensations)}`,
  };
  return {
    context: {
      unwinding: { ...unwinding, compensations, finished: true },
      batch: context.batch && { ...context.batch, closed: true, current: null },
      outcome: { status, reason, answer, evidence: context.evidence, unsupportedIds, compensations },
    },
    audit: [
      auditEntry(context, event, { kind: 'compensation_finished', compensations }),
      auditEntry(context, event, { kind: 'task_stopped', status, reason }),
    ],
  };
};
