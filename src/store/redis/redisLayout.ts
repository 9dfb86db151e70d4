/**
 * How a RedisStore spreads tasks over buckets, and the record of it. A task's bucket is a hash of its id; bucket `i`
 * of `n` has the keys of `redisBucketKeys(prefix, i, n)`, so one bucket is one hash tag (one slot of a cluster).
 * One bucket is the layout of earlier versions: `{prefix}` itself.
 *
 * The number is recorded once under the prefix (`{prefix}:layout`, SET NX) by the first store that finds none; a
 * store opened on the same data with another number is refused (a task would be looked for in the wrong bucket), and
 * so is one with several buckets on data saved by a one-bucket store of an earlier version (data under `{prefix}`
 * with no record), and one with several buckets that finds bucket data but no record (lost with its master).
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { AgentError, HostRequestError } from '../../errors.js';
import type { RedisCall } from './redisConnection.js';
import type { RedisKeys } from './redisKeys.js';
import { scanKeys } from './redisScans.js';
import { globEscape } from './redisErasure.js';

/** The most buckets a store takes (a cluster has 16,384 slots; a listing asks every bucket). */
export const MAX_BUCKETS = 1_024;

export function checkBuckets(buckets: number | undefined): number {
  if (buckets === undefined) return 1;
  if (!Number.isInteger(buckets) || buckets < 1 || buckets > MAX_BUCKETS) {
    throw new HostRequestError(
      'invalid_request',
      `RedisStore: buckets must be a whole number from 1 to ${MAX_BUCKETS}, not ${String(buckets)}`,
    );
  }
  return buckets;
}

/** The bucket of a task: the first 4 bytes of SHA-1 of its id, modulo the number of buckets. */
export function bucketOf(taskId: string, count: number): number {
  return createHash('sha1').update(taskId, 'utf8').digest().readUInt32BE(0) % count;
}

/** Refused: the store was opened with another number of buckets than the data under its prefix was saved with. */
export class StoreLayoutError extends AgentError<'store_layout_mismatch'> {
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
    /** The keys under `{prefix}` (the record, and a one-bucket store's data). */
    private readonly root: RedisKeys,
    /** The keys of every bucket. */
    private readonly parts: readonly RedisKeys[],
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

  /** After `deleteAll` (the record went with the prefix's keys): the next call checks, and records, again. */
  reset(): void {
    this.verified = null;
  }

  /** After an accepted data loss: records this store's number if there is no record (refused if another is there). */
  async adopt(): Promise<void> {
    const previous = await this.call(`write of the layout record ${this.key}`, () =>
      this.client.set(this.key, String(this.buckets), 'NX', 'GET'),
    );
    if (previous !== null && previous !== String(this.buckets))
      throw new StoreLayoutError(this.prefix, this.buckets, previous);
    this.verified = Promise.resolve();
  }

  private async verify(): Promise<void> {
    const recorded = await this.call(`read of the layout record ${this.key}`, () => this.client.get(this.key));
    if (recorded !== null) {
      if (recorded !== String(this.buckets)) throw new StoreLayoutError(this.prefix, this.buckets, recorded);
      return;
    }
    // No record: data of a one-bucket store of an earlier version (under {prefix} itself), or nothing yet.
    const single = await this.call('read of the one-bucket data', () =>
      this.client.exists(this.root.epoch, this.root.updated, this.root.erased),
    );
    if (this.buckets > 1 && single > 0) throw new StoreLayoutError(this.prefix, this.buckets, '1');
    // Bucket data whose record is gone (lost with its master, deleted by hand): whatever this store's number, it
    // cannot tell the right one. Looked for only when there is no record (a first start, or after such a loss).
    if (await this.bucketDataExists()) {
      throw new AgentError(
        'store_layout_mismatch',
        `the data under {${this.prefix}} is spread over buckets, but its layout record ${this.key} is gone; set it again to the number of buckets it was saved with (SET ${this.key} <n>)`,
      );
    }
    const previous = await this.call(`write of the layout record ${this.key}`, () =>
      this.client.set(this.key, String(this.buckets), 'NX', 'GET'),
    );
    if (previous !== null && previous !== String(this.buckets))
      throw new StoreLayoutError(this.prefix, this.buckets, previous);
  }

  /** Whether any key of any bucket of the prefix exists: this store's buckets' epochs, then a scan for `{prefix{*`. */
  private async bucketDataExists(): Promise<boolean> {
    if (this.buckets > 1) {
      // One key per command: the buckets' epoch markers are in as many slots.
      const epochs = await this.call('read of the bucket data', () =>
        Promise.all(this.parts.map((keys) => this.client.exists(keys.epoch))),
      );
      if (epochs.some((n) => n > 0)) return true;
    }
    let found = false;
    await scanKeys(this.client, `${globEscape(`{${this.prefix}{`)}*`, this.call, async () => {
      found = true;
      return true;
    });
    return found;
  }
}
