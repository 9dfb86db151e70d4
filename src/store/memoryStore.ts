/**
 * An in-process store. Data is kept serialized, as a real store would keep it, so nothing shares references with
 * live actors and a value JSON cannot carry fails here as it would in Redis. Every method runs without awaiting in
 * between, so each one (an erasure included) is atomic.
 */
import { randomBytes } from 'node:crypto';
import {
  AgentError,
  FencedOutError,
  MandateUsedError,
  RevisionConflictError,
  TaskExistsError,
  TaskNotFoundError,
} from '../errors.js';
import { type TaskEnvelope, type TaskSummary, parseEnvelope } from './envelope.js';
import {
  type EraseRequest,
  type Retention,
  type RetentionOptions,
  type RetentionReport,
  type SweepOptions,
  type TaskOwner,
  type Tombstone,
  type UserErasure,
  checkEraseRequest,
  checkOwner,
  checkRetention,
  erasedError,
  isFinished,
  retentionCutoffs,
  retentionRequest,
  sameOwner,
  sweepLimit,
  tombstoneOf,
} from './erasure.js';
import type {
  ErasableTaskStore,
  JournalStream,
  Lease,
  LeaseManager,
  ListQuery,
  MandateClaims,
  SaveRequest,
  TakenTask,
  TaskChanges,
  TenantSlots,
} from './taskStore.js';
import { ChangeListeners } from './changeListeners.js';
import { checkSameOwner, checkSaveRequest, matchesQuery, readsAreOwn } from './storeChecks.js';

/** Options of a MemoryStore. */
export interface MemoryStoreOptions {
  /** Drives lease expiry, and the default `now` of `sweepRetention` (default: the system clock). */
  now?: () => number;
  /** How long finished tasks and tombstones are kept (enforced by `sweepRetention`). Default: forever. */
  retention?: RetentionOptions;
}

interface Row {
  envelope: string;
  revision: number;
  summary: TaskSummary;
  audit: string[];
  transcript: string[];
}

export class MemoryStore implements ErasableTaskStore, MandateClaims {
  readonly kind = 'memory';
  /** Leases with the same semantics as the Redis store, so several orchestrators can share one store in tests. */
  readonly leases: LeaseManager;
  private readonly rows = new Map<string, Row>();
  private readonly quarantine_ = new Map<string, string>();
  private readonly held = new Map<string, { token: string; expiresAt: number }>();
  private readonly fences = new Map<string, number>();
  /** Tombstones of erased tasks, serialized like everything else. */
  private readonly tombstones = new Map<string, { text: string; erasedAt: number }>();
  /** Mandate claims: mandate id -> task id, and each task's mandate id (what its erasure gives back). */
  private readonly claims = new Map<string, string>();
  private readonly claimOf = new Map<string, string>();
  /** Tenant slots: tenant id -> task id -> expiry (`capacity.tenantCap`, within this process). */
  private readonly slots = new Map<string, Map<string, number>>();
  /** Tenants' slots of running tasks, with the same semantics as the Redis store's, for the orchestrators sharing it. */
  readonly tenantSlots: TenantSlots;
  private readonly now: () => number;
  private readonly retention: Retention;
  private readonly listeners = new ChangeListeners();
  /** Word of every save, to the listeners in this process (the orchestrators sharing the store, their live views). */
  readonly changes: TaskChanges = { watch: (taskId, listener) => this.listeners.watch(taskId, listener) };

  /** Options, or (as before) just the `now` function. */
  constructor(options: MemoryStoreOptions | (() => number) = {}) {
    const { now = Date.now, retention } = typeof options === 'function' ? { now: options } : options;
    this.now = now;
    this.retention = checkRetention(retention);
    this.leases = {
      acquire: async (taskId, ttlMs) => this.acquireNow(taskId, ttlMs),
      renew: async (lease, ttlMs) => {
        const current = this.held.get(lease.taskId);
        if (!current || current.token !== lease.token || current.expiresAt <= this.now()) return false;
        current.expiresAt = lease.expiresAt = this.now() + ttlMs;
        return true;
      },
      release: async (lease) => {
        if (this.held.get(lease.taskId)?.token === lease.token) this.held.delete(lease.taskId);
      },
      orphans: async (limit) => {
        const found: string[] = [];
        for (const [taskId, row] of this.rows) {
          if (found.length >= limit) break;
          const lease = this.held.get(taskId);
          const unheld = !(lease && lease.expiresAt > this.now());
          if (row.summary.state === 'running' && unheld && !this.quarantine_.has(taskId)) found.push(taskId);
        }
        return found;
      },
    };
    this.tenantSlots = {
      take: async (tenantId, taskId, ttlMs, cap) => {
        const slots = this.liveSlots(tenantId);
        const held = slots.has(taskId);
        if (!held && cap !== undefined && slots.size >= cap) return null;
        slots.set(taskId, this.now() + ttlMs);
        this.slots.set(tenantId, slots);
        return held ? 'held' : 'taken';
      },
      release: async (tenantId, taskId) => {
        const slots = this.liveSlots(tenantId);
        slots.delete(taskId);
        if (slots.size === 0) this.slots.delete(tenantId);
      },
      count: async (tenantId) => this.liveSlots(tenantId).size,
    };
  }

