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
  type RetentionReport,
  type SweepOptions,
  type TaskOwner,
  type Tombstone,
  type UserErasure,
  checkEraseRequest,
  checkOwner,
  parseTombstone,
  retentionCutoffs,
  retentionRequest,
  sweepLimit,
  tombstoneHead,
} from '../erasure.js';
import type { RedisCall } from './redisConnection.js';
import { TASK_FIELDS, type RedisKeys, stateIndexKeys } from './redisKeys.js';
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

/** How often `eraseUser` re-reads the owner index: tasks created while it erases are erased too. */
const USER_PASSES = 3;

export class RedisErasure {
  private readonly stateKeys: string[];

  constructor(
    private readonly client: Redis & StoreScripts,
    private readonly keys: RedisKeys,
    private readonly retention: Retention,
    private readonly call: RedisCall,
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

  async sweepRetention(now: number, options?: SweepOptions): Promise<RetentionReport> {
    const limit = sweepLimit(options);
    const { finishedBefore, tombstonesBefore } = retentionCutoffs(this.retention, now);
    const report: RetentionReport = { erased: [], tombstonesRemoved: 0, more: false };
    if (finishedBefore !== null) {
      // The oldest `limit` + 1 of each finished state, merged: one more than needed says whether more are due.
      const heads = await this.call('retention sweep', () =>
        Promise.all(
          FINISHED_TASK_STATES.map((state) =>
            this.client.zrangebyscore(this.keys.state(state), '-inf', finishedBefore, 'WITHSCORES', 'LIMIT', 0, limit + 1),
          ),
        ),
      );
      const due = heads
        .flatMap((flat) => pairs(flat))
        .sort((a, b) => a.score - b.score)
        .map((p) => p.id);
      report.more = due.length > limit;
      const request = retentionRequest(now);
      for (const id of due.slice(0, limit)) {
        const result = await this.eraseOne(id, request, finishedBefore);
        if (result?.fresh) report.erased.push(result.tombstone);
      }
    }
    if (tombstonesBefore !== null) {
      const ids = await this.call('retention sweep', () => this.client.zrangebyscore(this.keys.erased, '-inf', tombstonesBefore, 'LIMIT', 0, limit + 1));
      report.more ||= ids.length > limit;
      for (const id of ids.slice(0, limit)) {
        const [code, detail] = await this.call(`removal of the tombstone of task ${id}`, () =>
          this.client.taskStoreForgetTombstone(this.keys.tombstone(id), this.keys.erased, id, tombstonesBefore),
        );
        if (code < 0) throw scriptError(code, detail, { taskId: id });
        if (code === 1) report.tombstonesRemoved += 1;
      }
    }
    return report;
  }

  /**
   * Adds every task saved before owner indexes existed (by an older version) to its owner's index, so that
   * `eraseUser` finds it. Run once after every process runs this version; idempotent, and safe while others save
   * and erase. SCANs the task hashes: cost grows with the number of tasks.
   */
  async indexOwners(): Promise<OwnerIndexReport> {
    const report: OwnerIndexReport = { scanned: 0, indexed: 0, unreadable: [] };
    const taskPrefix = this.keys.task('');
    const match = `${globEscape(taskPrefix)}*`;
    let cursor = '0';
    do {
      const [next, found] = await this.call('scan of the task hashes', () => this.client.scan(cursor, 'MATCH', match, 'COUNT', 500));
      cursor = next;
      for (const key of found) {
        const taskId = key.slice(taskPrefix.length);
        report.scanned += 1;
        const fields = await this.call(`read of task ${taskId}`, () => this.client.hmget(key, TASK_FIELDS.summary, TASK_FIELDS.owner), { taskId, key }).catch(
          () => [null, null],
        );
        if (fields[1]) continue;
        const summary = ownerOf(fields[0] ?? null);
        if (!summary) {
          if (fields[0] !== null) report.unreadable.push(taskId);
          continue;
        }
        const ownerKey = this.keys.user(summary);
        const [code, detail] = await this.call(`owner index of task ${taskId}`, () =>
          this.client.taskStoreIndexOwner(key, ownerKey, taskId, summary.updatedAt),
        );
        if (code < 0) throw scriptError(code, detail, { taskId });
        report.indexed += code;
      }
    } while (cursor !== '0');
    return report;
  }

  /** Runs the erase script; null when nothing is stored under the id or the retention condition failed. */
  private async eraseOne(taskId: string, request: EraseRequest, cutoff: number | null): Promise<{ tombstone: Tombstone; fresh: boolean } | null> {
    const keys = [
      this.keys.task(taskId),
      this.keys.audit(taskId),
      this.keys.transcript(taskId),
      this.keys.fence(taskId),
      this.keys.lease(taskId),
      this.keys.updated,
      this.keys.wake,
      this.keys.quarantine,
      this.keys.tombstone(taskId),
      this.keys.erased,
      this.keys.inbox(taskId),
      this.keys.inboxSeq(taskId),
      ...this.stateKeys,
    ];
    // The script appends the `removed` member it counts.
    const head = `${JSON.stringify(tombstoneHead(taskId, request)).slice(0, -1)},"removed":`;
    const condition = cutoff === null ? [''] : [cutoff, ...FINISHED_TASK_STATES];
    const [code, detail] = await this.call(
      `erasure of task ${taskId}`,
      () => this.client.taskStoreErase(...keys, taskId, head, request.at, this.keys.userPrefix, ...condition),
      { taskId, key: keys[0]! },
    );
    if (code < 0) throw scriptError(code, detail, { taskId });
    if (code === 0 || code === 3) return null;
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
    if (typeof tenantId === 'string' && typeof userId === 'string' && typeof updatedAt === 'number') return { tenantId, userId, updatedAt };
  } catch {
    // unreadable: reported
  }
  return null;
}

/** `text` as a literal in a Redis glob pattern. */
export function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}
