/**
 * A TaskStore on plain Redis 7 or a Redis Cluster, for several processes sharing tasks. The tasks are spread over a
 * fixed number of buckets (`buckets`, default 1); a task's keys and its bucket's indexes share one hash tag, so
 * every save and erasure stays one atomic script in one slot (`redisBucket.ts`), while the buckets land on every
 * master of a cluster. The number of buckets is recorded under the prefix and refused if a store is opened with
 * another. `list`, the retention sweep, `eraseUser`, `indexOwners` and `deleteAll` fan out over the buckets, and
 * their scans cover every master. Keys: `redisKeys.ts`; the layout record: `redisLayout.ts`.
 */
import type { Cluster, Redis } from 'ioredis';
import { type Clock, systemClock } from '../../clock.js';
import type { TaskEnvelope } from '../envelope.js';
import {
  type EraseRequest,
  type RetentionOptions,
  type RetentionReport,
  type SweepOptions,
  type TaskOwner,
  type Tombstone,
  type UserErasure,
  checkRetention,
  sweepLimit,
} from '../erasure.js';
import type { TaskSummary } from '../summary.js';
import { RedisBucket } from './redisBucket.js';
import {
  DEFAULT_REDIS_URL,
  type RedisClientBounds,
  createRedisClient,
  describeRedis,
  redisCall,
} from './redisConnection.js';
import type { OwnerIndexReport, RetentionDue } from './redisErasure.js';
import { RedisLayout, bucketOf, checkBuckets } from './redisLayout.js';
import { redisBucketKeys, redisKeys } from './redisKeys.js';
import { deleteMatching, scanKeys } from './redisScans.js';
import { globEscape } from './redisErasure.js';
import type { RedisCall } from './redisConnection.js';
import { defineStoreScripts } from './redisScripts.js';
import { type LiveMessageTimings, RedisLiveMessages } from './redisLiveMessages.js';
import { RedisTaskChanges } from './redisTaskChanges.js';
import { RedisTenantSlots } from './redisTenantSlots.js';
import { SavedTexts } from './redisEnvelopeText.js';
import { SaveArgCache } from './redisSaveArgs.js';
import { readsAreOwn } from '../storeChecks.js';
import type {
  ErasableTaskStore,
  InboxEntry,
  JournalStream,
  Lease,
  LeaseManager,
  ListQuery,
  MandateClaims,
  SaveRequest,
  TakenTask,
  TaskChanges,
  TaskInbox,
  TenantSlots,
} from '../taskStore.js';

/** How a RedisStore connects; the bounds apply only to a client the store creates itself. */
export interface RedisStoreOptions extends RedisClientBounds {
  /**
   * A client to use: a `Redis`, or an ioredis `Cluster` (then give `buckets`, so that tasks spread over its masters).
   * The store registers its scripts on it and leaves it open on `close()`. Create it with `enableAutoPipelining: true`
   * (as the store's own client is) so that the saves of many tasks issued in the same tick go to Redis as one write.
   */
  client?: Redis | Cluster;
  /** Where to connect when no client is given. Default: `REDIS_URL`, else redis://127.0.0.1:6379. */
  url?: string;
  /** Key prefix, part of every key's hash tag. Default "agent". */
  prefix?: string;
  /**
   * How many buckets the tasks are spread over (1 to 1024; default 1, the layout of earlier versions: one `{prefix}`
   * hash tag). On a Redis Cluster use a few per master (16 for 3 masters): each bucket is one slot. Recorded under
   * the prefix: a store opened with another number on the same data is refused (`store_layout_mismatch`).
   */
  buckets?: number;
  /** The store's idea of now, for lease expiries and the default `now` of `sweepRetention`. Default: the system clock. */
  clock?: Clock;
  /** How long finished tasks and tombstones are kept (enforced by `sweepRetention`). Default: forever. */
  retention?: RetentionOptions;
  /**
   * Send a task's envelope as edits of the one this store saved last, not whole: about 3.5 KB a read round instead of
   * 7 KB, for a Redis across a slow or metered link. Off by default: computing and splicing the edits cost more CPU
   * than the bytes they save on a local network (the bench's K=200 x 50 cell: ~60 µs more main-thread CPU a round,
   * 595 against 654 µs, and fewer rounds a second). What Redis keeps is the same either way.
   */
  envelopeEdits?: boolean;
  /** Timings of the live model text across processes (`redisLiveMessages.ts`). Defaults: 15 s marks, 1 s checks. */
  liveMessages?: LiveMessageTimings;
}