  /** The tenant's unexpired slots (the expired ones dropped). */
  private liveSlots(tenantId: string): Map<string, number> {
    const slots = this.slots.get(tenantId) ?? new Map<string, number>();
    const now = this.now();
    for (const [taskId, expiresAt] of slots) if (expiresAt <= now) slots.delete(taskId);
    return slots;
  }

  /**
   * The lease, and the task's envelope and quarantine reason as they stand once it is taken. A subclass that
   * overrides `load` or `quarantined` gets the lease alone (`read: null`), so that its own reads are the ones made.
   */
  async acquireAndRead(taskId: string, ttlMs: number): Promise<TakenTask | null> {
    const lease = this.acquireNow(taskId, ttlMs);
    if (!lease) return null;
    if (!readsAreOwn(this, MemoryStore.prototype)) return { lease, read: null };
    const envelope = this.rows.get(taskId)?.envelope;
    const load = () => (envelope === undefined ? null : parseEnvelope(taskId, envelope));
    return { lease, read: { quarantined: this.quarantine_.get(taskId) ?? null, load } };
  }

  private acquireNow(taskId: string, ttlMs: number): Lease | null {
    this.refuseIfErased(taskId);
    const current = this.held.get(taskId);
    if (current && current.expiresAt > this.now()) return null;
    const fence = (this.fences.get(taskId) ?? 0) + 1;
    this.fences.set(taskId, fence);
    const lease: Lease = {
      taskId,
      token: randomBytes(16).toString('hex'),
      fence: String(fence),
      expiresAt: this.now() + ttlMs,
    };
    this.held.set(taskId, { token: lease.token, expiresAt: lease.expiresAt });
    return lease;
  }

  async load(taskId: string): Promise<TaskEnvelope | null> {
    const row = this.rows.get(taskId);
    if (row) return parseEnvelope(taskId, row.envelope);
    this.refuseIfErased(taskId);
    return null;
  }

  async save(request: SaveRequest): Promise<void> {
    const { envelope, expectedRevision } = request;
    checkSaveRequest(request);
    this.refuseIfErased(envelope.taskId);
    this.checkFence(envelope.taskId, request.fence);
    const row = this.rows.get(envelope.taskId);
    if (expectedRevision === 0 && row) throw new TaskExistsError(envelope.taskId);
    if (expectedRevision !== 0 && row?.revision !== expectedRevision) {
      throw new RevisionConflictError(envelope.taskId, expectedRevision, row?.revision ?? null);
    }
    if (row) checkSameOwner(envelope.taskId, row.summary, envelope.summary);
    const audit = row?.audit ?? [];
    const transcript = row?.transcript ?? [];
    const { append } = request;
    if (
      audit.length + append.audit.length !== envelope.journal.audit ||
      transcript.length + append.transcript.length !== envelope.journal.transcript
    ) {
      throw new RevisionConflictError(envelope.taskId, expectedRevision, row?.revision ?? null);
    }
    // Everything that can fail (a value JSON cannot carry) before the first change: a refused save changes nothing.
    const text = serialize(envelope);
    const auditTexts = append.audit.map(serialize);
    const transcriptTexts = append.transcript.map(serialize);
    // The journals grow in place (nothing outside the store holds them): a save costs what it appends, not what is kept.
    for (const entry of auditTexts) audit.push(entry);
    for (const entry of transcriptTexts) transcript.push(entry);
    this.rows.set(envelope.taskId, {
      envelope: text,
      revision: envelope.revision,
      // A copy: the caller's envelope (and what list() hands out) must not alias the stored row.
      summary: { ...envelope.summary },
      audit,
      transcript,
    });
    this.listeners.notify({
      kind: 'saved',
      taskId: envelope.taskId,
      revision: envelope.revision,
      audit: audit.length,
      transcript: transcript.length,
    });
  }

  /** As in Redis: a fence must be the newest; no fence is refused while someone holds the lease. */
  private checkFence(taskId: string, fence: string | undefined): void {
    const current = this.fences.get(taskId) ?? 0;
    if (fence !== undefined && fence !== '') {
      if (Number(fence) !== current) throw new FencedOutError(taskId, `fence ${fence} is stale (current ${current})`);
      return;
    }
    const holder = this.held.get(taskId);
    if (holder && holder.expiresAt > this.now()) {
      throw new FencedOutError(taskId, 'a save without a fence while another process holds the lease');
    }
  }

  async list(query: ListQuery = {}): Promise<TaskSummary[]> {
    const rows = [...this.rows.values()].map((r) => ({ ...r.summary })).filter((s) => matchesQuery(s, query));
    // Ties by code unit, not localeCompare: the order must not depend on the process's locale.
    rows.sort((a, b) => b.updatedAt - a.updatedAt || (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0));
    return rows.slice(0, query.limit ?? rows.length);
  }

