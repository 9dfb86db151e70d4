/**
 * The fold's steps for plans and workflows: a plan's refusal, adoption and steps, its approval (a confirmation of the
 * plan's hash, decided in `awaitingPlanApproval`), and a workflow's calls and decisions (from `following`). See
 * `replayFold.ts` for the rest.
 */
import type { AuditEntry } from '../../machines/journal.js';
import type { FoldMoves } from './replayFoldMoves.js';
import type { ReplayedTask } from './replayedTask.js';

export function foldPlan(task: ReplayedTask, entry: Extract<AuditEntry, { kind: 'plan' }>, moves: FoldMoves): void {
  const { enter, decide } = moves;
  decide({
    kind: 'plan',
    name: entry.action,
    decision: entry.action === 'step' ? (entry.step?.status ?? 'step') : entry.action,
    code: entry.code,
    summary: entry.summary,
    tool: entry.step?.tool ?? null,
    callId: entry.callId,
  });
  // Refused, or adopted without approval: the next turn follows (a held plan waits on its confirmation entry).
  if ((entry.action === 'refused' || entry.action === 'adopted') && task.state === 'thinking') enter('deciding');
}

export function foldWorkflow(
  task: ReplayedTask,
  entry: Extract<AuditEntry, { kind: 'workflow' }>,
  moves: FoldMoves,
): void {
  const { enter, decide, inExecuting, inVetting, enterExecuting } = moves;
  decide({
    kind: 'workflow',
    name: entry.action,
    decision: entry.action,
    code: entry.code,
    summary: entry.summary,
    tool: null,
    callId: entry.callId,
  });
  if (entry.action === 'refused') enter('reasking');
  else if (entry.action === 'decided') enter('deciding');
  else {
    // A call's step is recorded as its batch closes; the flow then goes on from `following`.
    if (inExecuting() || inVetting()) enterExecuting('selecting');
    enter('deciding');
    if (entry.action !== 'step') enter('following');
    if (entry.action === 'call') {
      task.lastResults = [];
      enter('vetting.choosing');
    }
  }
}

/** A plan's approval: the task waits in `awaitingPlanApproval`; granted, rejected or expired, it decides again. */
export function foldPlanApproval(
  task: ReplayedTask,
  entry: Extract<AuditEntry, { kind: 'confirmation' }>,
  enter: (state: string) => void,
): void {
  if (entry.action === 'requested') {
    // Asked again (the host's policy changed): the same plan, one request more.
    task.pendingConfirmation = requested(task, entry);
    enter('awaitingPlanApproval');
  } else if (entry.action === 'granted' || entry.action === 'rejected' || entry.action === 'expired') {
    task.pendingConfirmation = null;
    enter('deciding');
  }
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
