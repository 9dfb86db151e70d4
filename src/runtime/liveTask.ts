/**
 * One task driven in this process: its actor, and the persistence loop that saves every new snapshot with the
 * journal entries it emitted, in order, by compare-and-set.
 *
 * Invariants:
 * - A save happens when something needs it, not after every step: when a barrier asks (before a write's side
 *   effect, before a model turn that spends budget, after a host event), and when the task comes to rest (it waits
 *   for someone, or ended). A read round's bookkeeping rides with the save before the next model turn, so a round
 *   costs one save. What is lost to a crash in between is only work that is safe to do again (reads, checks).
 * - Saves are serialized; each goes from the last saved revision to the next. Snapshots that arrive while a save
 *   is in flight are coalesced into the next save (the journal entries are all kept).
 * - `barrier()` resolves only when the snapshot current at the call is durable. Side effects wait on it, so a
 *   write's intent is always persisted before the write can start.
 * - A save that cannot succeed (lost lease, revision conflict, store down past the retry bound) stops the actor:
 *   no further side effect starts from a state that is not durable.
 */
import { type Actor, type InspectionEvent, type SnapshotFrom, createActor } from 'xstate';
import type { AgentEvent } from '../../machines/events.js';
import type { AgentContext, AgentInput } from '../../machines/context.js';
import type { AuditEntry, HostReply, TranscriptEntry } from '../../machines/journal.js';
import type { AgentMachine } from '../../machines/agentMachine.js';
import type { Clock } from '../clock.js';
import { AgentError, MachineError } from '../errors.js';
import { safeErrorText } from '../../machines/lib/text.js';
import { INBOX_REPLIES_KEPT, type InboxCursor, type InboxReply, type TaskEnvelope } from '../store/envelope.js';
import { type TaskSummary, summarize } from '../store/summary.js';
import { taskStateOf } from '../../machines/tags.js';
import type { TaskStore } from '../store/taskStore.js';
import type { TaskPort } from './actorHost.js';
import { PersistedSnapshots, envelopeOf, saveWithRetry } from './taskSaves.js';
import { DurableWaiters } from './durableWaiters.js';
import { TaskTranscript } from './taskTranscript.js';
import { MoveRecorder } from './moveRecorder.js';
import { decidesAtOnce } from './restore.js';
import { type MachineRoute, routeClock, withRoute } from './machineRoute.js';

export interface LiveTaskDeps {
  store: TaskStore;
  machine: AgentMachine;
  clock: Clock;
  random: () => number;
  inspect?: (event: InspectionEvent) => void;
  /** Transient store failures are retried this many times with backoff before the task stops here. */
  saveRetries: number;
  /** Fencing token to present with every save, when leases are in use. */
  fence?: () => string | undefined;
  /** What a save listener threw (it never stops the task). */
  onListenerError?: (error: unknown) => void;
  /** What an inspection observer of the host's threw (it never stops the task either), first throw per task. */
  onObserverError?: (taskId: string, error: unknown) => void;
  /**
   * The orchestrator's toolkit and actors, when `machine` is the process's shared one (`sharedMachine.ts`): set around
   * every run of the actor this task starts.
   */
  route?: MachineRoute;
}

/** What one save made durable: its audit entries, and the summary saved before it. */
export interface SavedBatch {
  audit: readonly AuditEntry[];
  previous: TaskSummary | null;
}

export type LiveTaskOrigin = { kind: 'new'; input: AgentInput } | { kind: 'restored'; envelope: TaskEnvelope };

export class LiveTask implements TaskPort {
  readonly taskId: string;
  readonly actor: Actor<AgentMachine>;
  restoring = false;
  private readonly restoringOrigin: boolean;

  private revision: number;
  private journal: { audit: number; transcript: number };
  private readonly createdAt: number;
  private pendingAudit: AuditEntry[] = [];
  private readonly transcriptEntries: TaskTranscript;
  /** Gives the snapshots to save (`PersistedSnapshots`). */
  private readonly persistedSnapshots: PersistedSnapshots;
  /** Writes the transitions the actor takes into its audit entries. */
  private readonly moves: MoveRecorder;
  /** The chart's answer to the host event being sent, if it gave one. */
  private reply: HostReply | null = null;
  /** The last snapshot seen: XState notifies subscribers also when an event changed nothing. */
  private lastSnapshot: unknown = null;
  private observed = 0;
  private persisted = 0;
  private saving = false;
  private readonly waiters = new DurableWaiters();
  private failure: Error | null = null;
  private savedSummary: TaskSummary | null = null;
  /** With dispatch: how far the task's inbox is applied in the current snapshot (saved with it). */
  private inbox: InboxCursor | null = null;
  private readonly listeners = new Set<(summary: TaskSummary, saved: SavedBatch) => void>();
  private readonly failureListeners = new Set<(error: Error) => void>();