/**
 * TaskStore and LeaseManager on Redis 7 (no modules). Every failure to reach Redis is a StoreUnavailableError;
 * a task whose keys hold unreadable data is a CorruptTaskError and leaves the other tasks readable.
 *
 * Data loss: each bucket has an epoch marker (`{prefix}:epoch`, or `{prefix{<n>}:epoch` per bucket), which the store
 * learns on its first call. Once it has, a save (a create included), a lease acquisition or renewal, the
 * reservation of a dispatched task's id (so a dispatched `start()`), a `load` and a `list` are refused with
 * StoreDataLostError when the marker is gone (Redis restarted without persistence, was
 * flushed, a master failed over to an empty replica) or holds another epoch (the data set was replaced), so a task
 * whose records vanished is not silently created again. An orchestrator's `recover()`, `status()` and `resume()`
 * then throw it too. A new store (a new process) works on what it finds; `acceptDataLoss()` makes this one do the
 * same.
 *
 * @example
 * const store = new RedisStore({ url: process.env.REDIS_URL, prefix: 'agent' });
 * const lease = await store.leases.acquire(taskId, 30_000);
 * // On a Redis Cluster: const store = new RedisStore({ client: new Cluster(nodes), prefix: 'agent', buckets: 16 });
 */
export class RedisStore implements ErasableTaskStore, MandateClaims {
  readonly kind = 'redis';
  readonly leases: LeaseManager;
  /** Tasks' inboxes, for dispatch across processes (`statechart-agent/bullmq`). */
  readonly inbox: TaskInbox;
  /** Tenants' slots of running tasks, counted for every process on the prefix (`capacity.tenantCap`). */
  readonly tenantSlots: TenantSlots;
  /** Word of every save of a watched task, by any process (pub/sub, published by the save script). */
  readonly changes: TaskChanges;
  /** The live model text of tasks driven in another process, while someone here watches (pub/sub, never stored). */
  readonly liveMessages: RedisLiveMessages;
  /** How many buckets the tasks are spread over. */
  readonly buckets: number;
  private readonly client: Redis;
  private readonly ownsClient: boolean;
  private readonly clock: Clock;
  private readonly parts: RedisBucket[];
  private readonly layout: RedisLayout;
  private readonly prefix: string;
  private readonly call: RedisCall;
  private readonly liveChanges: RedisTaskChanges;
  private closed = false;

