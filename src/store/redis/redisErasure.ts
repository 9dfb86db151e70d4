/**
 * Erasure and retention on Redis. One task is erased by one Lua script (`lua/erase.lua`): every key of the task,
 * its entries in every index (the owner's included), its quarantine marker, lease and fence counter go, and its
 * tombstone is written, atomically. A user's tasks are found through the owner index that every save keeps
 * (`lua/save.lua`); tasks saved before that index existed are added to it by `indexOwners` (a migration, safe to
 * run while other processes work). Finished tasks due for retention are read off the per-state indexes (scored by
 * updatedAt), tombstones due off the erased index (scored by erasedAt): no scan of the key space.
 */
import type { Redis } from 'ioredis';
import { TaskNotFoundError } from '../../errors.js';
import {
  type EraseRequest,
  FINISHED_TASK_STATES,
  type Retention,
  type TaskOwner,
  type Tombstone,
  type UserErasure,
  checkEraseRequest,
  checkOwner,
  parseTombstone,
  retentionCutoffs,
  retentionRequest,
  tombstoneHead,
} from '../erasure.js';
import type { RedisClaims } from './redisClaims.js';
import type { RedisCall } from './redisConnection.js';
import { TASK_FIELDS, type RedisKeys, stateIndexKeys, taskScriptKeys } from './redisKeys.js';
import { type StoreScripts, scriptError } from './redisScripts.js';

/** What `indexOwners` did. */
export interface OwnerIndexReport {
  /** Task hashes looked at. */
  scanned: number;
  /** Tasks added to their owner's index (the others had one already). */
  indexed: number;
  /** Ids of tasks whose summary could not be read: find their owner by hand, or erase them by id. */
  unreadable: string[];
}

/** What one bucket has due for retention (`retentionDue`). */
export interface RetentionDue {
  finishedBefore: number | null;
  tombstonesBefore: number | null;
  finished: { id: string; score: number }[];
  tombstones: { id: string; score: number }[];
}

/** How often `eraseUser` re-reads the owner index: tasks created while it erases are erased too. */
const USER_PASSES = 3;

export class RedisErasure {
  private readonly stateKeys: string[];

  constructor(
    private readonly client: Redis,
    private readonly scripts: StoreScripts,
    private readonly keys: RedisKeys,
    private readonly retention: Retention,
    private readonly call: RedisCall,
    private readonly claims: RedisClaims,
  ) {
    this.stateKeys = stateIndexKeys(keys);
  }

  async erase(taskId: string, request: EraseRequest): Promise<Tombstone> {
    const tombstone = await this.eraseOne(taskId, checkEraseRequest(`erase of task ${taskId}`, request), null);
    if (!tombstone) throw new TaskNotFoundError(taskId);
    return tombstone.tombstone;
  }

  async eraseUser(owner: TaskOwner, request: EraseRequest): Promise<UserErasure> {
    const checked = checkEraseRequest('eraseUser', request);
    const key = this.keys.user(checkOwner(owner));
    const erased: Tombstone[] = [];
    for (let pass = 0; pass < USER_PASSES; pass++) {
      const ids = await this.call('read of an owner index', () => this.client.zrange(key, '0', '-1'));
      if (ids.length === 0) break;
      for (const id of ids) {
        const result = await this.eraseOne(id, checked, null);
        if (result?.fresh) erased.push(result.tombstone);
        // An index entry whose task is gone (deleted around the store) must not keep the owner's key alive.
        if (!result) await this.call('cleanup of an owner index', () => this.client.zrem(key, id));
      }
    }
    return { erased, unreadable: [] };
  }

  async tombstone(taskId: string): Promise<Tombstone | null> {
    const key = this.keys.tombstone(taskId);
    const text = await this.call(`tombstone lookup of task ${taskId}`, () => this.client.get(key), { taskId, key });
    return text === null ? null : parseTombstone(taskId, text);
  }

  /**
   * What is due for retention at `now` in this bucket: the oldest `limit` + 1 finished tasks past their period (one
   * more than asked says whether more are due) and as many tombstones past theirs, each with its score (updatedAt,
   * erasedAt), so that a sweep over several buckets takes the oldest first.
   */
  async retentionDue(now: number, limit: number): Promise<RetentionDue> {
    const { finishedBefore, tombstonesBefore } = retentionCutoffs(this.retention, now);
    const due: RetentionDue = { finishedBefore, tombstonesBefore, finished: [], tombstones: [] };
    if (finishedBefore !== null) {
      const heads = await this.call('retention sweep', () =>
        Promise.all(
          FINISHED_TASK_STATES.map((state) =>
            this.client.zrangebyscore(
              this.keys.state(state),
              '-inf',
              finishedBefore,
              'WITHSCORES',
              'LIMIT',
              0,
              limit + 1,
            ),
          ),
        ),
      );
      due.finished = heads
        .flatMap((flat) => pairs(flat))
        .sort((a, b) => a.score - b.score)
        .slice(0, limit + 1);
    }
    if (tombstonesBefore !== null) {
      const flat = await this.call('retention sweep', () =>
        this.client.zrangebyscore(this.keys.erased, '-inf', tombstonesBefore, 'WITHSCORES', 'LIMIT', 0, limit + 1),
      );
      due.tombstones = pairs(flat);
    }
    return due;
  }

