/**
 * Sub-tasks, the orchestrator's part: starting a child from the link its parent recorded (same principal, the
 * parent's policy and model, a subset of its tools, a narrower mandate, the share of the budgets taken from the
 * parent), finding a child started before (its id comes from the parent's id and the call's key), taking a child's
 * outcome back to its waiting parent, and cancelling the children of a parent that ended.
 *
 * Every delivery is idempotent and driven from stored state, so it is safe to do twice and enough to do late: a
 * child's end settles its parent; a parent that comes to wait settles itself (its child may have ended first); and
 * `recover()` settles every waiting parent (a child that ended while the parent's process was down).
 */
import {
  type AgentContext,
  type AgentInput,
  type Principal,
  type SubtaskOutcome,
  agentInputSchema,
  childTaskIdOf,
} from '../../machines/context.js';
import type { SubtaskFinished } from '../../machines/events.js';
import { safeErrorText } from '../../machines/lib/text.js';
import { CapacityError, HostRequestError, MandateUsedError, TaskExistsError } from '../errors.js';
import { moneyUnder } from '../mandate.js';
import type { ToolRegistry } from '../runtime/toolRegistry.js';
import type { TaskStore } from '../store/taskStore.js';
import type { LookupResult, ToolResult } from '../toolTypes.js';
import type { SubtaskStarted, SubtaskStarter } from '../subtask.js';
import { isFinished } from '../store/erasure.js';
import { TASK_STATES } from '../store/summary.js';
import type { Logger } from './hooks.js';
import type { LiveTasks } from './liveTasks.js';
import type { Settings } from './options.js';
import type { TaskStatus } from './status.js';
import type { TaskSummary } from '../store/summary.js';

export interface SubtaskDeps {
  store: TaskStore;
  live: LiveTasks;
  registry: ToolRegistry;
  settings: Settings;
  logger: Logger;
  /** Creates a task (the orchestrator's start, after the request checks). */
  create: (input: AgentInput) => Promise<TaskStatus>;
  /** Cancels a task as `by` (the orchestrator's cancel). */
  cancel: (taskId: string, by: Principal, reason: string) => Promise<unknown>;
}

export class Subtasks implements SubtaskStarter {
  constructor(private readonly deps: SubtaskDeps) {}

  /** Starts the child the parent's call recorded; a child that exists already (a start sent again) is found. */
  async start(
    parentTaskId: string,
    callId: string,
    principal: Readonly<Principal>,
  ): Promise<ToolResult<SubtaskStarted>> {
    const parent =
      this.deps.live.get(parentTaskId)?.context() ?? (await this.deps.store.load(parentTaskId))?.snapshot.context;
    const link = parent?.subtasks.find((l) => l.callId === callId);
    if (!parent || !link)
      return { ok: false, code: 'tool_error', summary: 'the parent recorded no sub-task for this call' };
    try {
      await this.deps.create(this.childInput(parent, link.childTaskId, callId, principal));
    } catch (error) {
      if (error instanceof TaskExistsError) {
        // A start sent again finds its child; a task that only holds the id (another's) is not adopted.
        const existing = await this.deps.store.load(link.childTaskId);
        if (existing && isChildOf(existing.snapshot.context, parentTaskId))
          return { ok: true, value: { child_task_id: link.childTaskId } };
        return {
          ok: false,
          code: 'subtask_not_started',
          summary: `the sub-task did not start: a task ${link.childTaskId} exists that is not this task's child`,
        };
      }
      // A definite refusal (no capacity, a mandate used, a request the host refuses): the child did not start.
      if (error instanceof CapacityError || error instanceof MandateUsedError || error instanceof HostRequestError)
        return { ok: false, code: 'subtask_not_started', summary: `the sub-task did not start: ${error.message}` };
      throw error;
    }
    return { ok: true, value: { child_task_id: link.childTaskId } };
  }

  /** Finds the child a start with this key made, by the id the key gives. */
  async find(parentTaskId: string, idempotencyKey: string): Promise<LookupResult<SubtaskStarted>> {
    const childTaskId = childTaskIdOf(this.deps.registry.toolkit.sha256, parentTaskId, idempotencyKey);
    const envelope = await this.deps.store.load(childTaskId);
    return envelope && isChildOf(envelope.snapshot.context, parentTaskId)
      ? { found: true, value: { child_task_id: childTaskId } }
      : { found: false };
  }

  private childInput(
    parent: AgentContext,
    childTaskId: string,
    callId: string,
    principal: Readonly<Principal>,
  ): AgentInput {
    const link = parent.subtasks.find((l) => l.childTaskId === childTaskId)!;
    const now = this.deps.settings.clock.now();
    const { share } = link;
    return agentInputSchema.parse({
      taskId: childTaskId,
      goal: link.goal,
      principal: { ...principal, scopes: [...principal.scopes] },
      mandate: link.mandate,
      catalog: parent.catalog,
      policy: parent.policy,
      provenance: parent.provenance,
      limits: {
        modelTurns: share.modelTurns,
        toolCalls: share.toolCalls,
        writes: share.writes,
        retries: share.retries,
        tokens: share.tokens,
        costMicros: share.costMicros,
        money: moneyUnder(this.deps.settings.mandates, link.mandate, share.money, share.money),
        // Never later than the parent's deadline.
        wallClockMs: Math.max(1, link.deadlineAt - now),
      },
      modelReservation: parent.modelReservation,
      success: link.success,
      startedAt: now,
      tools: link.tools,
      parent: { taskId: parent.taskId, callId, tool: link.tool },
      compaction: {
        atTokens: parent.compaction.atTokens,
        resultBytes: parent.compaction.resultBytes,
        summariser: parent.compaction.summariser,
      },
    });
  }

