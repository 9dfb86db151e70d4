/**
 * The API's side of dispatch: a user event is checked against what is stored (the same refusals as on a live task,
 * so a wrong tenant or a finished task is answered at once), sealed with the task's scope, recorded in the task's
 * inbox and announced by a job; then the caller waits for its reply, which the driving process saves with the
 * snapshot that applied it. A reply that does not come in time is EventPendingError: the event is recorded all the
 * same and will be applied.
 */
import { randomUUID } from 'node:crypto';
import type { AgentContext, AgentInput, Principal } from '../../machines/context.js';
import type { HostEvent } from '../../machines/events.js';
import { initialContext } from '../../machines/steps/turn.js';
import { type Clock, sleep } from '../clock.js';
import { AgentError, EventPendingError, TaskNotFoundError } from '../errors.js';
import type { TaskEnvelope } from '../store/envelope.js';
import type { TaskSummary } from '../store/summary.js';
import type { TaskInbox, TaskStore } from '../store/taskStore.js';
import type { Dispatch } from './dispatch.js';
import type { EventInbox, HostEvents } from './hostEvents.js';
import type { InboxRecord } from './taskDriver.js';
import { type TaskStatus, type UserEventResult, statusFrom } from './status.js';

export interface InboxEventsDeps {
  store: TaskStore;
  inbox: TaskInbox;
  events: HostEvents;
  dispatch: Dispatch;
  /** Real time, for the waits (the task clock may be a test's). */
  clock: Clock;
  /** How long a caller waits for its event's reply. */
  replyTimeoutMs: number;
  /** How many unapplied events a task's inbox may hold. */
  inboxLimit: number;
}

/** Polling intervals while waiting for a reply or for a task to settle (ms), the last one repeated. */
const POLL_MS = [2, 5, 10, 20, 40, 80, 150, 250];

export class InboxEvents implements EventInbox {
  constructor(private readonly deps: InboxEventsDeps) {}

  async submit(taskId: string, by: Principal, event: HostEvent): Promise<UserEventResult> {
    const { store, inbox, events, dispatch } = this.deps;
    const { context, status } = await this.current(taskId);
    const refusal = events.refusal(context, by, event);
    if (refusal) return { accepted: false, ...refusal, status };
    const eventId = `evt_${randomUUID()}`;
    const record: InboxRecord = { eventId, by, event: events.sealed(context, event) };
    const seq = await inbox.append(taskId, record, this.deps.inboxLimit);
    try {
      await dispatch.enqueue({ kind: 'event', taskId, seq });
    } catch {
      // Recorded, but not announced: the sweep of inboxes with old unapplied events announces it (expiry sweep,
      // recover()). It will be applied; the caller hears that, not a failure.
      throw new EventPendingError(taskId, eventId, seq, 0);
    }
    return this.reply(taskId, eventId, seq, store);
  }

  /** What is stored of the task, or what its start job holds while no worker has created it yet. */
  async current(taskId: string): Promise<{ context: AgentContext; status: TaskStatus }> {
    const envelope = await this.deps.store.load(taskId);
    if (envelope)
      return { context: envelope.snapshot.context, status: statusFrom(envelope.snapshot.context, envelope.summary) };
    const input = await this.deps.dispatch.pendingStart(taskId);
    if (input) return queued(input);
    const failure = await this.deps.dispatch.startFailure(taskId);
    if (failure !== null)
      throw new AgentError(
        'start_failed',
        `the start of task ${JSON.stringify(taskId)} failed for good (${failure}); recover() queues it again`,
      );
    throw new TaskNotFoundError(taskId);
  }

  /** Resolves with the stored task once it is at rest (waiting for someone, or ended) and its inbox applied. */
  async settled(taskId: string, timeoutMs: number): Promise<TaskStatus> {
    const deadline = this.deps.clock.now() + timeoutMs;
    for (let i = 0; ; i++) {
      const envelope = await this.deps.store.load(taskId);
      // At rest, with no event recorded that it has not applied yet (an event whose reply the caller did not wait for),
      // and still so after that second read: an event applied between the two reads moved the revision.
      if (
        envelope &&
        envelope.summary.state !== 'running' &&
        (await this.deps.inbox.after(taskId, envelope.inbox?.applied ?? 0)).length === 0
      ) {
        const again = await this.deps.store.load(taskId);
        if (again && again.revision === envelope.revision) return statusFrom(again.snapshot.context, again.summary);
        continue;
      }
      if (!envelope && !(await this.deps.dispatch.pendingStart(taskId))) {
        // Neither stored nor queued: a start job that a worker is creating right now, or no such task.
        if (i > 0 && i % 20 === 0) throw new TaskNotFoundError(taskId);
      }
      if (this.deps.clock.now() >= deadline) {
        throw new AgentError(
          'settle_timeout',
          `task ${JSON.stringify(taskId)} did not come to rest within ${timeoutMs} ms; is a worker running (orchestrator.createWorker)?`,
        );
      }
      await sleep(this.deps.clock, POLL_MS[Math.min(i, POLL_MS.length - 1)]!);
    }
  }

  private async reply(taskId: string, eventId: string, seq: number, store: TaskStore): Promise<UserEventResult> {
    const started = this.deps.clock.now();
    for (let i = 0; ; i++) {
      const envelope: TaskEnvelope | null = await store.load(taskId);
      // Not created yet (its start is queued, the event waits in its inbox), or gone (erased: load throws).
      if (!envelope && !(await this.deps.dispatch.pendingStart(taskId))) throw new TaskNotFoundError(taskId);
      if (envelope && (envelope.inbox?.applied ?? 0) >= seq) {
        const status = statusFrom(envelope.snapshot.context, envelope.summary);
        const reply = envelope.inbox?.replies.find((r) => r.eventId === eventId);
        if (!reply)
          return {
            accepted: false,
            code: null,
            message: `event ${eventId} was applied, but its reply is no longer kept; read the task's audit`,
            status,
          };
        return {
          accepted: reply.accepted,
          code: reply.code as UserEventResult['code'],
          message: reply.message,
          status,
        };
      }
      const waited = this.deps.clock.now() - started;
      if (waited >= this.deps.replyTimeoutMs) throw new EventPendingError(taskId, eventId, seq, waited);
      await sleep(this.deps.clock, POLL_MS[Math.min(i, POLL_MS.length - 1)]!);
    }
  }
}

/** The status of a task whose start job waits for a worker: its initial context, at revision 0. */
export function queued(input: AgentInput): { context: AgentContext; status: TaskStatus } {
  const context = initialContext(input);
  const summary: TaskSummary = {
    taskId: input.taskId,
    state: 'running',
    stateValue: 'queued',
    userId: input.principal.userId,
    tenantId: input.principal.tenantId,
    revision: 0,
    createdAt: input.startedAt,
    updatedAt: input.startedAt,
    wakeAt: null,
    outcomeCode: null,
  };
  return { context, status: statusFrom(context, summary) };
}
