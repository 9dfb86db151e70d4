/**
 * A TaskStore on plain Redis 7, for several processes sharing tasks. A save is one Lua script: check the data
 * set's epoch, fence, revision and journal lengths, then write the envelope, append the journal entries and update
 * the indexes, all or nothing. Its cost does not depend on how long the task's journals are. An erasure is one
 * script too (`redisErasure.ts`). Keys: `redisKeys.ts`; scripts: `lua/*.lua`; data loss: `redisEpoch.ts`; leases,
 * `list`, `readJournal`, `deleteAll`: `redisLeases.ts`, `redisListing.ts`, `redisJournal.ts`, `redisDeleteAll.ts`;
 * the client and its errors: `redisConnection.ts`.
 */
import { packAudit } from './redisAuditPacking.js';
import type { Redis } from 'ioredis';
import { type Clock, systemClock } from '../../clock.js';
import { CorruptTaskError } from '../../errors.js';
import { type TaskEnvelope, parseEnvelope } from '../envelope.js';
import {
  type EraseRequest,
  type RetentionOptions,
  type RetentionReport,
  type SweepOptions,
  type TaskOwner,
  type Tombstone,
  type UserErasure,
  checkRetention,
  erasedError,
} from '../erasure.js';
import { TASK_STATES, type TaskSummary } from '../summary.js';
import {
  DEFAULT_REDIS_URL,
  type RedisCall,
  type RedisClientBounds,
  createRedisClient,
  describeRedis,
  redisCall,
} from './redisConnection.js';
import { deleteAll } from './redisDeleteAll.js';
import { type RedisKeys, TASK_FIELDS, redisKeys, stateIndexKeys } from './redisKeys.js';
import { RedisEpoch } from './redisEpoch.js';
import { type OwnerIndexReport, RedisErasure } from './redisErasure.js';
import { RedisInbox } from './redisInbox.js';
import { RedisJournal } from './redisJournal.js';
import { RedisLeaseManager } from './redisLeases.js';
import { RedisListing } from './redisListing.js';
import { type StoreScripts, defineStoreScripts, scriptError } from './redisScripts.js';
import { checkSaveRequest } from '../storeChecks.js';
import type { ErasableTaskStore, JournalStream, LeaseManager, ListQuery, SaveRequest, TaskInbox } from '../taskStore.js';

/** How a RedisStore connects; the bounds apply only to a client the store creates itself. */
export interface RedisStoreOptions extends RedisClientBounds {
  /** A client to use; the store registers its scripts on it and leaves it open on `close()`. */
  client?: Redis;
  /** Where to connect when no client is given. Default: `REDIS_URL`, else redis://127.0.0.1:6379. */
  url?: string;
  /** Key prefix, used as the `{prefix}` hash tag of every key. Default "agent". */
  prefix?: string;
  /** The store's idea of now, for lease expiries and the default `now` of `sweepRetention`. Default: the system clock. */
  clock?: Clock;
  /** How long finished tasks and tombstones are kept (enforced by `sweepRetention`). Default: forever. */
  retention?: RetentionOptions;
}

/**
 * TaskStore and LeaseManager on Redis 7 (no modules). Every failure to reach Redis is a StoreUnavailableError;
 * a task whose keys hold unreadable data is a CorruptTaskError and leaves the other tasks readable.
 *
 * Data loss: the store learns the epoch marker of its data set (`{prefix}:epoch`) on its first call. Once it has,
 * a save (a create included), a lease acquisition or renewal, a `load` and a `list` are refused with
 * StoreDataLostError when the marker is gone (Redis restarted without persistence, was flushed, failed over to an
 * empty replica) or holds another epoch (the data set was replaced), so a task whose records vanished is not
 * silently created again. An orchestrator's `recover()`, `status()` and `resume()` then throw it too. A new store
 * (a new process) works on what it finds; `acceptDataLoss()` makes this one do the same.
 *
 * @example
 * const store = new RedisStore({ url: process.env.REDIS_URL, prefix: 'agent' });
 * const lease = await store.leases.acquire(taskId, 30_000);
 */
