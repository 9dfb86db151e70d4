/**
 * An in-process store. Data is kept serialized, as a real store would keep it, so nothing shares references with
 * live actors and a value JSON cannot carry fails here as it would in Redis.
 */
import { randomBytes } from 'node:crypto';
import { AgentError, FencedOutError, RevisionConflictError, TaskExistsError } from '../errors.js';
import { type TaskEnvelope, type TaskSummary, parseEnvelope } from './envelope.js';
import type { JournalStream, Lease, LeaseManager, ListQuery, SaveRequest, TaskStore } from './taskStore.js';
import { checkSaveRequest, matchesQuery } from './storeChecks.js';

interface Row {
  envelope: string;
  revision: number;
  summary: TaskSummary;
  audit: string[];
  transcript: string[];
}

export class MemoryStore implements TaskStore {
  readonly kind = 'memory';
  /** Leases with the same semantics as the Redis store, so several orchestrators can share one store in tests. */
  readonly leases: LeaseManager;
  private readonly rows = new Map<string, Row>();
  private readonly quarantine_ = new Map<string, string>();
  private readonly held = new Map<string, { token: string; expiresAt: number }>();
  private readonly fences = new Map<string, number>();

  /** `now` drives lease expiry (default: the system clock). */
  constructor(private readonly now: () => number = Date.now) {
    this.leases = {
      acquire: async (taskId, ttlMs) => {
        const current = this.held.get(taskId);
        if (current && current.expiresAt > this.now()) return null;
        const fence = (this.fences.get(taskId) ?? 0) + 1;
        this.fences.set(taskId, fence);
        const lease: Lease = { taskId, token: randomBytes(16).toString('hex'), fence: String(fence), expiresAt: this.now() + ttlMs };
        this.held.set(taskId, { token: lease.token, expiresAt: lease.expiresAt });
        return lease;
      },
      renew: async (lease, ttlMs) => {
        const current = this.held.get(lease.taskId);
        if (!current || current.token !== lease.token || current.expiresAt <= this.now()) return false;
        current.expiresAt = lease.expiresAt = this.now() + ttlMs;
        return true;
      },
      release: async (lease) => {
        if (this.held.get(lease.taskId)?.token === lease.token) this.held.delete(lease.taskId);
      },
    };
  }

  async load(taskId: string): Promise<TaskEnvelope | null> {
    const row = this.rows.get(taskId);
    return row ? parseEnvelope(taskId, row.envelope) : null;
  }

  async save(request: SaveRequest): Promise<void> {
    const { envelope, expectedRevision } = request;
    checkSaveRequest(request);
    this.checkFence(envelope.taskId, request.fence);
    const row = this.rows.get(envelope.taskId);
    if (expectedRevision === 0 && row) throw new TaskExistsError(envelope.taskId);
    if (expectedRevision !== 0 && row?.revision !== expectedRevision) {
      throw new RevisionConflictError(envelope.taskId, expectedRevision, row?.revision ?? null);
    }
    const audit = [...(row?.audit ?? []), ...request.append.audit.map(serialize)];
    const transcript = [...(row?.transcript ?? []), ...request.append.transcript.map(serialize)];
    if (audit.length !== envelope.journal.audit || transcript.length !== envelope.journal.transcript) {
      throw new RevisionConflictError(envelope.taskId, expectedRevision, row?.revision ?? null);
    }
    this.rows.set(envelope.taskId, {
      envelope: serialize(envelope),
      revision: envelope.revision,
      // A copy: the caller's envelope (and what list() hands out) must not alias the stored row.
      summary: { ...envelope.summary },
      audit,
      transcript,
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
    this.quarantine_.set(taskId, reason);
  }

  async quarantined(taskId: string): Promise<string | null> {
    return this.quarantine_.get(taskId) ?? null;
  }

  async close(): Promise<void> {}
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
