/**
 * A store registers its Lua scripts on its client under names that end with each script's digest
 * (`redisScripts.ts`): stores of two versions of the package on one client (two copies in one app, a benchmark
 * comparing checkouts) never run each other's scripts. Under fixed names, `defineCommand` let the store made last
 * replace the other's scripts: c2ae86f's lease script (2 keys) ran in place of today's (6 keys) and refused with
 * "ERR value is not an integer or out of range", and scripts whose arguments happened to fit ran silently.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/testing/manualClock.js';
import { type StoreScripts, scriptCommandName, storeScriptCommand } from '../src/store/redis/redisScripts.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { T0, createRequest, nextRequest } from './support/envelopes.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();

/** The names the package's versions up to 0.4.0 registered their scripts under, whatever their code. */
const FIXED_NAMES: (keyof StoreScripts)[] = [
  'taskStoreSaveEdits',
  'taskStoreAcquireLease',
  'taskStoreRenewLease',
  'taskStoreReleaseLease',
  'taskStoreReadJournal',
  'taskStoreErase',
  'taskStoreQuarantine',
  'taskStoreIndexOwner',
  'taskStoreInboxAppend',
  'taskStoreMandateClaim',
];

describe('script command names', () => {
  it('name the role and the script: another text, another name', () => {
    const name = scriptCommandName('taskStoreSaveEdits', 'return 1');
    expect(name).toMatch(/^taskStoreSaveEdits_[0-9a-f]{16}$/);
    expect(scriptCommandName('taskStoreSaveEdits', 'return 1')).toBe(name);
    expect(scriptCommandName('taskStoreSaveEdits', 'return 2')).not.toBe(name);
    expect(storeScriptCommand('taskStoreAcquireLease')).toMatch(/^taskStoreAcquireLease_[0-9a-f]{16}$/);
  });
});

describe.skipIf(!redis)('stores of two versions on one client', () => {
  let client: Redis;
  const prefixes: string[] = [];

  beforeAll(() => {
    client = new Redis(redis!.url);
  });
  afterEach(async () => {
    for (const prefix of prefixes.splice(0)) await redis!.deleteKeys(prefix);
  });
  afterAll(async () => {
    client.disconnect();
    await redis!.stop();
  });

  it('run their own scripts, whatever the other version registered after them', async () => {
    const prefix = redis!.freshPrefix();
    prefixes.push(prefix);
    const store = new RedisStore({ client, prefix, clock: new ManualClock(T0) });
    // Another version's store on the same client, made after this one: its scripts under the names it chose. These
    // refuse every call, so a call of this store that reached one would fail.
    for (const name of FIXED_NAMES) {
      client.defineCommand(name, { lua: "return {-99, 'another version'}", numberOfKeys: 1 });
    }
    const lease = await store.leases!.acquire('t1', 30_000);
    expect(lease).not.toBeNull();
    const first = { ...createRequest('t1'), fence: lease!.fence };
    await store.save(first);
    await store.save({ ...nextRequest(first.envelope), fence: lease!.fence });
    expect((await store.load('t1'))?.revision).toBe(2);
    expect(await store.leases!.renew(lease!, 30_000)).toBe(true);
    await store.leases!.release(lease!);
    await store.close();
  });

  it("leave the other version's scripts as they were", async () => {
    const prefix = redis!.freshPrefix();
    prefixes.push(prefix);
    client.defineCommand('taskStoreSaveEdits', { lua: "return {7, 'another version'}", numberOfKeys: 1 });
    const store = new RedisStore({ client, prefix, clock: new ManualClock(T0) });
    await store.save(createRequest('t1'));
    const other = client as unknown as { taskStoreSaveEdits: (...args: string[]) => Promise<[number, string]> };
    expect(await other.taskStoreSaveEdits(`${prefix}-key`)).toEqual([7, 'another version']);
    await store.close();
  });
});