export class RedisStore implements ErasableTaskStore {
  readonly kind = 'redis';
  readonly leases: LeaseManager;
  /** Tasks' inboxes, for dispatch across processes (`statechart-agent/bullmq`). */
  readonly inbox: TaskInbox;
  private readonly client: Redis & StoreScripts;
  private readonly ownsClient: boolean;
  private readonly keys: RedisKeys;
  private readonly stateKeys: string[];
  private readonly where: string;
  private readonly clock: Clock;
  private readonly erasure: RedisErasure;
  private readonly epoch: RedisEpoch;
  private readonly listing: RedisListing;
  private readonly journal: RedisJournal;
  /** Runs one Redis call; any failure becomes a store error (see `redisCall`). */
  private readonly call: RedisCall;
  private closed = false;

  constructor(options: RedisStoreOptions = {}) {
    this.keys = redisKeys(options.prefix ?? 'agent');
    this.stateKeys = stateIndexKeys(this.keys);
    const retention = checkRetention(options.retention);
    this.ownsClient = options.client === undefined;
    const client = options.client ?? createRedisClient(options.url ?? process.env.REDIS_URL ?? DEFAULT_REDIS_URL, options);
    this.client = defineStoreScripts(client);
    this.where = describeRedis(client);
    this.clock = options.clock ?? systemClock;
    this.call = redisCall(this.where, () => this.closed);
    this.epoch = new RedisEpoch(this.client, this.keys, options.prefix ?? 'agent', this.where, this.clock, this.call);
    this.leases = new RedisLeaseManager(this.client, this.keys, this.clock, this.call, this.epoch);
    this.erasure = new RedisErasure(this.client, this.keys, retention, this.call);
    this.listing = new RedisListing(this.client, this.keys, this.call);
    this.journal = new RedisJournal(this.client, this.keys, this.call);
    this.inbox = new RedisInbox(this.client, this.keys, this.call);
  }

  /** Also StoreDataLostError, when this store had learned an epoch and its data set is gone or replaced. */
  load(taskId: string): Promise<TaskEnvelope | null> {
    return this.epoch.checked(`load of task ${taskId}`, () => this.loadTask(taskId));
  }

  private async loadTask(taskId: string): Promise<TaskEnvelope | null> {
    const key = this.keys.task(taskId);
    const [envelope, revision] = await this.call(
      `load of task ${taskId}`,
      () => this.client.hmget(key, TASK_FIELDS.envelope, TASK_FIELDS.revision),
      { taskId, key },
    );
    if (envelope === null || envelope === undefined) {
      if (revision !== null && revision !== undefined) {
        throw new CorruptTaskError(taskId, `Redis key ${key} has a revision but no envelope`);
      }
      // Only a miss pays for the second read.
      const tombstone = await this.erasure.tombstone(taskId);
      if (tombstone) throw erasedError(tombstone);
      return null;
    }
    const parsed = parseEnvelope(taskId, envelope);
    if (String(parsed.revision) !== revision) {
      throw new CorruptTaskError(taskId, `the envelope is at revision ${parsed.revision} but ${key} records ${revision}`);
    }
    return parsed;
  }

  /** Also StoreDataLostError, when this store had learned an epoch and its data set is gone or replaced. */
  async save(request: SaveRequest): Promise<void> {
    checkSaveRequest(request);
    const { envelope, expectedRevision, append, fence } = request;
    const { taskId, summary } = envelope;
    const keys = [
      this.keys.task(taskId),
      this.keys.audit(taskId),
      this.keys.transcript(taskId),
      this.keys.fence(taskId),
      this.keys.lease(taskId),
      this.keys.updated,
      this.keys.wake,
      this.keys.tombstone(taskId),
      this.keys.user(summary),
      this.keys.epoch,
      ...this.stateKeys,
    ];
    const epoch = this.epoch.args();
    const args = [
      taskId,
      expectedRevision,
      envelope.revision,
      fence ?? '',
      JSON.stringify(envelope),
      JSON.stringify(summary),
      summary.state,
      summary.updatedAt,
      summary.wakeAt ?? '',
      envelope.journal.audit - append.audit.length,
      envelope.journal.transcript - append.transcript.length,
      append.audit.length,
      append.transcript.length,
      packAudit(append.audit),
      epoch.expected,
      epoch.candidate,
      ...TASK_STATES,
      ...append.transcript.map(entryJson),
    ];
    const action = `save of task ${taskId}`;
    const [code, detail, found] = await this.call(action, () => this.client.taskStoreSave(...keys, ...args), { taskId, key: keys[0]! });
    if (code < 0) throw scriptError(code, detail, { taskId, expectedRevision, fence, epoch: this.epoch.context(epoch, action) });
    this.epoch.learn(found);
  }

