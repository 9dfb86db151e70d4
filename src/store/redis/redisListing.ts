/**
 * `list` on Redis: ids are read off the sorted-set indexes that every save keeps (`lua/save.lua`): by wakeAt, by
 * owner, by state or by updatedAt, whichever the query narrows to; then the summaries beside the envelopes are
 * fetched in one pipeline and filtered and ordered as in every other store. No scan of the key space.
 */
import type { ChainableCommander, Redis } from 'ioredis';
import type { TaskSummary } from '../summary.js';
import { matchesQuery } from '../storeChecks.js';
import type { ListQuery } from '../taskStore.js';
import type { RedisCall } from './redisConnection.js';
import { type RedisKeys, TASK_FIELDS } from './redisKeys.js';

/** Lease checks per round trip of the orphan listing. */
const ORPHAN_BATCH = 1_000;

/** The listing of a RedisStore. */
export class RedisListing {
  constructor(
    private readonly client: Redis,
    private readonly keys: RedisKeys,
    private readonly call: RedisCall,
  ) {}

  /** Up to `limit` (> 0) summaries matching `query`, most recently updated first. */
  list(query: ListQuery, limit: number): Promise<TaskSummary[]> {
    return this.call('listing of tasks', async () => {
      let ids: string[];
      if (query.dueBefore !== undefined) {
        // Tasks due are few (expiring confirmations), so all of them are fetched and filtered.
        ids = await this.client.zrangebyscore(this.keys.wake, '-inf', query.dueBefore);
      } else if (query.owner) {
        // One user's tasks are few: with a state filter, all of them are fetched and filtered.
        ids = await this.newest([this.keys.user(query.owner)], query.states ? Number.POSITIVE_INFINITY : limit);
      } else {
        const indexes = query.states ? [...new Set(query.states)].map((s) => this.keys.state(s)) : [this.keys.updated];
        ids = await this.newest(indexes, limit);
      }
      const summaries = await this.summaries(ids);
      return summaries
        .filter((s) => matchesQuery(s, query))
        .sort(newestFirst)
        .slice(0, limit);
    });
  }

  /**
   * The `limit` most recently updated ids across `indexes`. ZREVRANGE orders equal scores by descending member
   * bytes, the other stores by ascending code unit, so every id tied with the last one is fetched too and the final
   * order is decided here.
   */
  private async newest(indexes: string[], limit: number): Promise<string[]> {
    const stop = Number.isFinite(limit) ? limit - 1 : -1;
    const heads = await exec(
      indexes.reduce((p, key) => p.zrevrange(key, 0, stop, 'WITHSCORES'), this.client.pipeline()),
    );
    const scored = new Map<string, number>();
    const ties: [string, string][] = [];
    heads.forEach((reply, i) => {
      const flat = reply as string[];
      for (let j = 0; j < flat.length; j += 2) scored.set(flat[j]!, Number(flat[j + 1]));
      if (Number.isFinite(limit) && flat.length === 2 * limit) ties.push([indexes[i]!, flat[flat.length - 1]!]);
    });
    if (ties.length > 0) {
      const tied = await exec(
        ties.reduce((p, [key, score]) => p.zrangebyscore(key, score, score), this.client.pipeline()),
      );
      tied.forEach((reply, i) => {
        for (const id of reply as string[]) scored.set(id, Number(ties[i]![1]));
      });
    }
    return [...scored]
      .sort(([a, sa], [b, sb]) => sb - sa || byCodeUnit(a, b))
      .slice(0, limit)
      .map(([id]) => id);
  }

  /**
   * Up to `limit` running tasks whose lease key is gone and that are not quarantined: the running index's ids, then
   * their leases' EXISTS and their quarantine entries, pipelined a thousand at a time (no summary read, no script run
   * per task).
   */
  orphans(limit: number): Promise<string[]> {
    return this.call('listing of orphaned tasks', async () => {
      const running = await this.client.zrange(this.keys.state('running'), '0', '-1');
      const found: string[] = [];
      for (let at = 0; at < running.length && found.length < limit; at += ORPHAN_BATCH) {
        const ids = running.slice(at, at + ORPHAN_BATCH);
        // A quarantined task is nobody's to take over: left out, so that many of them never hide the others.
        const replies = await exec(
          ids
            .reduce((p, id) => p.exists(this.keys.lease(id)), this.client.pipeline())
            .hmget(this.keys.quarantine, ...ids),
        );
        const quarantined = replies[ids.length] as (string | null)[];
        for (let i = 0; i < ids.length && found.length < limit; i++)
          if (replies[i] === 0 && quarantined[i] === null) found.push(ids[i]!);
      }
      return found;
    });
  }

  /**
   * Summaries of `ids`, fetched in one pipeline. A task whose hash is gone or unreadable, or whose summary is not one
   * of that task (JSON `null`, a number, another task's), is left out: the listing stays usable for every other task,
   * and loading that task reports the corruption.
   */
  private async summaries(ids: string[]): Promise<TaskSummary[]> {
    if (ids.length === 0) return [];
    const pipeline = ids.reduce((p, id) => p.hget(this.keys.task(id), TASK_FIELDS.summary), this.client.pipeline());
    const replies = (await pipeline.exec()) ?? [];
    const summaries: TaskSummary[] = [];
    replies.forEach(([error, text], i) => {
      if (error) {
        if (error.message.includes('WRONGTYPE')) return;
        throw error;
      }
      if (typeof text !== 'string') return;
      let summary: unknown;
      try {
        summary = JSON.parse(text);
      } catch {
        return;
      }
      if (isSummaryOf(summary, ids[i]!)) summaries.push(summary);
    });
    return summaries;
  }
}

/** True when `value` has what listing reads (the id, owner, state and times) of a summary of task `taskId`. */
function isSummaryOf(value: unknown, taskId: string): value is TaskSummary {
  if (typeof value !== 'object' || value === null) return false;
  const s = value as Partial<Record<keyof TaskSummary, unknown>>;
  return (
    s.taskId === taskId &&
    typeof s.state === 'string' &&
    typeof s.userId === 'string' &&
    typeof s.tenantId === 'string' &&
    Number.isFinite(s.updatedAt) &&
    (s.wakeAt === null || Number.isFinite(s.wakeAt))
  );
}

/** The order of every store's `list`: most recently updated first, ties by task id in code-unit order. */
function newestFirst(a: TaskSummary, b: TaskSummary): number {
  return b.updatedAt - a.updatedAt || byCodeUnit(a.taskId, b.taskId);
}

function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Replies of a pipeline, throwing its first error. */
async function exec(pipeline: ChainableCommander): Promise<unknown[]> {
  const replies = (await pipeline.exec()) ?? [];
  return replies.map(([error, reply]) => {
    if (error) throw error;
    return reply;
  });
}
