/**
 * The epoch marker: `{prefix}:epoch` holds a random id and the time the data set under the prefix was first used
 * ("<16 hex digits>@<ISO time>"), created once (SET NX) by the first save, lease acquisition or reservation of a
 * queued task's id that finds none. A store learns it on its first call and remembers it; every save, lease call and
 * reservation sends it, and the scripts refuse the call (StoreDataLostError) when the marker is gone or holds another
 * epoch. Loads and listings compare it in the same round trip as their read. So a Redis that lost its data (restart without persistence, FLUSHALL, failover to
 * an empty replica) is reported as data loss, not as a fence that was never handed out or a task that does not
 * exist, and a task whose records vanished is never created again in the empty data set by a process that knew it.
 *
 * A store that never learned an epoch (a new process) works on whatever it finds, and creates the marker if there
 * is none: that covers a brand-new prefix, data saved before markers existed, and a data set after an accepted loss.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Clock } from '../../clock.js';
import { StoreDataLostError } from '../../errors.js';
import type { RedisCall } from './redisConnection.js';
import type { RedisKeys } from './redisKeys.js';

/** What a script that checks the marker needs to turn its refusal (code -11) into a StoreDataLostError. */
export interface EpochContext {
  prefix: string;
  node: string;
  /** The epoch sent with the call. */
  expected: string;
  /** What was refused, for the message ("save of task t-1"). */
  action: string;
}

/** The ARGV a checking script takes. */
export interface EpochArgs {
  /** The epoch learned, "" before the store learned one. */
  expected: string;
  /** Before the store learned one: a new epoch for the script to create if there is none; else "". */
  candidate: string;
}

/** One store's knowledge of the epoch of its data set. */
export class RedisEpoch {
  private learned: string | null = null;

  constructor(
    private readonly client: Redis,
    private readonly keys: RedisKeys,
    private readonly prefix: string,
    private readonly where: string | (() => string),
    private readonly clock: Clock,
    private readonly call: RedisCall,
  ) {}

  /** The server (or cluster) named in messages. */
  private node(): string {
    return typeof this.where === 'string' ? this.where : this.where();
  }

  /** The epoch learned, or null before the first call that found or created one. */
  get current(): string | null {
    return this.learned;
  }

  /** The ARGV for a checking script, taken when the call is made. */
  args(): EpochArgs {
    return this.learned === null
      ? { expected: '', candidate: this.newEpoch() }
      : { expected: this.learned, candidate: '' };
  }

  /** The context for `scriptError`. */
  context(args: EpochArgs, action: string): EpochContext {
    return { prefix: this.prefix, node: this.node(), expected: args.expected, action };
  }

  /** After a checking script succeeded: learns the epoch it reports, if none was learned yet. */
  learn(epoch: string | null | undefined): void {
    if (this.learned === null && typeof epoch === 'string' && epoch !== '') this.learned = epoch;
  }

  /**
   * Runs a read with a GET of the marker beside it (same round trip). Throws StoreDataLostError when the store had
   * learned an epoch and the marker is gone or differs, in preference to any failure of the read itself; learns
   * the epoch found otherwise.
   */
  async checked<T>(action: string, read: () => Promise<T>): Promise<T> {
    const expected = this.learned;
    const [value, found] = await Promise.allSettled([
      read(),
      this.call(`read of the epoch marker ${this.keys.epoch} for the ${action}`, () =>
        this.client.get(this.keys.epoch),
      ),
    ]);
    if (found.status === 'fulfilled') {
      if (expected === null) this.learn(found.value);
      else if (found.value !== expected)
        throw dataLostError({ prefix: this.prefix, node: this.node(), expected, action }, found.value);
    }
    if (value.status === 'rejected') throw value.reason;
    if (found.status === 'rejected') throw found.reason;
    return value.value;
  }

  /** Adopts the marker found now, creating one if there is none (SET NX GET); returns the epoch now in effect. */
  async accept(): Promise<string> {
    const candidate = this.newEpoch();
    const previous = await this.call('acceptance of the data set', () =>
      this.client.set(this.keys.epoch, candidate, 'NX', 'GET'),
    );
    this.learned = previous ?? candidate;
    return this.learned;
  }

  /** Forgets the epoch (after this store deleted every key under its prefix on purpose). */
  forget(): void {
    this.learned = null;
  }

  private newEpoch(): string {
    const now = this.clock.now();
    const when = Number.isFinite(now) && Math.abs(now) <= 8.64e15 ? new Date(now).toISOString() : String(now);
    return `${randomBytes(8).toString('hex')}@${when}`;
  }
}

/** The StoreDataLostError for a marker that is gone (`found` null or "") or holds another epoch. */
export function dataLostError(context: EpochContext, found: string | null): StoreDataLostError {
  return new StoreDataLostError(
    context.prefix,
    context.node,
    context.expected,
    found === null || found === '' ? null : shown(found),
    context.action,
  );
}

/** A marker value as the message shows it: ours as is, anything else quoted and cut. */
function shown(value: string): string {
  if (/^[0-9a-f]{16}@[0-9A-Za-z:.+-]{1,40}$/.test(value)) return value;
  return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
}