  constructor(options: RedisStoreOptions = {}) {
    const prefix = options.prefix ?? 'agent';
    this.buckets = checkBuckets(options.buckets);
    // Checked here, so that a bad prefix fails at construction.
    const root = redisKeys(prefix);
    const retention = checkRetention(options.retention);
    this.ownsClient = options.client === undefined;
    // A Cluster takes the same commands as a Redis; only scans and messages need to know (`redisConnection.ts`).
    const client = (options.client ??
      createRedisClient(options.url ?? process.env.REDIS_URL ?? DEFAULT_REDIS_URL, options)) as Redis;
    const scripts = defineStoreScripts(client);
    this.client = client;
    const where = describeRedis(client);
    this.clock = options.clock ?? systemClock;
    const call = redisCall(where, () => this.closed);
    this.call = call;
    this.prefix = prefix;
    const keysOf = Array.from({ length: this.buckets }, (_, i) => redisBucketKeys(prefix, i, this.buckets));
    const claimKeys = (mandateId: string) => keysOf[this.buckets === 1 ? 0 : bucketOf(mandateId, this.buckets)]!;
    // The texts of the last saves, for the next ones' edits (`redisEnvelopeText.ts`): one cache for the store, of at
    // most 1,024 tasks and 16 MiB whatever the number of buckets (a task is in one bucket); none without edits (every
    // save whole), which still keeps the state each task was last seen in.
    const texts = options.envelopeEdits === true ? new SavedTexts() : new SavedTexts(0, 0);
    // The keys of the last saved tasks as bytes, for their next saves (`redisSaveArgs.ts`): one for the store too.
    const args = new SaveArgCache();
    this.parts = keysOf.map(
      (keys) =>
        new RedisBucket(client, scripts, keys, prefix, where, this.clock, call, retention, claimKeys, texts, args),
    );
    this.layout = new RedisLayout(
      client,
      root,
      this.parts.map((part) => part.keys),
      prefix,
      this.buckets,
      call,
    );
    // Every call checks the layout first (once per store; afterwards a resolved promise).
    const ready = () => this.layout.checked();
    const bucket = async (taskId: string) => (await ready(), this.bucket(taskId));
    this.tenantSlots = new RedisTenantSlots(scripts, root, call, ready);
    this.liveChanges = new RedisTaskChanges(client, (taskId) => this.bucket(taskId).keys.live(taskId));
    this.changes = this.liveChanges;
    // Under the prefix's own tag, whatever the bucket count: a mark is no task data (the layout check looks for that).
    this.liveMessages = new RedisLiveMessages(
      client,
      this.liveChanges,
      { channel: (taskId) => root.text(taskId), mark: (taskId) => root.textWatched(taskId) },
      options.liveMessages,
    );
    this.leases = {
      acquire: async (taskId, ttlMs) => (await bucket(taskId)).leases.acquire(taskId, ttlMs),
      renew: async (lease: Lease, ttlMs) => (await bucket(lease.taskId)).leases.renew(lease, ttlMs),
      release: async (lease: Lease) => (await bucket(lease.taskId)).leases.release(lease),
      orphans: async (limit) => {
        await ready();
        const found = await Promise.all(this.parts.map((part) => part.orphans(limit)));
        return found.flat().slice(0, limit);
      },
    };
    this.inbox = {
      append: async (taskId, data, maxUnapplied) => (await bucket(taskId)).inbox.append(taskId, data, maxUnapplied),
      after: async (taskId, seq): Promise<InboxEntry[]> => (await bucket(taskId)).inbox.after(taskId, seq),
      trim: async (taskId, seq) => (await bucket(taskId)).inbox.trim(taskId, seq),
      reserve: async (taskId, undo) => (await bucket(taskId)).inbox.reserve(taskId, undo),
      forget: async (taskId) => (await bucket(taskId)).inbox.forget(taskId),
      pending: async (before, limit) => {
        await ready();
        // Oldest first across the buckets.
        const found = (await Promise.all(this.parts.map((part) => part.inbox.pendingScored(before, limit)))).flat();
        return found
          .sort((a, b) => a.score - b.score)
          .slice(0, limit)
          .map((entry) => entry.id);
      },
    };
  }

  /** Also StoreDataLostError, when this store had learned an epoch and its data set is gone or replaced. */
  async load(taskId: string): Promise<TaskEnvelope | null> {
    await this.layout.checked();
    return this.bucket(taskId).load(taskId);
  }

  /** Also StoreDataLostError, when this store had learned an epoch and its data set is gone or replaced. */
  async save(request: SaveRequest): Promise<void> {
    await this.layout.checked();
    return this.bucket(request.envelope.taskId).save(request);
  }

  /** Also StoreDataLostError, when this store had learned an epoch and its data set is gone or replaced. */
  async list(query: ListQuery = {}): Promise<TaskSummary[]> {
    const limit = query.limit ?? Number.POSITIVE_INFINITY;
    if (limit <= 0) return [];
    await this.layout.checked();
    if (this.parts.length === 1) return this.parts[0]!.list(query);
    const lists = await Promise.all(this.parts.map((part) => part.list(query)));
    // Each bucket's list is ordered as the store's is; the merge keeps that order and the limit.
    const merged = lists.flat().sort(byUpdated);
    return merged.slice(0, limit);
  }