  constructor(
    private readonly deps: LiveTaskDeps,
    origin: LiveTaskOrigin,
  ) {
    this.moves = new MoveRecorder(deps.machine);
    this.persistedSnapshots = new PersistedSnapshots(deps.machine);
    let observerThrew = false;
    const onThrow = (error: unknown) => {
      if (observerThrew) return;
      observerThrew = true;
      deps.onObserverError?.(this.taskId, error);
    };
    const inspect = this.moves.observer(deps.inspect, onThrow);
    const clock = deps.route ? { clock: routeClock(deps.route) } : {};
    if (origin.kind === 'new') {
      this.taskId = origin.input.taskId;
      this.revision = 0;
      this.journal = { audit: 0, transcript: 0 };
      this.createdAt = origin.input.startedAt;
      // A new task's first state is decided while the actor is made (its gates read the route's toolkit).
      this.actor = withRoute(deps.route, () => createActor(deps.machine, { input: origin.input, inspect, ...clock }));
    } else {
      const { envelope } = origin;
      this.taskId = envelope.taskId;
      this.revision = envelope.revision;
      this.journal = { ...envelope.journal };
      this.createdAt = envelope.createdAt;
      this.savedSummary = envelope.summary;
      this.inbox = envelope.inbox ? { applied: envelope.inbox.applied, replies: [...envelope.inbox.replies] } : null;
      // No input: a restored actor takes its context from the snapshot.
      this.actor = withRoute(deps.route, () =>
        createActor(deps.machine, { snapshot: envelope.snapshot, inspect, ...clock } as never),
      ) as Actor<AgentMachine>;
    }
    // From here the recorder reads the actor's events without XState's copy of each for its observers.
    this.moves.attach(this.actor, deps.inspect !== undefined, onThrow);
    // Read when a model turn first asks, then kept: a task whose model never reads its history keeps none of it.
    this.transcriptEntries = new TaskTranscript(
      () => this.journal.transcript,
      (length) => deps.store.readJournal(this.taskId, 'transcript', 0, length) as Promise<TranscriptEntry[]>,
    );
    this.actor.on('audit', (event) => {
      this.moves.emitted();
      this.pendingAudit.push(event.entry);
    });
    this.actor.on('transcript', (event) => this.transcriptEntries.emitted(event.entry));
    this.actor.on('reply', (event) => {
      this.reply = event.reply;
    });
    this.actor.subscribe({
      next: () => this.onSnapshot(),
      error: (error) => this.fail(new MachineError(this.taskId, safeErrorText(error), { cause: error })),
    });
    this.restoringOrigin = origin.kind === 'restored';
  }

  /** Starts the actor; a restored one re-runs its in-flight invocations with `restoring` set. */
  start(): void {
    this.restoring = this.restoringOrigin;
    try {
      withRoute(this.deps.route, () => this.actor.start());
    } finally {
      this.restoring = false;
    }
    // XState does not take eventless transitions on restore: a task restored into a state that decides at once
    // (only a migration places one there) is given an event no state takes, after which they are taken.
    if (this.restoringOrigin && decidesAtOnce(this.deps.machine, this.actor.getSnapshot().value))
      withRoute(this.deps.route, () => this.actor.send({ type: 'task.restored', at: this.deps.clock.now() }));
    // A restored actor reports the snapshot it was restored from: the store already holds it, so it is not saved
    // again (a reload to read a task or to refuse an event leaves the revision alone).
    if (this.restoringOrigin && this.pendingAudit.length === 0 && this.transcriptEntries.pendingCount === 0) {
      this.persisted = this.observed;
    }
  }

  // --- TaskPort -------------------------------------------------------------------------------------------

  context(): AgentContext {
    return this.actor.getSnapshot().context;
  }

  async barrier(): Promise<void> {
    // Let the running macrostep finish so the snapshot it produces is counted.
    await Promise.resolve();
    if (this.failure) throw this.failure;
    const version = this.observed;
    if (this.persisted >= version) return;
    const durable = this.waiters.untilDurable(version);
    this.scheduleSave();
    return durable;
  }

  /** The committed transcript (read from the store once, then kept), then what no save has committed yet. */
  transcript(): Promise<TranscriptEntry[]> {
    return this.transcriptEntries.all();
  }

  // --- host API -------------------------------------------------------------------------------------------

  /** Sends a host event and returns the chart's answer to it (null if the chart gave none). */
  send(event: AgentEvent): HostReply | null {
    if (this.failure) throw this.failure;
    this.reply = null;
    try {
      withRoute(this.deps.route, () => this.actor.send(event));
      return this.reply;
    } finally {
      this.reply = null;
    }
  }

  /** The last inbox event applied to this task (0: none). */
  inboxApplied(): number {
    return this.inbox?.applied ?? 0;
  }

  /**
   * Records that the inbox event `reply.seq` was applied (or refused) with this reply. It is saved with the snapshot
   * the event produced (the next barrier saves even if the event changed nothing), so an event is applied exactly
   * once: a crash before that save loses the event's effect and its cursor together, and the event is applied again.
   */
  recordInbox(reply: InboxReply): void {
    if (this.failure) throw this.failure;
    const replies = [...(this.inbox?.replies ?? []), reply].slice(-INBOX_REPLIES_KEPT);
    this.inbox = { applied: reply.seq, replies };
    this.observed += 1;
  }