  async readJournal(taskId: string, stream: JournalStream, from = 0, to?: number): Promise<unknown[]> {
    const row = this.rows.get(taskId);
    if (!row) return [];
    return row[stream].slice(from, to).map((e) => JSON.parse(e));
  }

  async quarantine(taskId: string, reason: string): Promise<void> {
    this.refuseIfErased(taskId);
    this.quarantine_.set(taskId, reason);
  }

  async quarantined(taskId: string): Promise<string | null> {
    return this.quarantine_.get(taskId) ?? null;
  }

  async close(): Promise<void> {}

  // --- mandate claims -------------------------------------------------------------------------------------

  async claimMandate(mandateId: string, taskId: string): Promise<'claimed' | 'held'> {
    const holder = this.claims.get(mandateId);
    if (holder === taskId) return 'held';
    if (holder !== undefined) throw new MandateUsedError(mandateId, taskId);
    if (this.claimOf.has(taskId)) throw new TaskExistsError(taskId);
    this.claims.set(mandateId, taskId);
    this.claimOf.set(taskId, mandateId);
    return 'claimed';
  }

  async releaseMandate(mandateId: string, taskId: string): Promise<void> {
    this.dropClaim(mandateId, taskId);
  }

  private dropClaim(mandateId: string, taskId: string): void {
    if (this.claims.get(mandateId) !== taskId) return;
    this.claims.delete(mandateId);
    this.claimOf.delete(taskId);
  }

  // --- erasure and retention ------------------------------------------------------------------------------

  async erase(taskId: string, request: EraseRequest): Promise<Tombstone> {
    return this.eraseNow(taskId, checkEraseRequest(`erase of task ${taskId}`, request));
  }

  async eraseUser(owner: TaskOwner, request: EraseRequest): Promise<UserErasure> {
    const checked = checkEraseRequest('eraseUser', request);
    const { tenantId, userId } = checkOwner(owner);
    const ids = [...this.rows].filter(([, row]) => sameOwner(row.summary, { tenantId, userId })).map(([id]) => id);
    return { erased: ids.map((id) => this.eraseNow(id, checked)), unreadable: [] };
  }

  async tombstone(taskId: string): Promise<Tombstone | null> {
    const stored = this.tombstones.get(taskId);
    return stored ? (JSON.parse(stored.text) as Tombstone) : null;
  }

  async sweepRetention(now = this.now(), options?: SweepOptions): Promise<RetentionReport> {
    const limit = sweepLimit(options);
    const { finishedBefore, tombstonesBefore } = retentionCutoffs(this.retention, now);
    const due =
      finishedBefore === null
        ? []
        : [...this.rows.values()]
            .map((row) => row.summary)
            .filter((s) => isFinished(s.state) && s.updatedAt <= finishedBefore)
            .sort((a, b) => a.updatedAt - b.updatedAt);
    const old =
      tombstonesBefore === null
        ? []
        : [...this.tombstones].filter(([, t]) => t.erasedAt <= tombstonesBefore).map(([id]) => id);
    const request = retentionRequest(now);
    const erased = due.slice(0, limit).map((s) => this.eraseNow(s.taskId, request));
    for (const id of old.slice(0, limit)) this.tombstones.delete(id);
    return { erased, tombstonesRemoved: Math.min(old.length, limit), more: due.length > limit || old.length > limit };
  }

  private eraseNow(taskId: string, request: EraseRequest): Tombstone {
    const existing = this.tombstones.get(taskId);
    if (existing) return JSON.parse(existing.text) as Tombstone;
    const row = this.rows.get(taskId);
    const quarantined = this.quarantine_.has(taskId);
    if (!row && !quarantined) throw new TaskNotFoundError(taskId);
    const tombstone = tombstoneOf(taskId, request, {
      snapshot: row !== undefined,
      audit: row?.audit.length ?? 0,
      transcript: row?.transcript.length ?? 0,
      quarantine: quarantined,
    });
    this.rows.delete(taskId);
    this.quarantine_.delete(taskId);
    this.held.delete(taskId);
    this.fences.delete(taskId);
    const mandateId = this.claimOf.get(taskId);
    if (mandateId !== undefined) this.dropClaim(mandateId, taskId);
    this.tombstones.set(taskId, { text: serialize(tombstone), erasedAt: tombstone.erasedAt });
    return tombstone;
  }

  private refuseIfErased(taskId: string): void {
    const stored = this.tombstones.get(taskId);
    if (stored) throw erasedError(JSON.parse(stored.text) as Tombstone);
  }
}

/** JSON text of a value, refusing what JSON cannot carry (as a real store would) instead of storing garbage. */
function serialize(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new AgentError('invalid_save', `a value to save is not JSON: ${(error as Error).message}`);
  }
  if (text === undefined) throw new AgentError('invalid_save', 'a value to save is not JSON (undefined or a function)');
  return text;
}
