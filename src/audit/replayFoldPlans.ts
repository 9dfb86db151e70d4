/**
 * The fold's steps for plans and workflows: a plan's refusal, adoption and steps, its approval (a confirmation of the
 * plan's hash), and a workflow's calls and decisions. See `replayFold.ts` for the rest.
 */
import type { AuditEntry } from '../../machines/journal.js';
import type { FoldHelpers } from './replayFoldHelpers.js';
import type { ReplayedTask } from './replayedTask.js';

export function foldPlan(entry: Extract<AuditEntry, { kind: 'plan' }>, { decide }: FoldHelpers): void {
  decide({
    kind: 'plan',
    name: entry.action,
    decision: entry.action === 'step' ? (entry.step?.status ?? 'step') : entry.action,
    code: entry.code,
    summary: entry.summary,
    tool: entry.step?.tool ?? null,
    callId: entry.callId,
  });
}

export function foldWorkflow(
  task: ReplayedTask,
  entry: Extract<AuditEntry, { kind: 'workflow' }>,
  { decide }: FoldHelpers,
): void {
  decide({
    kind: 'workflow',
    name: entry.action,
    decision: entry.action,
    code: entry.code,
    summary: entry.summary,
    tool: null,
    callId: entry.callId,
  });
  // The program's call starts a batch of its own.
  if (entry.action === 'call') task.lastResults = [];
}

/** A plan's approval: asked (again, when the host's policy changed), then granted, rejected or expired. */
export function foldPlanApproval(task: ReplayedTask, entry: Extract<AuditEntry, { kind: 'confirmation' }>): void {
  if (entry.action === 'requested') task.pendingConfirmation = requested(task, entry);
  else if (entry.action === 'granted' || entry.action === 'rejected' || entry.action === 'expired')
    task.pendingConfirmation = null;
}

/** The confirmation a `requested` entry asks for: one request more when the same call (or plan) was asked before. */
export function requested(
  task: ReplayedTask,
  entry: Extract<AuditEntry, { kind: 'confirmation' }>,
): NonNullable<ReplayedTask['pendingConfirmation']> {
  return {
    id: entry.confirmationId,
    callId: entry.callId,
    tool: entry.tool,
    argsHash: entry.argsHash,
    requestedAt: entry.at,
    expiresAt: entry.expiresAt,
    request: (task.pendingConfirmation?.callId === entry.callId ? task.pendingConfirmation.request : 0) + 1,
  };
}