  /** Resolves when the persisted state is a waiting or final one. */
  settled(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.isSettled()) return Promise.resolve();
    return this.waiters.untilSettled();
  }

  /** Persisted, and nothing left to do without an outside event. */
  isSettled(): boolean {
    return this.persisted === this.observed && this.savedSummary !== null && this.savedSummary.state !== 'running';
  }

  get failed(): Error | null {
    return this.failure;
  }

  get summary(): TaskSummary | null {
    return this.savedSummary;
  }

  /** Called once when the task stops being driven here (stopped, fenced out, store failed). */
  onFailure(listener: (error: Error) => void): void {
    this.failureListeners.add(listener);
  }

  /** Called after every successful save; a listener that throws is reported, and the task goes on. */
  onSaved(listener: (summary: TaskSummary, saved: SavedBatch) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Stops driving the task here without saving anything more: what is durable stays as it was, and a later
   * resume continues from there (reconciling a write that was in flight).
   */
  stop(): void {
    this.fail(new AgentError('task_stopped', `task ${this.taskId} was stopped in this process`));
  }

  // --- persistence ----------------------------------------------------------------------------------------

  private onSnapshot(): void {
    const snapshot = this.actor.getSnapshot();
    // An event no state took leaves the very same snapshot and emits nothing: there is nothing to save.
    if (snapshot === this.lastSnapshot && this.pendingAudit.length === 0 && this.transcriptEntries.pendingCount === 0)
      return;
    this.lastSnapshot = snapshot;
    this.observed += 1;
    // At rest (waiting for someone, or ended): saved now. While it runs, the next barrier saves it.
    if (taskStateOf(snapshot.tags, snapshot.context.outcome?.status ?? null) !== 'running') this.scheduleSave();
  }

  /** Starts the save loop unless it runs; the snapshots of one synchronous burst are coalesced into one save. */
  private scheduleSave(): void {
    if (this.saving || this.failure || this.persisted >= this.observed) return;
    this.saving = true;
    queueMicrotask(() => void this.saveLoop());
  }

  private async saveLoop(): Promise<void> {
    try {
      while (this.persisted < this.observed && !this.failure) {
        const version = this.observed;
        const snapshot = this.persistedSnapshots.of(this.actor.getSnapshot());
        // A stopped actor's snapshot has lost its in-flight invocations: never persist it.
        if (snapshot.status === 'stopped') break;
        const audit = this.pendingAudit;
        const taken = this.transcriptEntries.take();
        const transcript = taken.entries;
        this.pendingAudit = [];
        this.moves.taken(audit);
        const journal = {
          audit: this.journal.audit + audit.length,
          transcript: this.journal.transcript + transcript.length,
        };
        const revision = this.revision + 1;
        const now = this.deps.clock.now();
        const summary = summarize(snapshot, this.actor.getSnapshot().tags, {
          revision,
          createdAt: this.createdAt,
          updatedAt: now,
        });
        const envelope = envelopeOf({
          taskId: this.taskId,
          revision,
          createdAt: this.createdAt,
          updatedAt: now,
          summary,
          journal,
          snapshot,
          inbox: this.inbox,
        });
        try {
          await saveWithRetry(
            this.deps,
            { envelope, expectedRevision: revision - 1, append: { audit, transcript }, fence: this.deps.fence?.() },
            () => this.failure,
          );
        } catch (error) {
          taken.settle(false);
          throw error;
        }
        this.revision = revision;
        this.journal = journal;
        taken.settle(true);
        this.persisted = version;
        const previous = this.savedSummary;
        this.savedSummary = summary;
        this.waiters.durableUpTo(version, this.isSettled());
        for (const listener of this.listeners) {
          try {
            listener(summary, { audit: audit as AuditEntry[], previous });
          } catch (error) {
            this.deps.onListenerError?.(error);
          }
        }
      }
    } catch (error) {
      this.fail(error instanceof Error ? error : new Error(String(error)));
    } finally {
      this.saving = false;
      // What arrived during the last save: saved if someone waits for it, or if the task came to rest meanwhile.
      if (this.persisted < this.observed && (this.waiters.waiting || this.atRest())) this.scheduleSave();
    }
  }

  private atRest(): boolean {
    const snapshot = this.actor.getSnapshot();
    return taskStateOf(snapshot.tags, snapshot.context.outcome?.status ?? null) !== 'running';
  }

  /** Stops driving this task here: rejects every waiter, stops the actor (aborting in-flight work). */
  fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    this.waiters.rejectAll(error);
    try {
      withRoute(this.deps.route, () => this.actor.stop());
    } catch {
      // already stopped
    }
    for (const listener of this.failureListeners) listener(error);
  }

  /** The current (possibly not yet saved) snapshot, for status views. */
  currentSnapshot(): SnapshotFrom<AgentMachine> {
    return this.actor.getSnapshot();
  }
}
