/**
 * One bucket of a RedisStore: the tasks whose ids hash to it, with their journals, leases and inboxes, and the
 * indexes of those tasks, all under one hash tag (one slot of a Redis Cluster), so that a save is one atomic Lua
 * script: check the bucket's epoch, fence, revision and journal lengths, then write the envelope, append the
 * journal entries and update the indexes, all or nothing. Its cost does not depend on how long the task's journals
 * are. An erasure is one script too (`redisErasure.ts`). Keys: `redisKeys.ts`; scripts: `lua/*.lua`; data loss:
 * `redisEpoch.ts`; leases, `list`, `readJournal`, inboxes: `redisLeases.ts`, `redisListing.ts`, `redisJournal.ts`,
 * `redisInbox.ts`. The store (`redisStore.ts`) routes each task to its bucket.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { packAudit } from './redisAuditPacking.js';
import type { Clock } from '../../clock.js';
import type { TaskEnvelope } from '../envelope.js';
import { CorruptTaskError } from '../../errors.js';
import {
  type EraseRequest,
  type Retention,
  type TaskOwner,
  type Tombstone,
  type UserErasure,
  erasedError,
} from '../erasure.js';
import { TASK_STATES, type TaskState, type TaskSummary } from '../summary.js';
import type { RedisCall } from './redisConnection.js';
import { type RedisKeys, TASK_FIELDS } from './redisKeys.js';
import { BucketArgs, SaveArgCache } from './redisSaveArgs.js';
import { RedisClaims } from './redisClaims.js';
import { RedisEpoch } from './redisEpoch.js';
import { type OwnerIndexReport, RedisErasure, type RetentionDue } from './redisErasure.js';
import { RedisInbox } from './redisInbox.js';
import { RedisJournal } from './redisJournal.js';
import { RedisLeaseManager } from './redisLeases.js';
import { RedisListing } from './redisListing.js';
import { envelopeOfHash } from './redisTaskHash.js';
import { SAVE_KEY_COUNT, type ScriptReply, type StoreScripts, scriptError } from './redisScripts.js';
import { SavedTexts, encodedEnvelope, envelopeEdits } from './redisEnvelopeText.js';
import { checkSaveRequest } from '../storeChecks.js';
import type { JournalStream, ListQuery, SaveRequest } from '../taskStore.js';

const STATE_SET = new Set<string>(TASK_STATES);

export class RedisBucket {
  readonly leases: RedisLeaseManager;
  readonly inbox: RedisInbox;
  /** Mandate claims of this bucket's tasks (a claim itself lives in the bucket its mandate id hashes to). */
  readonly claims: RedisClaims;
  /** The text of each task's last save here, for the next one's edits. */
  private readonly texts: SavedTexts;
  /** This store's id in the `etag` of the tasks it saves (`lua/save.lua`). */
  private readonly writer = randomBytes(9).toString('base64url');
  private readonly erasure: RedisErasure;
  private readonly epoch: RedisEpoch;
  private readonly listing: RedisListing;
  private readonly journal: RedisJournal;
  /** The keys of this bucket every save names, as bytes. */
  private readonly shared: BucketArgs;

  constructor(
    private readonly client: Redis,
    private readonly scripts: StoreScripts,
    /** This bucket's keys (all under one hash tag, so one slot of a cluster). */
    readonly keys: RedisKeys,
    /** The store's prefix, for messages. */
    prefix: string,
    where: string | (() => string),
    clock: Clock,
    private readonly call: RedisCall,
    retention: Retention,
    /** The keys of the bucket a mandate id hashes to (where its claim lives). */
    claimKeys: (mandateId: string) => RedisKeys,
    /** The texts of the store's last saves (one for the store, bounded for the whole of it). */
    texts: SavedTexts = new SavedTexts(),
    /** The keys of the store's last saved tasks, as bytes (one for the store, as `texts`). */
    private readonly args: SaveArgCache = new SaveArgCache(),
  ) {
    this.texts = texts;
    this.shared = new BucketArgs(keys);
    this.epoch = new RedisEpoch(client, keys, prefix, where, clock, call);
    this.leases = new RedisLeaseManager(scripts, keys, clock, call, this.epoch, (taskId, state) =>
      this.texts.seen(taskId, state),
    );
    this.claims = new RedisClaims(client, scripts, keys, claimKeys, call);
    this.erasure = new RedisErasure(client, scripts, keys, retention, call, this.claims);
    this.listing = new RedisListing(client, keys, call);
    this.journal = new RedisJournal(scripts, keys, call);
    this.inbox = new RedisInbox(client, scripts, keys, call, clock, this.epoch);
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
    const found = envelopeOfHash(taskId, key, envelope, revision);
    if (found) {
      this.texts.seen(taskId, found.summary.state);
      return found;
    }
    // Only a miss pays for the second read.
    const tombstone = await this.erasure.tombstone(taskId);
    if (tombstone) throw erasedError(tombstone);
    return null;
  }

  /**
   * Also StoreDataLostError, when this store had learned an epoch and its data set is gone or replaced. The envelope
   * goes as edits of the one this store saved last for the task when it can (`redisEnvelopeText.ts`); a script that
   * finds another stored, or the task in another state than the one guessed, refuses before writing anything and the
   * save is sent again with what it found (the whole envelope, that state's index).
   */
  async save(request: SaveRequest): Promise<void> {
    checkSaveRequest(request);
    const { envelope, expectedRevision, append, fence } = request;
    const { taskId, summary } = envelope;
    const action = `save of task ${taskId}`;
    if (!STATE_SET.has(summary.state)) throw scriptError(-8, summary.state, { taskId });
    const base = this.texts.at(taskId, expectedRevision);
    // Without a text to make edits of, the envelope goes whole: encoded once, its byte length that of the encoding.
    const { text, encoded } = encodedEnvelope(envelope, base === null);
    let edits = base && envelopeEdits(base, text);
    let left = this.texts.state(taskId) ?? summary.state;
    const epoch = this.epoch.args();
    // The script's keys then arguments (`lua/save.lua`), in one list, the keys as bytes kept from the task's last
    // save (`redisSaveArgs.ts`); an attempt sets the three it changes.
    const task = this.args.of(this.keys, taskId, this.keys.user(summary));
    const shared = this.shared;
    const taskKey = task.taskKey;
    const argv: (string | Buffer)[] = [
      task.task,
      task.audit,
      task.transcript,
      task.fence,
      task.lease,
      shared.updated,
      shared.wake,
      task.tombstone,
      task.userBytes,
      shared.epoch,
      shared.state(summary.state),
      '', // KEYS[12], the index of the state left
      task.id,
      '', // ARGV[2], the counts
      fence ?? '',
      '', // ARGV[4], the envelope or its edits
      this.writer,
      bytes(packAudit(append.audit)),
      bytes(append.transcript.map(entryJson).join('\n')),
      epoch.expected,
      epoch.candidate,
      task.live,
    ];
    // At most three sends: the whole envelope after refused edits, another state's index after a wrong guess.
    for (let attempt = 0; ; attempt++) {
      argv[SAVE_KEY_COUNT - 1] = shared.state(left as TaskState);
      // One string, made at once (a template of so many parts would be a chain of concatenations).
      argv[SAVE_KEY_COUNT + 1] = [
        expectedRevision,
        envelope.revision,
        summary.updatedAt,
        summary.wakeAt ?? '-',
        envelope.journal.audit - append.audit.length,
        envelope.journal.transcript - append.transcript.length,
        append.audit.length,
        append.transcript.length,
        text.summaryAt,
        text.summaryBytes,
        summary.state,
        left,
        edits === null ? '-' : base!.bytes,
      ].join(' ');
      argv[SAVE_KEY_COUNT + 3] = edits !== null ? bytes(edits) : (encoded ?? bytes(text.text));
      let reply: ScriptReply;
      try {
        reply = await this.call(action, () => this.scripts.taskStoreSaveEdits(...argv), { taskId, key: taskKey });
      } catch (error) {
        this.texts.forget(taskId);
        throw error;
      }
      const [code, detail, found] = reply;
      if (code === -14 && edits !== null && attempt < 2) {
        this.texts.forget(taskId);
        edits = null;
        continue;
      }
      if (code === -15 && attempt < 2) {
        if (!STATE_SET.has(detail))
          throw new CorruptTaskError(taskId, `${taskKey} records the unknown state ${JSON.stringify(detail)}`);
        left = detail;
        continue;
      }
      if (code < 0) {
        this.texts.forget(taskId);
        throw scriptError(code, detail, { taskId, expectedRevision, fence, epoch: this.epoch.context(epoch, action) });
      }
      this.texts.remember(taskId, envelope.revision, text, summary.state);
      this.epoch.learn(found);
      return;
    }
  }

  /** Running tasks of this bucket whose lease nobody holds (`LeaseManager.orphans`). */
  orphans(limit: number): Promise<string[]> {
    return this.epoch.checked('listing of orphaned tasks', () => this.listing.orphans(limit));
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
      this.scripts.taskStoreQuarantine(this.keys.quarantine, this.keys.tombstone(taskId), taskId, reason),
    );
    if (code < 0) throw scriptError(code, detail, { taskId });
  }

  async quarantined(taskId: string): Promise<string | null> {
    return this.call(`quarantine lookup of task ${taskId}`, () => this.client.hget(this.keys.quarantine, taskId));
  }

  async erase(taskId: string, request: EraseRequest): Promise<Tombstone> {
    try {
      return await this.erasure.erase(taskId, request);
    } finally {
      this.forgetTask(taskId);
    }
  }

  /** Finds the user's tasks by the owner index; tasks saved before it existed need `indexOwners()` first. */
  async eraseUser(owner: TaskOwner, request: EraseRequest): Promise<UserErasure> {
    let report: UserErasure;
    try {
      report = await this.erasure.eraseUser(owner, request);
    } catch (error) {
      // Some of the user's tasks may be erased already, and which is not known: nothing is kept of any task.
      this.texts.clear();
      this.args.clear();
      throw error;
    }
    for (const tombstone of report.erased) this.forgetTask(tombstone.taskId);
    return report;
  }

  /**
   * What this process kept of an erased task for its next save goes with it: the text of its last save (with
   * `envelopeEdits`, the whole envelope: the user's data) and its keys. Also after a failed erasure, which may have
   * erased it: the next save then goes whole.
   */
  private forgetTask(taskId: string): void {
    this.texts.forget(taskId);
    this.args.forget(taskId);
  }

  tombstone(taskId: string): Promise<Tombstone | null> {
    return this.erasure.tombstone(taskId);
  }

  /** What is due for retention here (the store merges the buckets' and takes the oldest first). */
  retentionDue(now: number, limit: number): Promise<RetentionDue> {
    return this.erasure.retentionDue(now, limit);
  }

  async eraseDue(id: string, now: number, finishedBefore: number): Promise<Tombstone | null> {
    try {
      return await this.erasure.eraseDue(id, now, finishedBefore);
    } finally {
      this.forgetTask(id);
    }
  }

  forgetDue(id: string, tombstonesBefore: number): Promise<boolean> {
    return this.erasure.forgetDue(id, tombstonesBefore);
  }

  /** Adds the task hash `key` (of this bucket) to its owner's index unless it has one (an `indexOwners` step). */
  indexOwnerKey(key: string, report: OwnerIndexReport): Promise<void> {
    return this.erasure.indexOwner(key, this.keys.task(''), report);
  }

  /** Adopts the epoch marker found now in this bucket, creating one if there is none (`acceptDataLoss`). */
  acceptDataLoss(): Promise<string> {
    return this.epoch.accept();
  }

  /** After every key of the bucket was deleted on purpose (`deleteAll`): the epoch starts afresh. */
  forgetEpoch(): void {
    this.epoch.forget();
  }
}

/**
 * A large argument of the save script as bytes: ioredis writes a command with a Buffer argument as one Buffer, each
 * Buffer argument copied into it as it is, where it would otherwise build the command as a string of many
 * concatenations that the socket's write then flattens into one more copy of the whole. Short ones stay strings.
 */
function bytes(text: string): string | Buffer {
  return text.length < 64 ? text : Buffer.from(text, 'utf8');
}

function entryJson(entry: unknown): string {
  return JSON.stringify(entry) ?? 'null';
}
