/**
 * What every orchestrator holds and how it ends: the parts `assemble.ts` builds, the journals' reads, closing and
 * draining, erasure and retention. `Orchestrator` (orchestrator.ts) adds the calls on tasks and their user events.
 */
import type { ModelReservation, Policy, Provenance } from '../../machines/context.js';
import type { TranscriptEntry } from '../../machines/journal.js';
import { safeErrorText } from '../../machines/lib/text.js';
import { AgentError } from '../errors.js';
import type { ToolRegistry } from '../runtime/toolRegistry.js';
import type { RetentionReport, TaskOwner, Tombstone } from '../store/erasure.js';
import type { TaskSummary } from '../store/summary.js';
import { type TaskStore, isErasable } from '../store/taskStore.js';
import { assembleOrchestrator } from './assemble.js';
import type { Capacity } from './capacity.js';
import type { Dispatch } from './dispatch.js';
import type { EraseTaskRequest, UserErasureReport } from './erasure.js';
import type { ExpirySweeper } from './expirySweeper.js';
import type { HostEvents } from './hostEvents.js';
import type { LiveTasks } from './liveTasks.js';
import type { OrchestratorOptions, Settings } from './options.js';
import type { OrphanSweeper } from './orphanSweeper.js';
import type { Records } from './records.js';
import type { Subtasks } from './subtasks.js';
import type { RetentionSweepOptions } from './retentionSweeper.js';
import { type AuditRecord } from './status.js';
import type { TaskMode } from './taskMode.js';
import { ModelTextBus } from '../runtime/modelText.js';
import { auditRecords, transcriptEntries } from './journalReads.js';

export abstract class OrchestratorBase {
  /** Where this orchestrator's tasks persist. */
  readonly store: TaskStore;
  /** The host policy every new task is started with. */
  readonly policy: Policy;
  protected readonly settings: Settings;
  protected readonly registry: ToolRegistry;
  protected readonly live: LiveTasks;
  protected readonly events: HostEvents;
  protected readonly sweeper: ExpirySweeper;
  protected readonly orphans: OrphanSweeper | null;
  protected readonly savedListeners = new Set<(summary: TaskSummary) => void>();
  protected readonly modelText = new ModelTextBus();
  protected readonly ownsStore: boolean;
  protected readonly reservation: ModelReservation;
  protected readonly provenance: Provenance;
  protected closed = false;
  protected readonly capacity: Capacity;
  /** Local or dispatched, chosen once in `assemble.ts`: what the calls that differ between the two do. */
  protected readonly mode: TaskMode;
  protected readonly records: Records;
  protected readonly subtasks: Subtasks;
  protected readonly recoveries: { resumed: number; quarantined: number };
  /** The queue, for `queueStats()` (null: tasks run here). */
  protected readonly dispatch: Dispatch | null;

  constructor(options: OrchestratorOptions) {
    const parts = assembleOrchestrator(options, this.savedListeners, () => this.closed, this.modelText);
    this.dispatch = options.dispatch ?? null;
    ({
      settings: this.settings,
      reservation: this.reservation,
      provenance: this.provenance,
      policy: this.policy,
      registry: this.registry,
      store: this.store,
      ownsStore: this.ownsStore,
      live: this.live,
      capacity: this.capacity,
      events: this.events,
      mode: this.mode,
      sweeper: this.sweeper,
      orphans: this.orphans,
      records: this.records,
      subtasks: this.subtasks,
      recoveries: this.recoveries,
    } = parts);
    // With a store shared by several processes (Redis), text written by a worker reaches the viewers here, and back.
    this.modelText.connect(this.store.liveMessages);
    if (this.settings.retentionSweepMs > 0 && isErasable(this.store)) {
      this.startRetentionSweep({
        everyMs: this.settings.retentionSweepMs,
        onError: (error) => parts.logger.warn({ err: safeErrorText(error) }, 'the retention sweep failed'),
      });
    }
  }

  // --- journal --------------------------------------------------------------------------------------------

