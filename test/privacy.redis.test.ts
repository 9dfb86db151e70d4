/**
 * The secrets of the wallet task (see test/privacy.test.ts) and the credentials of the secret task (see
 * test/secrets.test.ts) on Redis: every key the store wrote under its prefix, of every type, is read back and
 * searched. With a keyed sealer the wallet task also survives a new orchestrator.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cardNumbers } from '../src/privacy/redactors.js';
import { keyedSealer } from '../src/privacy/sealer.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { useTestRedis } from './support/redis.js';
import { credentialsIn, runSecretTask } from './support/secretWorld.js';
import { WALLET_CARD, runWalletTask, secretsIn } from './support/walletWorld.js';

const redis = await useTestRedis();

/** Every value under `{prefix}`, whatever its type, as text. */
async function everyValue(client: Redis, prefix: string): Promise<{ keys: number; text: string }> {
  const texts: string[] = [];
  let cursor = '0';
  let keys = 0;
  do {
    const [next, found] = await client.scan(cursor, 'MATCH', `{${prefix}}*`, 'COUNT', 500);
    cursor = next;
    for (const key of found) {
      keys += 1;
      const type = await client.type(key);
      texts.push(key);
      if (type === 'string') texts.push((await client.get(key)) ?? '');
      else if (type === 'list') texts.push(...(await client.lrange(key, 0, -1)));
      else if (type === 'hash') texts.push(JSON.stringify(await client.hgetall(key)));
      else if (type === 'set') texts.push(...(await client.smembers(key)));
      else if (type === 'zset') texts.push(...(await client.zrange(key, '0', '-1')));
      else texts.push(`unread type ${type}`);
    }
  } while (cursor !== '0');
  return { keys, text: texts.join('\n') };
}

describe.skipIf(!redis)('a task carrying card numbers, on Redis', () => {
  let client: Redis;
  const prefixes: string[] = [];
  beforeAll(() => {
    client = redis!.connect();
  });
  afterEach(async () => {
    await Promise.all(prefixes.splice(0).map((prefix) => redis!.deleteKeys(prefix)));
  });
  afterAll(() => redis?.stop());

  it('leaves no card number in any key, and the charge (after a new orchestrator) still gets the real card', async () => {
    const prefix = redis!.freshPrefix();
    prefixes.push(prefix);
    const store = new RedisStore({ client, prefix });
    const key = randomBytes(32);
    const privacy = { sealer: keyedSealer({ key }), redactors: [cardNumbers()] };
    const run = await runWalletTask({
      store,
      taskId: 'wallet-r',
      privacy,
      restart: { sealer: keyedSealer({ key }), redactors: [cardNumbers()] },
    });
    expect([...run.service.charges.values()]).toEqual([{ card: WALLET_CARD, amount: 500 }]);
    expect(run.final.outcome?.status).toBe('answered');
    const stored = await everyValue(client, prefix);
    expect(stored.keys).toBeGreaterThan(3);
    expect(stored.text).toContain('[[sealed:card_number:');
    expect(secretsIn(stored.text)).toEqual([]);
    expect(secretsIn(run.streams.chunks.join('\n'))).toEqual([]);
  });

  it('leaves no credential in any key with no privacy configuration (the default redactors)', async () => {
    const prefix = redis!.freshPrefix();
    prefixes.push(prefix);
    const run = await runSecretTask({ store: new RedisStore({ client, prefix }), taskId: 'secrets-r' });
    expect(run.status.state).toBe('answered');
    const stored = await everyValue(client, prefix);
    expect(stored.text).toContain('[[sealed:password:');
    expect(credentialsIn(stored.text)).toEqual([]);
  });
});