  /** Also StoreDataLostError, when this store had learned an epoch and its data set is gone or replaced. */
  async list(query: ListQuery = {}): Promise<TaskSummary[]> {
    const limit = query.limit ?? Number.POSITIVE_INFINITY;
    if (limit <= 0) return [];
    return this.epoch.checked('listing of tasks', () => this.listing.list(query, limit));
  }

  readJournal(taskId: string, stream: JournalStream, from = 0, to?: number): Promise<unknown[]> {
    return this.journal.read(taskId, stream, from, to);
  }

  async quarantine(taskId: string, reason: string): Promise<void> {
    const [code, detail] = await this.call(`quarantine of task ${taskId}`, () =>
      this.client.taskStoreQuarantine(this.keys.quarantine, this.keys.tombstone(taskId), taskId, reason),
    );
    if (code < 0) throw scriptError(code, detail, { taskId });
  }

  async quarantined(taskId: string): Promise<string | null> {
    return this.call(`quarantine lookup of task ${taskId}`, () => this.client.hget(this.keys.quarantine, taskId));
  }

  erase(taskId: string, request: EraseRequest): Promise<Tombstone> {
    return this.erasure.erase(taskId, request);
  }

  /** Finds the user's tasks by the owner index; tasks saved before it existed need `indexOwners()` first. */
  eraseUser(owner: TaskOwner, request: EraseRequest): Promise<UserErasure> {
    return this.erasure.eraseUser(owner, request);
  }

  tombstone(taskId: string): Promise<Tombstone | null> {
    return this.erasure.tombstone(taskId);
  }

  sweepRetention(now = this.clock.now(), options?: SweepOptions): Promise<RetentionReport> {
    return this.erasure.sweepRetention(now, options);
  }

  /**
   * The migration for data saved before owner indexes existed (before 0.4): adds every such task to its owner's
   * index, so that `eraseUser` and `list({ owner })` find it. Idempotent and safe while other processes run; run it
   * once after every process runs this version (until then, saves by older processes do not index their tasks).
   */
  indexOwners(): Promise<OwnerIndexReport> {
    return this.erasure.indexOwners();
  }

  /**
   * Accepts that the data set under the prefix was lost or replaced, after a StoreDataLostError: the store adopts
   * the epoch marker found now, or creates one if there is none, and works again on the data set as it is (as a new
   * process would). Nothing lost comes back: a task that vanished is not found, and an update of it is a revision
   * conflict. Stop the tasks this process was driving first (a live task stops by itself on its refused save).
   * Returns the epoch now in effect.
   *
   * @example
   * try { await orchestrator.recover(); } catch (error) {
   *   if (!(error instanceof StoreDataLostError)) throw error;
   *   alert(error.message); // once someone decided to carry on:
   *   await store.acceptDataLoss();
   * }
   */
  acceptDataLoss(): Promise<string> {
    return this.epoch.accept();
  }

  /**
   * Deletes every key under this store's prefix (SCAN + UNLINK), and returns how many. For demos and tests that
   * reuse a prefix; never FLUSHALL a shared server. The epoch marker goes too: this store starts afresh, other
   * stores on the prefix report the data set as lost.
   */
  async deleteAll(): Promise<number> {
    const deleted = await deleteAll(this.client, this.keys, this.call);
    this.epoch.forget();
    return deleted;
  }

  /** Closes the client the store created; an injected client stays open. Later calls fail as unavailable. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (!this.ownsClient) return;
    if (this.client.status === 'ready') await this.client.quit().catch(() => this.client.disconnect());
    else this.client.disconnect();
  }
}

function entryJson(entry: unknown): string {
  return JSON.stringify(entry) ?? 'null';
}
