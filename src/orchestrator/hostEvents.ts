/**
 * Host events and their authorization. A user event reaches a task only through here: the caller's session is
 * checked for what the chart cannot know (tenant, whether the task already ended, current scopes, who may
 * cancel), then the event is sent and the chart's own answer is returned with the task's new status.
 */
import { type Principal, jsonSchema } from '../../machines/context.js';
import { HOST_EVENT_TYPES, type HostEvent, hostEventSchema } from '../../machines/events.js';
import type { ReplyCode } from '../../machines/failures.js';
import { HostRequestError } from '../errors.js';
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

export class HostEvents {
  constructor(
    private readonly live: LiveTasks,
    private readonly registry: ToolRegistry,
    private readonly adminScope: string | null,
    private readonly policyVersion: string,
  ) {}

  /** A decision on the pending confirmation, with the deciding session's scopes (approvers need theirs). */
  confirm(taskId: string, by: Principal, confirmation: { id: string; argsHash: string }, at: number): Promise<UserEventResult> {
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

  reject(taskId: string, by: Principal, confirmation: { id: string; reason?: string }, at: number): Promise<UserEventResult> {
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

  /** Checks the event and the caller, loads the task if needed, and delivers the event. */
  async deliver(taskId: string, by: Principal, hostEvent: HostEvent): Promise<UserEventResult> {
    parseOrThrow(principalSchema, by, 'principal');
    // The caller's session goes into the audit of whatever the event decides.
    const event: HostEvent = by.sessionId !== undefined && !hostEvent.type.startsWith('timer.') ? ({ ...hostEvent, sessionId: by.sessionId } as HostEvent) : hostEvent;
    if (!HOST_EVENT_TYPES.includes(event.type)) throw new HostRequestError('invalid_event', `event ${event.type} is not allowed`);
    parseOrThrow(hostEventSchema, event, event.type);
    return this.live.exclusive(taskId, async () => {
      const task = await this.live.hydrate(taskId);
      try {
        return await this.send(task, by, event);
      } finally {
        // Loaded only for this event (refused, or leaving it waiting/finished): do not keep it in memory.
        this.live.releaseIfSettled(task);
      }
    });
  }

  private async send(task: LiveTask, by: Principal, event: HostEvent): Promise<UserEventResult> {
    const refusal = this.refusal(task, by, event);
    if (refusal) return { accepted: false, ...refusal, status: statusOfLive(task) };
    const reply = task.send(this.sealed(task, event)) ?? { accepted: false, code: null, message: `the task did not take ${event.type}` };
    await task.barrier();
    return { ...reply, status: statusOfLive(task) };
  }

  /** The event with the sensitive values in its text (and a reviewer's result) sealed, before the task records it. */
  private sealed(task: LiveTask, event: HostEvent): HostEvent {
    const { privacy } = this.registry;
    const scope = scopeOf(task.context());
    switch (event.type) {
      case 'user.answered':
        return { ...event, text: privacy.text(scope, event.text) };
      case 'user.rejected':
        return event.reason === null ? event : { ...event, reason: privacy.text(scope, event.reason) };
      case 'task.cancelled':
        return { ...event, reason: privacy.text(scope, event.reason) };
      case 'review.resolved': {
        const tool = this.registry.get(task.context().review?.tool ?? '');
        const note = event.note === null ? null : privacy.text(scope, event.note);
        const result = event.result === null ? null : privacy.json(scope, event.result, tool?.sensitive?.output ?? []);
        return { ...event, note, result };
      }
      default:
        return event;
    }
  }

  /** What the host knows and the chart cannot: who the caller is now. */
  private refusal(task: LiveTask, by: Principal, event: HostEvent): { code: ReplyCode; message: string } | null {
    const context = task.context();
    if (by.tenantId !== context.principal.tenantId) return { code: 'wrong_tenant', message: 'the task belongs to another tenant' };
    if (context.outcome) return { code: 'task_finished', message: `the task already ended (${context.outcome.status})` };
    const pending = context.pendingConfirmation;
    if (event.type === 'user.confirmed' && pending?.userId === by.userId) {
      // The confirming user must still hold the scopes the tool needs, not only have held them at task start.
      const missing = this.registry.get(pending.tool)?.scopes.filter((scope) => !by.scopes.includes(scope)) ?? [];
      if (missing.length > 0) return { code: 'permission_denied', message: `the confirming session lacks scope ${missing.join(', ')}` };
    }
    if (event.type === 'task.cancelled' && by.userId !== context.principal.userId && !(this.adminScope && by.scopes.includes(this.adminScope))) {
      return { code: 'wrong_user', message: 'only the task user or an administrator may cancel it' };
    }
    return null;
  }
}
