/**
 * Host events and their authorization. A user event reaches a task only through here: the caller's session is
 * checked for what the chart cannot know (tenant, whether the task already ended, current scopes, who may
 * cancel), then the event is sent and the chart's own answer is returned with the task's new status.
 */
import { type AgentContext, type Principal, jsonSchema } from '../../machines/context.js';
import type { HostReply } from '../../machines/journal.js';
import { HOST_EVENT_TYPES, type HostEvent, hostEventSchema } from '../../machines/events.js';
import type { ReplyCode } from '../../machines/failures.js';
import { FencedOutError, HostRequestError } from '../errors.js';
import type { LiveTask } from '../runtime/liveTask.js';
import { scopeOf } from '../runtime/sealing.js';
import type { ToolRegistry } from '../runtime/toolRegistry.js';
import type { LiveTasks } from './liveTasks.js';
import { parseOrThrow, principalSchema } from './options.js';
import { type UserEventResult, statusOfLive } from './status.js';

/** What a reviewer found about a held write. */
export type ReviewResolution =
  | { resolution: 'happened'; result: unknown; note?: string }
  | { resolution: 'not_happened'; note?: string }
  | { resolution: 'retry'; note?: string };

/** Checks the caller and the event's shape, and adds the caller's session (it goes into the audit of what it decides). */
export function checkedEvent(by: Principal, hostEvent: HostEvent): HostEvent {
  parseOrThrow(principalSchema, by, 'principal');
  const event: HostEvent =
    by.sessionId !== undefined && !hostEvent.type.startsWith('timer.')
      ? ({ ...hostEvent, sessionId: by.sessionId } as HostEvent)
      : hostEvent;
  if (!HOST_EVENT_TYPES.includes(event.type))
    throw new HostRequestError('invalid_event', `event ${event.type} is not allowed`);
  // The actor of an operator's event is the caller, never someone the event names.
  if (
    event.type === 'operator.retryModel' &&
    (event.actor.userId !== by.userId || event.actor.tenantId !== by.tenantId)
  )
    throw new HostRequestError('invalid_event', 'operator.retryModel: its actor must be the caller');
  parseOrThrow(hostEventSchema, event, event.type);
  return event;
}

/** Where user events go when a dispatch is configured: recorded, and applied by whichever process drives the task. */
export interface EventInbox {
  submit(taskId: string, by: Principal, event: HostEvent): Promise<UserEventResult>;
}

export class HostEvents {
  /** Set when a dispatch is configured (`inboxEvents.ts`). */
  inbox: EventInbox | null = null;

  constructor(
    private readonly live: LiveTasks,
    private readonly registry: ToolRegistry,
    private readonly adminScope: string | null,
    private readonly policyVersion: string,
  ) {}

  /** A decision on the pending confirmation, with the deciding session's scopes (approvers need theirs). */
  confirm(
    taskId: string,
    by: Principal,
    confirmation: { id: string; argsHash: string },
    at: number,
  ): Promise<UserEventResult> {
    return this.deliver(taskId, by, {
      type: 'user.confirmed',
      at,
      confirmationId: confirmation.id,
      argsHash: confirmation.argsHash,
      userId: by.userId,
      scopes: [...by.scopes],
      policyVersion: this.policyVersion,
    });
  }

  reject(
    taskId: string,
    by: Principal,
    confirmation: { id: string; reason?: string },
    at: number,
  ): Promise<UserEventResult> {
    return this.deliver(taskId, by, {
      type: 'user.rejected',
      at,
      confirmationId: confirmation.id,
      userId: by.userId,
      scopes: [...by.scopes],
      reason: confirmation.reason ?? null,
    });
  }

  resolveReview(taskId: string, by: Principal, resolution: ReviewResolution, at: number): Promise<UserEventResult> {
    const result = resolution.resolution === 'happened' ? parseOrThrow(jsonSchema, resolution.result, 'result') : null;
    return this.deliver(taskId, by, {
      type: 'review.resolved',
      at,
      userId: by.userId,
      scopes: [...by.scopes],
      resolution: resolution.resolution,
      result,
      note: resolution.note ?? null,
    });
  }

  /**
   * An operator asks the model again now, before the outage's wake-up time. The actor is the caller's session, and
   * whether it holds the operator scope is the host's to say (the chart checks the tenant and the budget).
   */
  retryModel(taskId: string, by: Principal, at: number): Promise<UserEventResult> {
    const operator = this.adminScope !== null && by.scopes.includes(this.adminScope);
    return this.deliver(taskId, by, {
      type: 'operator.retryModel',
      at,
      actor: { userId: by.userId, tenantId: by.tenantId, operator },
    });
  }

