/** The status projection: what a host sees of a task, from its context and its summary. */
import type {
  ForkLink,
  AgentContext,
  BudgetCounters,
  BudgetLimits,
  Evidence,
  Mandate,
  Observation,
  Outage,
  ParentLink,
  SubtaskLink,
  Outcome,
  PendingConfirmation,
  Plan,
  WorkflowState,
  Principal,
  Review,
} from '../../machines/context.js';
import type { ReplyCode } from '../../machines/failures.js';
import type { AuditEntry } from '../../machines/journal.js';
import { remaining } from '../../machines/lib/budget.js';
import type { LiveTask } from '../runtime/liveTask.js';
import { type TaskState, type TaskSummary, summarize } from '../store/summary.js';

export interface TaskStatus {
  taskId: string;
  state: TaskState;
  /** The machine state, dotted ("executing.awaitingConfirmation"). */
  stateValue: string;
  revision: number;
  goal: string;
  /** The principal the task runs for, as the host gave it at start. */
  principal: Principal;
  turn: number;
  outcome: Outcome | null;
  /** What the user asked for, as the host derived it at start (never changed by the task). */
  mandate: Mandate | null;
  pendingConfirmation: PendingConfirmation | null;
  question: string | null;
  /** When the question stops waiting for an answer. */
  questionExpiresAt: number | null;
  /** The write a reviewer must resolve (state `review_required`). */
  review: Review | null;
  /** The model outage the task is waiting out (state `waiting_for_model`), with its next attempt. */
  outage: Outage | null;
  budget: { limits: BudgetLimits; used: BudgetCounters; remaining: BudgetCounters; deadlineAt: number };
  evidence: Evidence[];
  /** Results of the last batch, paired by call id. */
  observations: Observation[];
  /** The plan in force or awaiting approval (plan-and-execute), its steps as tool results left them; else null. */
  plan: Plan | null;
  /** The workflow the task follows (its current step and what each step established), or null. */
  workflow: WorkflowState | null;
  /** The task that started this one through a sub-task tool, or null. */
  parent: ParentLink | null;
  /** The children this task started through sub-task tools: id, tool, status and (once ended) outcome. */
  children: SubtaskLink[];
  /** A copy an operator forked from another task: that task and the step; else null. */
  forkedFrom: ForkLink | null;
  createdAt: number;
  updatedAt: number;
}

export interface UserEventResult {
  /** True when the event changed the task (a confirmation granted, an answer taken, a cancel applied). */
  accepted: boolean;
  /** Why not, or what happens now: arguments_changed, confirmation_expired, wrong_user, cancel_deferred... */
  code: ReplyCode | null;
  message: string;
  status: TaskStatus;
}

/** An audit entry with its position in the task's journal. */
export type AuditRecord = AuditEntry & { seq: number };

export function statusFrom(context: AgentContext, summary: TaskSummary): TaskStatus {
  return {
    taskId: context.taskId,
    state: summary.state,
    stateValue: summary.stateValue,
    revision: summary.revision,
    goal: context.goal,
    principal: {
      userId: context.principal.userId,
      tenantId: context.principal.tenantId,
      scopes: [...context.principal.scopes],
    },
    turn: context.turn,
    outcome: context.outcome,
    mandate: context.mandate,
    pendingConfirmation: context.pendingConfirmation,
    question: context.question,
    questionExpiresAt: context.questionExpiresAt,
    review: context.review,
    outage: context.outage,
    budget: {
      limits: context.budget.limits,
      used: context.budget.used,
      remaining: remaining(context.budget),
      deadlineAt: context.budget.deadlineAt,
    },
    evidence: context.evidence,
    observations: context.batch?.calls.flatMap((c) => (c.observation ? [c.observation] : [])) ?? [],
    plan: context.plan?.current ?? null,
    workflow: context.workflow,
    parent: context.parent ?? null,
    forkedFrom: context.forkedFrom ?? null,
    children: context.subtasks ?? [],
    createdAt: summary.createdAt,
    updatedAt: summary.updatedAt,
  };
}

/** The status of a task driven here: its current snapshot (saved or about to be), with the last saved revision. */
export function statusOfLive(task: LiveTask): TaskStatus {
  const snapshot = task.currentSnapshot();
  const saved = task.summary;
  const context = snapshot.context as AgentContext;
  const summary = summarize({ value: snapshot.value, context }, snapshot.tags, {
    revision: saved?.revision ?? 0,
    createdAt: saved?.createdAt ?? context.startedAt,
    updatedAt: saved?.updatedAt ?? context.startedAt,
  });
  return statusFrom(context, summary);
}