  async readJournal(taskId: string, stream: JournalStream, from = 0, to?: number): Promise<unknown[]> {
    await this.layout.checked();
    return this.bucket(taskId).readJournal(taskId, stream, from, to);
  }

  async quarantine(taskId: string, reason: string): Promise<void> {
    await this.layout.checked();
    return this.bucket(taskId).quarantine(taskId, reason);
  }

  async quarantined(taskId: string): Promise<string | null> {
    await this.layout.checked();
    return this.bucket(taskId).quarantined(taskId);
  }

  /**
   * One script: the lease, and the task's envelope and quarantine reason as they stand once it is taken. A subclass
   * that overrides `load` or `quarantined` gets the lease alone (`read: null`), so that its own reads are the ones made.
   */
  async acquireAndRead(taskId: string, ttlMs: number): Promise<TakenTask | null> {
    await this.layout.checked();
    const leases = this.bucket(taskId).leases;
    if (readsAreOwn(this, RedisStore.prototype)) return leases.acquireAndRead(taskId, ttlMs);
    const lease = await leases.acquire(taskId, ttlMs);
    return lease && { lease, read: null };
  }

  /** `redisClaims.ts`: the claim in the bucket of the mandate id, the task's pointer to it in the task's. */
  async claimMandate(mandateId: string, taskId: string): Promise<'claimed' | 'held'> {
    await this.layout.checked();
    return this.bucket(taskId).claims.claim(mandateId, taskId);
  }

  async releaseMandate(mandateId: string, taskId: string): Promise<void> {
    await this.layout.checked();
    return this.bucket(taskId).claims.release(mandateId, taskId);
  }

  async erase(taskId: string, request: EraseRequest): Promise<Tombstone> {
    await this.layout.checked();
    return this.bucket(taskId).erase(taskId, request);
  }

  /** Finds the user's tasks by the owner index of every bucket; tasks saved before it existed need `indexOwners()` first. */
  async eraseUser(owner: TaskOwner, request: EraseRequest): Promise<UserErasure> {
    await this.layout.checked();
    const reports = await Promise.all(this.parts.map((part) => part.eraseUser(owner, request)));
    return { erased: reports.flatMap((r) => r.erased), unreadable: reports.flatMap((r) => r.unreadable) };
  }

  async tombstone(taskId: string): Promise<Tombstone | null> {
    await this.layout.checked();
    return this.bucket(taskId).tombstone(taskId);
  }

  /** Sweeps every bucket: the oldest `limit` finished tasks (and tombstones) due across them all. */
  async sweepRetention(now = this.clock.now(), options?: SweepOptions): Promise<RetentionReport> {
    const limit = sweepLimit(options);
    await this.layout.checked();
    const dues = await Promise.all(this.parts.map((part) => part.retentionDue(now, limit)));
    const report: RetentionReport = { erased: [], tombstonesRemoved: 0, more: false };
    const oldest = (pick: (due: RetentionDue) => { id: string; score: number }[]) =>
      dues
        .flatMap((due, i) => pick(due).map((entry) => ({ ...entry, part: this.parts[i]!, due })))
        .sort((a, b) => a.score - b.score || (a.id < b.id ? -1 : 1));
    const finished = oldest((due) => due.finished);
    report.more = finished.length > limit;
    for (const { id, part, due } of finished.slice(0, limit)) {
      const tombstone = await part.eraseDue(id, now, due.finishedBefore!);
      if (tombstone) report.erased.push(tombstone);
    }
    const tombstones = oldest((due) => due.tombstones);
    report.more ||= tombstones.length > limit;
    for (const { id, part, due } of tombstones.slice(0, limit))
      if (await part.forgetDue(id, due.tombstonesBefore!)) report.tombstonesRemoved += 1;
    return report;
  }

