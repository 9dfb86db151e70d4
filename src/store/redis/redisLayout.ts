/**
 * How a RedisStore spreads tasks over buckets, and the record of it. A task's bucket is a hash of its id; bucket `i`
 * of `n` has the keys of `redisKeys(bucketPrefix(prefix, i, n))`, so one bucket is one hash tag (one slot of a
 * cluster). One bucket is the layout of earlier versions: `{prefix}` itself.
 *
 * The number is recorded once under the prefix (`{prefix}:layout`, SET NX) by the first store with several buckets;
 * a store opened on the same data with another number is refused (a task would be looked for in the wrong bucket),
 * and so is one with several buckets on data saved by a one-bucket store (whose `{prefix}:index:updated` is not
 * empty, with no record).
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { AgentError, HostRequestError } from '../../errors.js';
import type { RedisCall } from './redisConnection.js';
import type { RedisKeys } from './redisKeys.js';

/** The most buckets a store takes (a cluster has 16,384 slots; a listing asks every bucket). */
export const MAX_BUCKETS = 1_024;

export function checkBuckets(buckets: number | undefined): number {
  if (buckets === undefined) return 1;
  if (!Number.isInteger(buckets) || buckets < 1 || buckets > MAX_BUCKETS) {
    throw new HostRequestError('invalid_request', `RedisStore: buckets must be a whole number from 1 to ${MAX_BUCKETS}, not ${String(buckets)}`);
  }
  return buckets;
}

/** The key prefix of bucket `index` of `count`: the prefix itself for a single bucket. */
export function bucketPrefix(prefix: string, index: number, count: number): string {
  return count === 1 ? prefix : `${prefix}:${index}`;
}

/** The bucket of a task: the first 4 bytes of SHA-1 of its id, modulo the number of buckets. */
export function bucketOf(taskId: string, count: number): number {
  return createHash('sha1').update(taskId, 'utf8').digest().readUInt32BE(0) % count;
}

/** Refused: the store was opened with another number of buckets than the data under its prefix was saved with. */
export class StoreLayoutError extends AgentError {
  constructor(prefix: string, wanted: number, found: string) {
    super(
      'store_layout_mismatch',
      `the data under {${prefix}} is spread over ${found} bucket(s), and this store was opened with buckets: ${wanted}; open it with the same number (it never changes for a data set)`,
    );
  }
}

export class RedisLayout {
  private verified: Promise<void> | null = null;

  constructor(
    private readonly client: Redis,
    private readonly root: RedisKeys,
    private readonly prefix: string,
    private readonly buckets: number,
    private readonly call: RedisCall,
  ) {}

  private get key(): string {
    return `${this.root.root}:layout`;
  }

  /** Resolves once the record agrees with this store (checked on the first call; a failure is checked again). */
  checked(): Promise<void> {
    this.verified ??= this.verify().catch((error: unknown) => {
      this.verified = null;
      throw error;
    });
    return this.verified;
  }

  /** Deletes the record (with `deleteAll`); returns how many keys went. */
  async forget(): Promise<number> {
    this.verified = null;
    return this.call('delete of the layout record', () => this.client.unlink(this.key));
  }

  private async verify(): Promise<void> {
    const recorded = await this.call(`read of the layout record ${this.key}`, () => this.client.get(this.key));
    if (this.buckets === 1) {
      if (recorded !== null && recorded !== '1') throw new StoreLayoutError(this.prefix, 1, recorded);
      return;
    }
    if (recorded === null) {
      // Data of a one-bucket store, from before any record: its tasks are under {prefix} itself.
      const legacy = await this.call('read of the index of tasks', () => this.client.zcard(this.root.updated));
      if (legacy > 0) throw new StoreLayoutError(this.prefix, this.buckets, '1');
      const previous = await this.call(`write of the layout record ${this.key}`, () => this.client.set(this.key, String(this.buckets), 'NX', 'GET'));
      if (previous !== null && previous !== String(this.buckets)) throw new StoreLayoutError(this.prefix, this.buckets, previous);
      return;
    }
    if (recorded !== String(this.buckets)) throw new StoreLayoutError(this.prefix, this.buckets, recorded);
  }
}
