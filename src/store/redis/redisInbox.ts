/**
 * Tasks' inboxes on Redis (dispatch): a list per task of "<seq> <json>" entries and a counter, under the task's own
 * names, so an erasure removes them with the task. Appending is one script (`lua/inboxAppend.lua`: refused for an
 * erased task or a full inbox); trimming is one script (`lua/inboxTrim.lua`).
 */
import { CorruptTaskError } from '../../errors.js';
import type { InboxEntry, TaskInbox } from '../taskStore.js';
import type { RedisCall } from './redisConnection.js';
import type { RedisKeys } from './redisKeys.js';
import { type StoreScripts, scriptError } from './redisScripts.js';

export class RedisInbox implements TaskInbox {
  constructor(
    private readonly client: StoreScripts & { lrange(key: string, start: number, stop: number): Promise<string[]> },
    private readonly keys: RedisKeys,
    private readonly call: RedisCall,
  ) {}

  async append(taskId: string, data: unknown, maxUnapplied: number): Promise<number> {
    const key = this.keys.inbox(taskId);
    const [code, detail] = await this.call(
      `inbox append for task ${taskId}`,
      () => this.client.taskStoreInboxAppend(key, this.keys.inboxSeq(taskId), this.keys.tombstone(taskId), JSON.stringify(data), maxUnapplied),
      { taskId, key },
    );
    if (Number(code) < 0) throw scriptError(Number(code), String(detail), { taskId });
    return Number(code);
  }

  async after(taskId: string, seq: number): Promise<InboxEntry[]> {
    const key = this.keys.inbox(taskId);
    const raw = await this.call(`inbox read for task ${taskId}`, () => this.client.lrange(key, 0, -1), { taskId, key });
    const entries: InboxEntry[] = [];
    for (const text of raw) {
      const space = text.indexOf(' ');
      const entrySeq = Number(text.slice(0, space));
      if (space < 1 || !Number.isSafeInteger(entrySeq)) throw new CorruptTaskError(taskId, `an entry of ${key} has no sequence number`);
      if (entrySeq <= seq) continue;
      try {
        entries.push({ seq: entrySeq, data: JSON.parse(text.slice(space + 1)) as unknown });
      } catch (error) {
        throw new CorruptTaskError(taskId, `inbox entry ${entrySeq} in ${key} is not JSON`, { cause: error });
      }
    }
    return entries;
  }

  async trim(taskId: string, seq: number): Promise<void> {
    const key = this.keys.inbox(taskId);
    await this.call(`inbox trim for task ${taskId}`, () => this.client.taskStoreInboxTrim(key, seq), { taskId, key });
  }
}