  /** After each save: a parent that came to wait, or a task that ended (a child, or a parent with children). */
  saved(summary: TaskSummary): void {
    const run = async () => {
      if (summary.state === 'waiting_for_subtask') return this.settle(summary.taskId);
      if (!isFinished(summary.state)) return;
      const context = (await this.deps.store.load(summary.taskId))?.snapshot.context;
      if (!context) return;
      if (context.parent) await this.settle(context.parent.taskId);
      await this.cancelChildren(context);
    };
    run().catch((error: unknown) =>
      this.deps.logger.warn(
        { taskId: summary.taskId, err: safeErrorText(error) },
        'a sub-task link could not be settled',
      ),
    );
  }

  /** Gives a waiting parent the outcome of each child that has ended (stored state; safe to do twice). */
  async settle(parentTaskId: string): Promise<void> {
    const stored = await this.deps.store.load(parentTaskId);
    if (!stored || stored.summary.state !== 'waiting_for_subtask') return;
    for (const link of stored.snapshot.context.subtasks.filter((l) => l.status === 'running')) {
      const child = await this.deps.store.load(link.childTaskId);
      const outcome = child?.snapshot.context.outcome;
      if (!child || !outcome || !isChildOf(child.snapshot.context, parentTaskId)) continue;
      await this.deliver(parentTaskId, outcomeEvent(this.deps.settings.clock.now(), child.snapshot.context));
    }
  }

  /** Cancels the children of a task that ended while they ran (a child ending later is then refused, harmlessly). */
  async cancelChildren(context: AgentContext): Promise<void> {
    for (const link of context.subtasks.filter((l) => l.status !== 'finished')) {
      const child = await this.deps.store.load(link.childTaskId);
      if (!child || isFinished(child.summary.state)) continue;
      await this.deps.cancel(
        link.childTaskId,
        context.principal,
        `its parent ${context.taskId} ended ${context.outcome?.status ?? ''}`.trim(),
      );
    }
  }

  /**
   * Recovery, after a process died: every parent waiting for a child is settled, and every child still open whose
   * parent ended (or is gone) is cancelled (the cascade that process may not have finished).
   */
  async settleAll(): Promise<number> {
    const waiting = await this.deps.store.list({ states: ['waiting_for_subtask'] });
    for (const parent of waiting) await this.settle(parent.taskId);
    await this.cancelOrphans();
    return waiting.length;
  }

  /** Cancels each open child whose parent ended or is gone; returns how many. */
  async cancelOrphans(): Promise<number> {
    const { store } = this.deps;
    const open = await store.list({ states: TASK_STATES.filter((state) => !isFinished(state)) });
    let cancelled = 0;
    // Only ids a child can have (childTaskIdOf): the other open tasks are not loaded.
    for (const summary of open.filter((t) => t.taskId.startsWith('sub_'))) {
      const child = (await store.load(summary.taskId))?.snapshot.context;
      if (!child?.parent) continue;
      const parent = await store.load(child.parent.taskId);
      if (parent && !isFinished(parent.summary.state)) continue;
      await this.deps.cancel(child.taskId, child.principal, `its parent ${child.parent.taskId} ended`);
      cancelled += 1;
    }
    return cancelled;
  }

  private deliver(parentTaskId: string, event: SubtaskFinished): Promise<void> {
    const { live } = this.deps;
    return live.exclusive(parentTaskId, async () => {
      const task = await live.hydrate(parentTaskId);
      try {
        task.send(event);
        await task.barrier();
      } finally {
        live.releaseIfSettled(task);
      }
    });
  }
}

/** True when `context` is a child of `parentTaskId` (a task merely holding a child's id is not). */
function isChildOf(context: AgentContext, parentTaskId: string): boolean {
  return context.parent?.taskId === parentTaskId;
}

/** The child's outcome as its parent receives it: status, reason, evidence (its trusted tool results), what it spent. */
export function outcomeEvent(at: number, child: AgentContext): SubtaskFinished {
  const outcome = child.outcome!;
  const { used } = child.budget;
  const result: SubtaskOutcome = {
    status: outcome.status,
    code: outcome.reason.code,
    message: outcome.reason.message.slice(0, 2_000),
    evidence: outcome.evidence.slice(0, 8).map((e) => ({ tool: e.tool, callId: e.callId, fields: e.fields })),
    used: {
      modelTurns: Math.max(0, used.modelTurns),
      toolCalls: Math.max(0, used.toolCalls),
      writes: Math.max(0, used.writes),
      retries: Math.max(0, used.retries),
      tokens: Math.max(0, used.tokens),
      costMicros: Math.max(0, used.costMicros),
      money: Math.max(0, used.money),
    },
    at,
  };
  return { type: 'subtask.finished', at, childTaskId: child.taskId, outcome: result };
}
