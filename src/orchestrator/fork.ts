/**
 * Forking a task from a step into a new one, for an operator: the copy is a new task of the same tenant whose
 * transcript starts with the original's model turns before the one step N was in, marked `forkedFrom: { taskId, step
 * }` in its context, status, task page and `task_started` audit entry.
 *
 * The rule: a fork must never authorise a write. A mandate authorises exactly one task, and a copy minted from the
 * original's terms would authorise its writes again; so a task with a mandate is not forked, nor a sub-task (its
 * authority is its parent's share) nor a task following a workflow (the flow's step cannot be copied from a
 * transcript). The copy is offered only the original's read tools, and runs for the operator who forked it (their
 * session's principal: their scopes decide what it may read, and they answer its questions), never as the original
 * user. The copied tool results stay tool results in the transcript: nothing in them becomes an instruction.
 */
import type { AgentContext, Principal } from '../../machines/context.js';
import type { AuditEntry, TranscriptEntry } from '../../machines/journal.js';
import { AgentError } from '../errors.js';

/** Why a task cannot be forked (`ForkNotAllowedError.reason`). */
export type ForkRefusal = 'operator_only' | 'wrong_tenant' | 'mandate' | 'subtask' | 'workflow' | 'step_out_of_range';

/** `orchestrator.fork` refused: `reason` says which rule. */
export class ForkNotAllowedError extends AgentError<'fork_not_allowed'> {
  constructor(
    readonly reason: ForkRefusal,
    message: string,
  ) {
    super('fork_not_allowed', `${message} (${reason})`);
  }
}

/** What a fork reads of the original. */
export interface ForkSource {
  context: AgentContext;
  audit: readonly AuditEntry[];
  transcript: readonly TranscriptEntry[];
}

/** What the copy gets: its tools (read only), the model turns copied, and the transcript entries copied. */
export interface ForkPlan {
  tools: string[];
  turns: number;
  transcript: TranscriptEntry[];
}

/**
 * The copy of `source` at `step` (its first `step` audit entries, the numbering of time travel, `/replay?at=N`) for
 * `by`, or ForkNotAllowedError. The copy holds the turns before the one step `step` was in: that turn is asked again.
 * A tool is offered only if it was a read for the original and is one in `catalogNow` (the installed tools): a tool a
 * deployment has since made a write is not.
 */
export function forkPlan(
  source: ForkSource,
  by: Principal,
  step: number,
  adminScope: string | null,
  catalogNow: AgentContext['catalog'],
): ForkPlan {
  const { context, audit, transcript } = source;
  if (by.tenantId !== context.principal.tenantId)
    throw new ForkNotAllowedError('wrong_tenant', 'the task belongs to another tenant');
  if (!adminScope || !by.scopes.includes(adminScope))
    throw new ForkNotAllowedError('operator_only', "only an operator of the task's tenant may fork it");
  if (context.mandate)
    throw new ForkNotAllowedError('mandate', 'a task with a mandate is not forked: its mandate authorises one task');
  if (context.parent)
    throw new ForkNotAllowedError('subtask', "a sub-task is not forked: its authority is its parent's share");
  if (context.workflow)
    throw new ForkNotAllowedError(
      'workflow',
      "a task following a workflow is not forked: the flow's step is not copied",
    );
  if (!Number.isInteger(step) || step < 1 || step > audit.length)
    throw new ForkNotAllowedError('step_out_of_range', `step must be 1 to ${audit.length} (the task's audit entries)`);
  const turn = audit[step - 1]!.turn;
  // Everything before the first entry of that turn (a user's answer without a turn stays where it came).
  const cut = transcript.findIndex((entry) => 'turn' in entry && entry.turn >= turn);
  const copied = (cut === -1 ? transcript : transcript.slice(0, cut)).filter((entry) => entry.kind !== 'goal');
  const offered = context.tools ?? Object.keys(context.catalog);
  const tools = offered.filter(
    (name) => context.catalog[name]?.effect === 'read' && catalogNow[name]?.effect === 'read',
  );
  return { tools, turns: Math.max(0, turn - 1), transcript: copied };
}
