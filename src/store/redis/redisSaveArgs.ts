/**
 * The keys a save script call names, as bytes, kept from one save of a task to the next. A save names twelve keys
 * and the task id: each built as a string again every save (a concatenation), then, since the call has Buffer
 * arguments, written by ioredis as `"$" + length + "\r\n" + key + "\r\n"`, a concatenation it flattens into one more
 * copy. A Buffer argument is copied as it is, behind a short `$<length>\r\n`. The bytes are the same: what Redis
 * receives does not change.
 *
 * One for the whole store, shared by its buckets as `SavedTexts` is (a task is in one bucket, so its keys are those
 * of its bucket), up to `limit` tasks (the first kept forgotten first); the keys every task of a bucket names (its
 * indexes, its epoch marker) are kept per bucket, by `BucketArgs`.
 */
import type { TaskState } from '../summary.js';
import type { RedisKeys } from './redisKeys.js';

/** A task's own keys and id, as the save script takes them. */
export interface TaskArgs {
  /** The task hash's key, as a string (for messages). */
  readonly taskKey: string;
  readonly task: Buffer;
  readonly audit: Buffer;
  readonly transcript: Buffer;
  readonly fence: Buffer;
  readonly lease: Buffer;
  readonly tombstone: Buffer;
  readonly live: Buffer;
  readonly id: Buffer;
  /** The owner index key last named for the task, and its bytes. */
  user: string;
  userBytes: Buffer;
}

/**
 * `texts` as bytes, on one ArrayBuffer of their size. Not `Buffer.from`: a short one is a view of Node's shared 8 KB
 * pool, and a kept view keeps its whole slab (1,024 tasks' ~250 KB of keys held 4 to 8 MB of slabs).
 */
function owned(...texts: string[]): Buffer[] {
  let size = 0;
  for (const text of texts) size += Buffer.byteLength(text, 'utf8');
  const block = Buffer.allocUnsafeSlow(size);
  let at = 0;
  return texts.map((text) => {
    const end = at + block.write(text, at, 'utf8');
    const bytes = block.subarray(at, end);
    at = end;
    return bytes;
  });
}

const utf8 = (text: string) => owned(text)[0]!;

/** The tasks' save arguments (`TaskArgs`), for a store. */
export class SaveArgCache {
  private readonly tasks = new Map<string, TaskArgs>();

  constructor(private readonly limit = 1024) {}

  /** After the task was erased: nothing of it is kept (its id, its owner's index key). */
  forget(taskId: string): void {
    this.tasks.delete(taskId);
  }

  /** After an erasure that failed midway: none is kept (each holds its owner's index key, a user id). */
  clear(): void {
    this.tasks.clear();
  }

  /** The arguments of `taskId`, whose keys are `keys`' (its bucket's), and whose owner index is `user`. */
  of(keys: RedisKeys, taskId: string, user: string): TaskArgs {
    let args = this.tasks.get(taskId);
    if (args === undefined) {
      const taskKey = keys.task(taskId);
      const [task, audit, transcript, fence, lease, tombstone, live, id, userBytes] = owned(
        taskKey,
        keys.audit(taskId),
        keys.transcript(taskId),
        keys.fence(taskId),
        keys.lease(taskId),
        keys.tombstone(taskId),
        keys.live(taskId),
        taskId,
        user,
      ) as [Buffer, Buffer, Buffer, Buffer, Buffer, Buffer, Buffer, Buffer, Buffer];
      args = { taskKey, task, audit, transcript, fence, lease, tombstone, live, id, user, userBytes };
      if (this.limit > 0) {
        this.tasks.set(taskId, args);
        if (this.tasks.size > this.limit) this.tasks.delete(this.tasks.keys().next().value!);
      }
    } else if (args.user !== user) {
      args.user = user;
      args.userBytes = utf8(user);
    }
    return args;
  }
}

/** The keys every save of a bucket names: its updatedAt, wakeAt and state indexes and its epoch marker, as bytes. */
export class BucketArgs {
  readonly updated: Buffer;
  readonly wake: Buffer;
  readonly epoch: Buffer;
  private readonly states = new Map<string, Buffer>();

  constructor(private readonly keys: RedisKeys) {
    [this.updated, this.wake, this.epoch] = owned(keys.updated, keys.wake, keys.epoch) as [Buffer, Buffer, Buffer];
  }

  /** The key of the index of `state`. */
  state(state: TaskState): Buffer {
    let key = this.states.get(state);
    if (key === undefined) {
      key = utf8(this.keys.state(state));
      this.states.set(state, key);
    }
    return key;
  }
}