  /**
   * Every decision of the task, in order; with `from`, only the durable ones from that position on (each record
   * keeps its `seq`), so a follower that saw `seq` N reads on from N + 1.
   */
  async audit(taskId: string, from = 0): Promise<AuditRecord[]> {
    return auditRecords(this.live, this.store, taskId, from);
  }

  /** What the model was shown, in order. */
  async transcript(taskId: string): Promise<TranscriptEntry[]> {
    return transcriptEntries(this.live, this.store, taskId);
  }

  /** Stops driving tasks in this process. In-flight work is abandoned; resume reconciles it. */
  async close(): Promise<void> {
    this.closed = true;
    this.sweeper.stop();
    this.orphans?.stop();
    this.records.stop();
    // Workers stop taking jobs first; the jobs in hand end when their tasks stop below (and go back to the queue).
    const workers = this.mode.stopTaking();
    await this.live.close();
    await workers;
    if (this.ownsStore) await this.store.close();
  }

  /**
   * Stops taking new tasks (`start` throws `orchestrator_draining`), waits up to `timeoutMs` (default 30 s) for the
   * tasks running here to come to rest, then closes: tasks still running stop where they were last saved and their
   * leases are released, so another process (its `recover()`) carries them on. Events for existing tasks are taken
   * until the close.
   */
  async drain(options: { timeoutMs?: number } = {}): Promise<{ handedBack: string[] }> {
    this.assertOpen();
    this.capacity.drain();
    await this.mode.pause();
    const handedBack = await this.live.quiesce(options.timeoutMs ?? 30_000);
    await this.close();
    return { handedBack };
  }

  protected now(): number {
    this.assertOpen();
    return this.settings.clock.now();
  }

  protected assertOpen(): void {
    if (this.closed) throw new AgentError('orchestrator_closed', 'this orchestrator was closed');
  }

  // --- erasure and retention (`records.ts`) -------------------------------------------------------------------

  /**
   * Erases a task: its envelope, both journals, its index entries, quarantine marker and lease go, and a minimal
   * tombstone stays (when, why, who asked, how much; nothing about the person). Afterwards every read and write of
   * the id (`status`, `audit`, the user events, `resume`, `start` with that id) throws TaskErasedError. Refuses a
   * task running in this process (TaskRunningError) unless `cancelRunning` (cancelled, reconciled, then erased),
   * and one another process drives (TaskBusyError). Idempotent: an erased task gives its first tombstone.
   *
   * @example
   * const tombstone = await orchestrator.erase(taskId, { reason: 'gdpr_erasure', by: request.ticketId });
   */
  async erase(taskId: string, request: EraseTaskRequest): Promise<Tombstone> {
    this.assertOpen();
    return this.records.erase(taskId, request);
  }

  /**
   * Erases every task of one user of one tenant, each as `erase` does; tasks it must leave (running, driven
   * elsewhere) are listed in `skipped` for a retry. On Redis, tasks saved by a version before owner indexes are
   * found only after `RedisStore.indexOwners()`.
   */
  async eraseUser(owner: TaskOwner, request: EraseTaskRequest): Promise<UserErasureReport> {
    this.assertOpen();
    return this.records.eraseUser(owner, request);
  }

  /** The tombstone of an erased task, or null (also on a store that cannot erase). */
  async tombstone(taskId: string): Promise<Tombstone | null> {
    return this.records.tombstone(taskId);
  }

  /**
   * Applies the store's retention periods now (see the store's `retention` option): finished tasks past theirs are
   * erased (tombstones with reason "retention"), tombstones past theirs removed. Nothing without retention options.
   */
  async sweepRetention(): Promise<RetentionReport> {
    this.assertOpen();
    return this.records.sweepRetention();
  }

  /**
   * Runs `sweepRetention` every `everyMs` (default 1 h; 0: never) until `close()` or the returned stop function.
   * Starting it again replaces the running one. Safe in several processes at once: each erasure is atomic.
   */
  startRetentionSweep(options: RetentionSweepOptions = {}): () => void {
    this.assertOpen();
    return this.records.startRetentionSweep(options);
  }
}