  /** Erases a finished task found due (if it still is): its fresh tombstone, or null. */
  async eraseDue(id: string, now: number, finishedBefore: number): Promise<Tombstone | null> {
    const result = await this.eraseOne(id, retentionRequest(now), finishedBefore);
    return result?.fresh ? result.tombstone : null;
  }

  /** Removes a tombstone found due (if it still is); true when it went. */
  async forgetDue(id: string, tombstonesBefore: number): Promise<boolean> {
    const [code, detail] = await this.call(`removal of the tombstone of task ${id}`, () =>
      this.scripts.taskStoreForgetTombstone(this.keys.tombstone(id), this.keys.erased, id, tombstonesBefore),
    );
    if (code < 0) throw scriptError(code, detail, { taskId: id });
    return code === 1;
  }

  /** Adds one task hash to its owner's index unless it has one (an `indexOwners` step). */
  async indexOwner(key: string, taskPrefix: string, report: OwnerIndexReport): Promise<void> {
    const taskId = key.slice(taskPrefix.length);
    report.scanned += 1;
    const fields = await this.call(
      `read of task ${taskId}`,
      () => this.client.hmget(key, TASK_FIELDS.summary, TASK_FIELDS.owner),
      { taskId, key },
    ).catch(() => [null, null]);
    if (fields[1]) return;
    const summary = ownerOf(fields[0] ?? null);
    if (!summary) {
      if (fields[0] !== null) report.unreadable.push(taskId);
      return;
    }
    const ownerKey = this.keys.user(summary);
    const [code, detail] = await this.call(`owner index of task ${taskId}`, () =>
      this.scripts.taskStoreIndexOwner(key, ownerKey, taskId, summary.updatedAt),
    );
    if (code < 0) throw scriptError(code, detail, { taskId });
    report.indexed += code;
  }

  /** Runs the erase script; null when nothing is stored under the id or the retention condition failed. */
  private async eraseOne(
    taskId: string,
    request: EraseRequest,
    cutoff: number | null,
  ): Promise<{ tombstone: Tombstone; fresh: boolean } | null> {
    const keys = [
      ...taskScriptKeys(this.keys, taskId),
      this.keys.quarantine,
      this.keys.tombstone(taskId),
      this.keys.erased,
      this.keys.inbox(taskId),
      this.keys.inboxSeq(taskId),
      this.keys.inboxes,
      ...this.stateKeys,
    ];
    // The script appends the `removed` member it counts.
    const head = `${JSON.stringify(tombstoneHead(taskId, request)).slice(0, -1)},"removed":`;
    const condition = cutoff === null ? [''] : [cutoff, ...FINISHED_TASK_STATES];
    const [code, detail] = await this.call(
      `erasure of task ${taskId}`,
      () => this.scripts.taskStoreErase(...keys, taskId, head, request.at, this.keys.userPrefix, ...condition),
      { taskId, key: keys[0]! },
    );
    if (code < 0) throw scriptError(code, detail, { taskId });
    if (code === 3) return null;
    // The mandate's claim (in the bucket of its id, so not in the script) names the task: it goes too, then the
    // task's pointer to it. An erasure a crash cut off here is completed by the next one (the pointer is kept until then).
    const mandateId = await this.claims.heldBy(taskId);
    if (mandateId !== null) await this.claims.release(mandateId, taskId);
    if (code === 0) return null;
    return { tombstone: parseTombstone(taskId, detail), fresh: code === 1 };
  }
}

/** Members and scores of a WITHSCORES reply. */
function pairs(flat: string[]): { id: string; score: number }[] {
  const out: { id: string; score: number }[] = [];
  for (let i = 0; i < flat.length; i += 2) out.push({ id: flat[i]!, score: Number(flat[i + 1]) });
  return out;
}

/** The owner and updatedAt of a stored summary, or null when unreadable. */
function ownerOf(text: string | null): (TaskOwner & { updatedAt: number }) | null {
  if (text === null) return null;
  try {
    const { tenantId, userId, updatedAt } = JSON.parse(text) as Record<string, unknown>;
    if (typeof tenantId === 'string' && typeof userId === 'string' && typeof updatedAt === 'number')
      return { tenantId, userId, updatedAt };
  } catch {
    // unreadable: reported
  }
  return null;
}

/** `text` as a literal in a Redis glob pattern. */
export function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}
