/**
 * `readJournal` on Redis: one script (`lua/readJournal.lua`) returns the committed entries of a range, never the
 * entries past the length the task hash records. The transcript (a list) comes back entry by entry; the audit
 * journal (a stream, one message per save) as whole messages, cut to the range here.
 */
import { CorruptTaskError } from '../../errors.js';
import { unpackAudit } from './redisAuditUnpacking.js';
import type { JournalStream } from '../taskStore.js';
import type { RedisCall } from './redisConnection.js';
import { type RedisKeys, TASK_FIELDS } from './redisKeys.js';
import { type StoreScripts, scriptError } from './redisScripts.js';

/** The journal reads of a RedisStore. */
export class RedisJournal {
  constructor(
    private readonly scripts: StoreScripts,
    private readonly keys: RedisKeys,
    private readonly call: RedisCall,
  ) {}

  async read(taskId: string, stream: JournalStream, from: number, to?: number): Promise<unknown[]> {
    const taskKey = this.keys.task(taskId);
    const listKey = stream === 'audit' ? this.keys.audit(taskId) : this.keys.transcript(taskId);
    const field = stream === 'audit' ? TASK_FIELDS.auditLength : TASK_FIELDS.transcriptLength;
    const [code, detail] = await this.call(
      `read of the ${stream} journal of task ${taskId}`,
      () =>
        this.scripts.taskStoreReadJournal(
          taskKey,
          listKey,
          field,
          sliceIndex(from),
          to === undefined ? '' : sliceIndex(to),
        ),
      { taskId, key: listKey },
    );
    if (code < 0) throw scriptError(code, String(detail), { taskId });
    const parse = (text: string, what: string): unknown => {
      try {
        return JSON.parse(text) as unknown;
      } catch (error) {
        throw new CorruptTaskError(taskId, `${what} of the requested ${stream} range in ${listKey} is not JSON`, {
          cause: error,
        });
      }
    };
    if (code === 1) return (detail as string[]).map((text, i) => parse(text, `entry ${i}`));
    // Stream: (first entry number, JSON array) per save; cut to [from, to) of the committed entries.
    const [start, end, ...pairs] = (detail as (string | number)[]).map((x, i) => (i < 2 ? Number(x) : x));
    const entries: { index: number; entry: unknown }[] = [];
    for (let i = 0; i < pairs.length; i += 2) {
      const first = Number(pairs[i]) - 1;
      const array = unpackAudit(parse(String(pairs[i + 1]), `the audit message at entry ${first + 1}`));
      if (!array)
        throw new CorruptTaskError(
          taskId,
          `the audit message at entry ${first + 1} in ${listKey} is not an array of entries`,
        );
      array.forEach((entry, k) => entries.push({ index: first + k, entry }));
    }
    return entries.filter((e) => e.index >= (start as number) && e.index < (end as number)).map((e) => e.entry);
  }
}

/** An index with Array.prototype.slice's coercion (NaN -> 0), kept finite for Lua. */
function sliceIndex(index: number): number {
  if (Number.isNaN(index)) return 0;
  return Math.max(-Number.MAX_SAFE_INTEGER, Math.min(Number.MAX_SAFE_INTEGER, Math.trunc(index)));
}
