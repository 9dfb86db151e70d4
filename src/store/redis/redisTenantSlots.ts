/**
 * Tenant slots on Redis (`capacity.tenantCap`): one sorted set per tenant under the prefix's hash tag, task ids scored
 * by expiry in Redis server time, changed only by `lua/tenantSlot.lua`, which drops expired slots, counts and takes
 * in one step, so that two processes can never both take the last slot.
 */
import { AgentError, StoreUnavailableError } from '../../errors.js';
import type { TenantSlots } from '../taskStore.js';
import type { RedisCall } from './redisConnection.js';
import type { RedisKeys } from './redisKeys.js';
import type { StoreScripts } from './redisScripts.js';

export class RedisTenantSlots implements TenantSlots {
  constructor(
    private readonly scripts: StoreScripts,
    /** The prefix's own keys (`redisKeys(prefix)`), whatever the bucket count. */
    private readonly keys: RedisKeys,
    private readonly call: RedisCall,
    /** Resolves once the store's layout was checked. */
    private readonly ready: () => Promise<void>,
  ) {}

  async take(tenantId: string, taskId: string, ttlMs: number, cap?: number): Promise<'taken' | 'held' | null> {
    if (!Number.isFinite(ttlMs) || ttlMs < 1)
      throw new AgentError('invalid_lease_ttl', `a tenant slot needs a positive, finite ttlMs; got ${ttlMs}`);
    const code = await this.run(`tenant slot of task ${taskId}`, tenantId, taskId, [
      'take',
      taskId,
      Math.ceil(ttlMs),
      cap === undefined || !Number.isFinite(cap) ? '' : cap,
    ]);
    return code === 1 ? 'taken' : code === 2 ? 'held' : null;
  }

  async release(tenantId: string, taskId: string): Promise<void> {
    await this.run(`release of the tenant slot of task ${taskId}`, tenantId, taskId, ['release', taskId, '', '']);
  }

  async count(tenantId: string): Promise<number> {
    const key = this.keys.tenantSlots(tenantId);
    await this.ready();
    const [code, detail] = await this.call(`count of the tenant slots under ${key}`, () =>
      this.scripts.taskStoreTenantSlot(key, 'count', '', '', ''),
    );
    if (code < 0) throw wrongType(detail);
    return Number(detail);
  }

  private async run(action: string, tenantId: string, taskId: string, args: (string | number)[]): Promise<number> {
    const key = this.keys.tenantSlots(tenantId);
    await this.ready();
    const [code, detail] = await this.call(action, () => this.scripts.taskStoreTenantSlot(key, ...args), {
      taskId,
      key,
    });
    if (code < 0) throw wrongType(detail);
    return code;
  }
}

function wrongType(key: unknown): StoreUnavailableError {
  return new StoreUnavailableError(
    `tenant slots key ${String(key)} holds a value of the wrong type; something other than this store wrote under its prefix`,
  );
}
