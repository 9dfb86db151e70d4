/**
 * The shape every step has: a pure function of (context, event, toolkit) that returns a context patch, the journal
 * entries to append, and for host events the chart's answer. The chart wires each step as an action by name.
 */
import type { MachineEvent } from '../actors.js';
import type { AgentContext, Json } from '../context.js';
import type { AuditEntry, HostReply, TranscriptEntry } from '../journal.js';
import { timeOf } from '../journal.js';
import type { Toolkit } from '../toolkit.js';

export interface StepResult {
  context?: Partial<AgentContext>;
  audit?: AuditEntry[];
  transcript?: TranscriptEntry[];
  /** The answer to the host event being handled (only `user.*`, `task.*` and `timer.*` events get one). */
  reply?: HostReply;
}

export type Step = (context: AgentContext, event: MachineEvent, toolkit: Toolkit) => StepResult;

/**
 * Retries an actor reports, never more than the allowance it was given (the remaining budget): the budget's
 * `used` cannot pass its limit even if an actor misreports.
 */
export function retriesWithin(context: AgentContext, reported: number): number {
  const allowance = Math.max(0, context.budget.limits.retries - context.budget.used.retries);
  return Math.min(Math.max(0, Math.floor(reported)), allowance);
}

/** Ends a wait for a human: the deadline moves by the time waited, so waiting does not spend the budget. */
export function endWait(context: AgentContext, event: MachineEvent): Pick<AgentContext, 'waitingSince' | 'budget'> {
  if (context.waitingSince === null) return { waitingSince: null, budget: context.budget };
  const waited = Math.max(0, timeOf(context, event) - context.waitingSince);
  return { waitingSince: null, budget: { ...context.budget, deadlineAt: context.budget.deadlineAt + waited } };
}

export function describeFields(fields: Record<string, Json>): string {
  return Object.entries(fields)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(', ');
}

/** Appends `item` to a bounded list, keeping the newest `limit` items (no duplicates when `unique`). */
export function bounded<T>(list: readonly T[], items: readonly T[], limit: number, unique = false): T[] {
  const next = unique ? [...new Set([...list, ...items])] : [...list, ...items];
  return next.slice(-limit);
}
