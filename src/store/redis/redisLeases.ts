/**
 * Leases on Redis: a per-task string holding the holder's random token with a PX expiry, and a per-task counter
 * that every acquisition increments in the same script, giving the monotonic fence that saves present. Acquisition
 * and renewal check the data set's epoch marker (`redisEpoch.ts`) in the same script.
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../../clock.js';
import { AgentError } from '../../errors.js';
import type { RedisCall } from './redisConnection.js';
import type { RedisEpoch } from './redisEpoch.js';
import type { RedisKeys } from './redisKeys.js';
import { type StoreScripts, scriptError } from './redisScripts.js';
import type { Lease, LeaseManager, TakenTask } from '../taskStore.js';
import { envelopeOfHash } from './redisTaskHash.js';

/** The LeaseManager of a RedisStore. */
export class RedisLeaseManager implements LeaseManager {
  constructor(
    private readonly scripts: StoreScripts,
    private readonly keys: RedisKeys,
    private readonly clock: Clock,
    private readonly call: RedisCall,
    private readonly epoch: RedisEpoch,
    /** Told the state of each task read with its lease (the next save's guess of the state it leaves). */
    private readonly seen: (taskId: string, state: string) => void = () => {},
  ) {}

  acquire(taskId: string, ttlMs: number): Promise<Lease | null> {
    return this.take(taskId, ttlMs, false).then((taken) => taken?.lease ?? null);
  }

  /**
   * One script: the lease, then the task hash's envelope and revision and the task's quarantine reason (not read when
   * either key holds another type: `read` is null then).
   */
  acquireAndRead(taskId: string, ttlMs: number): Promise<TakenTask | null> {
    return this.take(taskId, ttlMs, true);
  }

  private async take(taskId: string, ttlMs: number, read: boolean): Promise<TakenTask | null> {
    const ttl = checkTtl(ttlMs);
    const token = leaseToken();
    const key = this.keys.lease(taskId);
    const taskKey = this.keys.task(taskId);
    // Taken before the request, so the expiry we report is never later than the one Redis applies.
    const now = this.clock.now();
    const action = `lease acquisition for task ${taskId}`;
    const epoch = this.epoch.args();
    const [code, detail, found, wasRead, envelope, revision, quarantined] = await this.call(
      action,
      () =>
        this.scripts.taskStoreAcquireLease(
          key,
          this.keys.fence(taskId),
          this.keys.tombstone(taskId),
          this.keys.epoch,
          taskKey,
          this.keys.quarantine,
          token,
          ttl,
          epoch.expected,
          epoch.candidate,
          taskId,
          read ? '1' : '',
        ),
      { taskId, key },
    );
    if (code === 0) return null;
    if (code < 0) throw scriptError(code, detail, { taskId, epoch: this.epoch.context(epoch, action) });
    this.epoch.learn(found);
    const lease: Lease = { taskId, token, fence: String(detail), expiresAt: now + ttl };
    if (!read || wasRead !== 1) return { lease, read: null };
    return {
      lease,
      read: {
        quarantined: quarantined ?? null,
        load: () => {
          const loaded = envelopeOfHash(taskId, taskKey, envelope, revision);
          if (loaded) this.seen(taskId, loaded.summary.state);
          return loaded;
        },
      },
    };
  }

  /** Also moves `lease.expiresAt` forward when the renewal succeeds. */
  async renew(lease: Lease, ttlMs: number): Promise<boolean> {
    const ttl = checkTtl(ttlMs);
    const key = this.keys.lease(lease.taskId);
    const now = this.clock.now();
    const action = `lease renewal for task ${lease.taskId}`;
    const epoch = this.epoch.args();
    const [code, detail, found] = await this.call(
      action,
      () => this.scripts.taskStoreRenewLease(key, this.keys.epoch, lease.token, ttl, epoch.expected, epoch.candidate),
      { taskId: lease.taskId, key },
    );
    if (code < 0) throw scriptError(code, detail, { taskId: lease.taskId, epoch: this.epoch.context(epoch, action) });
    if (code === 0) return false;
    this.epoch.learn(found);
    lease.expiresAt = now + ttl;
    return true;
  }

  async release(lease: Lease): Promise<void> {
    const key = this.keys.lease(lease.taskId);
    const [code, detail] = await this.call(
      `lease release for task ${lease.taskId}`,
      () => this.scripts.taskStoreReleaseLease(key, lease.token),
      { taskId: lease.taskId, key },
    );
    if (code < 0) throw scriptError(code, detail, { taskId: lease.taskId });
  }
}

/** Bytes of one lease token (its hex is the holder's token in Redis). */
const TOKEN_BYTES = 16;
/** Tokens drawn from the OS at once: `randomBytes` is one system call, 7-20 µs on a VM, whatever its size. */
const POOLED_TOKENS = 128;
let pool: Buffer | null = null;
let drawn = 0;

/**
 * A fresh random token (32 hex digits), as `randomBytes(16)` gives, from a pool drawn from the same CSPRNG
 * `POOLED_TOKENS` at a time (as node:crypto's `randomUUID` does); every byte of the pool is handed out once.
 */
export function leaseToken(): string {
  if (pool === null || drawn + TOKEN_BYTES > pool.length) {
    pool = randomBytes(TOKEN_BYTES * POOLED_TOKENS);
    drawn = 0;
  }
  const token = pool.toString('hex', drawn, drawn + TOKEN_BYTES);
  drawn += TOKEN_BYTES;
  return token;
}

function checkTtl(ttlMs: number): number {
  if (!Number.isFinite(ttlMs) || ttlMs < 1) {
    throw new AgentError('invalid_lease_ttl', `a lease needs a positive, finite ttlMs; got ${ttlMs}`);
  }
  return Math.ceil(ttlMs);
}
