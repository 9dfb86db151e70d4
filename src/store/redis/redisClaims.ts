/**
 * Mandate claims on Redis: a mandate authorises one task. The claim is a string under the mandate's id
 * (`mandate:<id>`, holding the task id), in the bucket the mandate id hashes to, so that every claim of one mandate
 * meets the same key; the task keeps a pointer to the mandate it holds (`mandateof:<task id>`, in the task's bucket),
 * so that its erasure finds the claim and gives it back. Both are set by one script each (`lua/mandateClaim.lua`):
 * the pointer first, so that a task cannot hold two mandates, then the claim. With one bucket (the default) both
 * keys share a slot, but they are still two steps: a process that dies in between leaves the pointer alone, which
 * the task's erasure removes, or a retried start of the same task completes.
 */
import type { Redis } from 'ioredis';
import { MandateUsedError, TaskExistsError } from '../../errors.js';
import type { RedisCall } from './redisConnection.js';
import type { RedisKeys } from './redisKeys.js';
import { type StoreScripts, scriptError } from './redisScripts.js';

export class RedisClaims {
  constructor(
    private readonly client: Pick<Redis, 'get'>,
    private readonly scripts: StoreScripts,
    /** The task's bucket. */
    private readonly keys: RedisKeys,
    /** The keys of the bucket a mandate id hashes to. */
    private readonly claimKeys: (mandateId: string) => RedisKeys,
    private readonly call: RedisCall,
  ) {}

  /** For a task of this bucket. */
  async claim(mandateId: string, taskId: string): Promise<'claimed' | 'held'> {
    const pointed = await this.set(this.keys.mandateOf(taskId), mandateId, taskId, false);
    if (pointed === 0) throw new TaskExistsError(taskId);
    const claimed = await this.set(this.claimKeys(mandateId).mandate(mandateId), taskId, taskId, false).catch(
      async (error: unknown) => {
        if (pointed === 1) await this.set(this.keys.mandateOf(taskId), mandateId, taskId, true).catch(() => {});
        throw error;
      },
    );
    if (claimed === 0) {
      if (pointed === 1) await this.set(this.keys.mandateOf(taskId), mandateId, taskId, true);
      throw new MandateUsedError(mandateId, taskId);
    }
    return claimed === 1 ? 'claimed' : 'held';
  }

  /** Gives the claim back if the task holds it, then the task's pointer to it. */
  async release(mandateId: string, taskId: string): Promise<void> {
    await this.set(this.claimKeys(mandateId).mandate(mandateId), taskId, taskId, true);
    await this.set(this.keys.mandateOf(taskId), mandateId, taskId, true);
  }

  /** The mandate a task of this bucket holds, or null (its erasure gives it back). */
  async heldBy(taskId: string): Promise<string | null> {
    const key = this.keys.mandateOf(taskId);
    return this.call(`read of the mandate of task ${taskId}`, () => this.client.get(key), { taskId, key }).catch(
      () => null,
    );
  }

  private async set(key: string, value: string, taskId: string, giveBack: boolean): Promise<number> {
    const [code, detail] = await this.call(
      `${giveBack ? 'release' : 'claim'} of ${key}`,
      () => this.scripts.taskStoreMandateClaim(key, value, giveBack ? '1' : ''),
      { taskId, key },
    );
    if (code < 0) throw scriptError(code, detail, { taskId });
    return code;
  }
}
