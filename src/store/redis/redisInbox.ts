/**
 * Tasks' inboxes on Redis (dispatch): a list per task of "<seq> <json>" entries and a counter, under the task's own
 * names, so an erasure removes them with the task. Appending is one script (`lua/inboxAppend.lua`: refused for an
 * erased task or a full inbox); trimming is one script (`lua/inboxTrim.lua`).
 */
import type { Redis } from 'ioredis';
import type { Clock } from '../../clock.js';
import type { InboxEntry, TaskInbox } from '../taskStore.js';
import type { RedisCall } from './redisConnection.js';
import type { RedisEpoch } from './redisEpoch.js';
import type { RedisKeys } from './redisKeys.js';
import { type StoreScripts, scriptError } from './redisScripts.js';

export class RedisInbox implements TaskInbox {
  constructor(
    private readonly client: Pick<Redis, 'lrange' | 'zrangebyscore' | 'zrem'>,
    private readonly scripts: StoreScripts,
    private readonly keys: RedisKeys,
    private readonly call: RedisCall,
    private readonly clock: Clock,
    /** The bucket's epoch: a reservation is a task's first write, refused after a data loss. */
    private readonly epoch: RedisEpoch,
  ) {}

  async append(taskId: string, data: unknown, maxUnapplied: number): Promise<number> {
    const key = this.keys.inbox(taskId);
    const [code, detail] = await this.call(
      `inbox append for task ${taskId}`,
      () =>
        this.scripts.taskStoreInboxAppend(
          key,
          this.keys.inboxSeq(taskId),
          this.keys.tombstone(taskId),
          this.keys.inboxes,
          JSON.stringify(data),
          maxUnapplied,
          taskId,
          this.clock.now(),
        ),
      { taskId, key },
    );
    if (Number(code) < 0) throw scriptError(Number(code), String(detail), { taskId });
    return Number(code);
  }

  /** The entries after `seq`; an entry that cannot be read comes with `data: null` (its driver skips it, saying so). */
  async after(taskId: string, seq: number): Promise<InboxEntry[]> {
    const key = this.keys.inbox(taskId);
    const raw = await this.call(`inbox read for task ${taskId}`, () => this.client.lrange(key, 0, -1), { taskId, key });
    const entries: InboxEntry[] = [];
    for (const text of raw) {
      const space = text.indexOf(' ');
      const entrySeq = Number(text.slice(0, space));
      // Not written by this store: without a position it cannot be applied in order, nor trimmed; it is skipped.
      if (space < 1 || !Number.isSafeInteger(entrySeq)) continue;
      if (entrySeq <= seq) continue;
      let data: unknown = null;
      try {
        data = JSON.parse(text.slice(space + 1)) as unknown;
      } catch {
        // Applied as a refusal ("not an event"), so that the cursor moves past it and the rest is applied.
      }
      entries.push({ seq: entrySeq, data });
    }
    return entries;
  }

  async trim(taskId: string, seq: number): Promise<void> {
    const key = this.keys.inbox(taskId);
    await this.call(
      `inbox trim for task ${taskId}`,
      () => this.scripts.taskStoreInboxTrim(key, this.keys.inboxes, seq, taskId, this.clock.now()),
      { taskId, key },
    );
  }

  /** Also StoreDataLostError, when this store had learned an epoch and its data set is gone or replaced. */
  async reserve(taskId: string, undo = false): Promise<void> {
    const key = this.keys.inboxSeq(taskId);
    const action = `reservation of task id ${taskId}`;
    const epoch = this.epoch.args();
    const [code, detail, found] = await this.call(
      action,
      () =>
        this.scripts.taskStoreInboxReserve(
          key,
          this.keys.task(taskId),
          this.keys.tombstone(taskId),
          this.keys.inbox(taskId),
          this.keys.epoch,
          undo ? '1' : '0',
          epoch.expected,
          epoch.candidate,
        ),
      { taskId, key },
    );
    if (code < 0) throw scriptError(code, detail, { taskId, epoch: this.epoch.context(epoch, action) });
    if (!undo) this.epoch.learn(found);
  }

  async pending(before: number, limit: number): Promise<string[]> {
    return (await this.pendingScored(before, limit)).map((entry) => entry.id);
  }

  /** `pending` with each task's score (the time its inbox last made progress), for a merge across buckets. */
  async pendingScored(before: number, limit: number): Promise<{ id: string; score: number }[]> {
    const flat = await this.call('read of the index of inboxes', () =>
      this.client.zrangebyscore(this.keys.inboxes, '-inf', before, 'WITHSCORES', 'LIMIT', 0, limit),
    );
    const entries: { id: string; score: number }[] = [];
    for (let i = 0; i < flat.length; i += 2) entries.push({ id: flat[i]!, score: Number(flat[i + 1]) });
    return entries;
  }

  async forget(taskId: string): Promise<void> {
    await this.call(`removal of task ${taskId} from the index of inboxes`, () =>
      this.client.zrem(this.keys.inboxes, taskId),
    );
  }
}