  /** Checks the event and the caller, loads the task if needed, and delivers the event (with a dispatch: records it). */
  async deliver(taskId: string, by: Principal, hostEvent: HostEvent): Promise<UserEventResult> {
    const event = checkedEvent(by, hostEvent);
    if (this.inbox) return this.inbox.submit(taskId, by, event);
    try {
      return await this.deliverHere(taskId, by, event);
    } catch (error) {
      // Another process took the task over while this event was being saved (this lease had lapsed): the save was
      // refused, so nothing of the event is stored and nothing it started runs. It is applied once more, under a new
      // lease, to what that process stored: the chart's answer then (or TaskBusyError while that process drives it).
      if (!(error instanceof FencedOutError)) throw error;
      return this.deliverHere(taskId, by, event);
    }
  }

  /** Loads the task here under its lease, sends the event and waits until what it changed is durable. */
  private deliverHere(taskId: string, by: Principal, event: HostEvent): Promise<UserEventResult> {
    return this.live.exclusive(taskId, async () => {
      const task = await this.live.hydrate(taskId);
      try {
        const reply = this.apply(task, by, this.sealed(task.context(), event));
        await task.barrier();
        return { ...reply, status: statusOfLive(task) };
      } finally {
        // Loaded only for this event (refused, or leaving it waiting/finished): do not keep it in memory.
        this.live.releaseIfSettled(task);
      }
    });
  }

  /** Sends an already sealed event to a task driven here, unless the host refuses it first: the answer to it. */
  apply(task: LiveTask, by: Principal, event: HostEvent): HostReply {
    const refusal = this.refusal(task.context(), by, event);
    if (refusal) return { accepted: false, ...refusal };
    return task.send(event) ?? { accepted: false, code: null, message: `the task did not take ${event.type}` };
  }

  /** The event with the sensitive values in its text (and a reviewer's result) sealed, before the task records it. */
  sealed(context: AgentContext, event: HostEvent): HostEvent {
    const { privacy } = this.registry;
    const scope = scopeOf(context);
    switch (event.type) {
      case 'user.answered':
        return { ...event, text: privacy.text(scope, event.text) };
      case 'user.rejected':
        return event.reason === null ? event : { ...event, reason: privacy.text(scope, event.reason) };
      case 'task.cancelled':
        return { ...event, reason: privacy.text(scope, event.reason) };
      case 'review.resolved': {
        const tool = this.registry.get(context.review?.tool ?? '');
        const note = event.note === null ? null : privacy.text(scope, event.note);
        const result = event.result === null ? null : privacy.json(scope, event.result, tool?.sensitive?.output ?? []);
        return { ...event, note, result };
      }
      default:
        return event;
    }
  }

  /** What the host knows and the chart cannot: who the caller is now. */
  refusal(context: AgentContext, by: Principal, event: HostEvent): { code: ReplyCode; message: string } | null {
    return hostRefusal(context, by, event, {
      adminScope: this.adminScope,
      toolScopes: (tool) => this.registry.get(tool)?.scopes,
    });
  }
}

/** What the host's refusals need to know besides the task: who administers, and the scopes each tool needs. */
export interface HostRules {
  adminScope: string | null;
  toolScopes: (tool: string) => readonly string[] | undefined;
}

/** The task fields the host's refusals read: a live context, or a task's status (`TaskStatus` has them all). */
export type RefusalView = Pick<AgentContext, 'principal' | 'outcome' | 'pendingConfirmation'>;

/**
 * What the host knows and the chart cannot: who the caller is now (tenant, current scopes, who may cancel), and
 * whether the task already ended. One function for the event that arrives and for `Orchestrator.may` (what a page
 * offers), so both give the same answer.
 */
export function hostRefusal(
  task: RefusalView,
  by: Principal,
  event: Pick<HostEvent, 'type'>,
  rules: HostRules,
): { code: ReplyCode; message: string } | null {
  if (by.tenantId !== task.principal.tenantId)
    return { code: 'wrong_tenant', message: 'the task belongs to another tenant' };
  if (task.outcome) return { code: 'task_finished', message: `the task already ended (${task.outcome.status})` };
  const pending = task.pendingConfirmation;
  if (event.type === 'user.confirmed' && pending?.userId === by.userId) {
    // The confirming user must still hold the scopes the tool needs, not only have held them at task start.
    const missing = rules.toolScopes(pending.tool)?.filter((scope) => !by.scopes.includes(scope)) ?? [];
    if (missing.length > 0)
      return { code: 'permission_denied', message: `the confirming session lacks scope ${missing.join(', ')}` };
  }
  if (
    event.type === 'task.cancelled' &&
    by.userId !== task.principal.userId &&
    !(rules.adminScope && by.scopes.includes(rules.adminScope))
  ) {
    return { code: 'wrong_user', message: 'only the task user or an administrator may cancel it' };
  }
  if (event.type === 'operator.retryModel' && !(rules.adminScope && by.scopes.includes(rules.adminScope)))
    return { code: 'operator_only', message: "only an operator of the task's tenant may retry the model early" };
  return null;
}