  /**
   * The migration for data saved before owner indexes existed (before 0.4): adds every such task to its owner's
   * index, so that `eraseUser` and `list({ owner })` find it. Idempotent and safe while other processes run; run it
   * once after every process runs this version (until then, saves by older processes do not index their tasks).
   */
  async indexOwners(): Promise<OwnerIndexReport> {
    await this.layout.checked();
    const report: OwnerIndexReport = { scanned: 0, indexed: 0, unreadable: [] };
    // One pass over each master: every bucket's task hashes at once.
    const single = this.parts.length === 1;
    const pattern = single
      ? `${globEscape(this.parts[0]!.keys.task(''))}*`
      : `${globEscape(`{${this.prefix}{`)}*}:task:*`;
    const bucketOfKey = new RegExp(`^\\{${this.prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\{(\\d+)\\}:task:`);
    await scanKeys(this.client, pattern, this.call, async (_node, keys) => {
      for (const key of keys) {
        const part = single ? this.parts[0] : this.parts[Number(bucketOfKey.exec(key)?.[1] ?? -1)];
        if (part) await part.indexOwnerKey(key, report);
      }
    });
    return report;
  }

  /**
   * Accepts that the data set under the prefix was lost or replaced, after a StoreDataLostError: the store adopts
   * the epoch marker found now in each bucket, or creates one where there is none, and works again on the data set
   * as it is (as a new process would). Nothing lost comes back: a task that vanished is not found, and an update of
   * it is a revision conflict. Stop the tasks this process was driving first (a live task stops by itself on its
   * refused save). Returns the epoch now in effect (with several buckets, theirs, joined by ",").
   *
   * @example
   * try { await orchestrator.recover(); } catch (error) {
   *   if (!(error instanceof StoreDataLostError)) throw error;
   *   alert(error.message); // once someone decided to carry on:
   *   await store.acceptDataLoss();
   * }
   */
  async acceptDataLoss(): Promise<string> {
    // The layout record may have gone with the data set: this store's number is recorded again (refused if another
    // store recorded a different one since), as the operator accepts the data set as it is now.
    await this.layout.adopt();
    const epochs: string[] = [];
    for (const part of this.parts) epochs.push(await part.acceptDataLoss());
    return epochs.join(',');
  }

  /**
   * Deletes every key under this store's prefix (SCAN + UNLINK, on every master of a cluster), the layout record
   * included, and returns how many. For demos and tests that reuse a prefix; never FLUSHALL a shared server. The
   * epoch markers go too: this store starts afresh, other stores on the prefix report the data set as lost.
   */
  async deleteAll(): Promise<number> {
    // Only the data this store was opened for: a store with another number of buckets is refused first.
    await this.layout.checked();
    // One pass over each master: `{prefix}:*` (one bucket, and the layout record), or every bucket's `{prefix{*`.
    let deleted = await deleteMatching(this.client, `${globEscape(`{${this.prefix}}`)}:*`, this.call);
    if (this.parts.length > 1)
      deleted += await deleteMatching(this.client, `${globEscape(`{${this.prefix}{`)}*`, this.call);
    for (const part of this.parts) part.forgetEpoch();
    this.layout.reset();
    return deleted;
  }

  /** Closes the client the store created; an injected client stays open. Later calls fail as unavailable. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // The subscriber is the store's own, whoever owns the client.
    this.liveMessages.close();
    this.liveChanges.close();
    if (!this.ownsClient) return;
    if (this.client.status === 'ready') await this.client.quit().catch(() => this.client.disconnect());
    else this.client.disconnect();
  }

  private bucket(taskId: string): RedisBucket {
    return this.parts.length === 1 ? this.parts[0]! : this.parts[bucketOf(taskId, this.parts.length)]!;
  }
}

/** The store's order: most recently updated first, ties by id. */
function byUpdated(a: TaskSummary, b: TaskSummary): number {
  return b.updatedAt - a.updatedAt || (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0);
}
