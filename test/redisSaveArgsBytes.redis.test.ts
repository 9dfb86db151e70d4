/**
 * A save names its keys as Buffers kept from the task's last save (`redisSaveArgs.ts`, b444f3a): what ioredis writes
 * must be, byte for byte, the command the keys named as strings make (as before), each save, whatever the store
 * saved before: two stores on one client with the same task ids (other prefixes, other buckets), a task recreated
 * under another owner, a client with a `keyPrefix`, the state index guessed wrong.
 */
import { Command, Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { bucketOf } from '../src/store/redis/redisLayout.js';
import { type RedisKeys, redisBucketKeys, stateIndexKeys, taskScriptKeys } from '../src/store/redis/redisKeys.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import type { TaskSummary } from '../src/store/summary.js';
import type { SaveRequest } from '../src/store/taskStore.js';
import { createRequest, nextRequest } from './support/envelopes.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();

/** Where the save script's arguments are: 12 keys after the sha and key count, then the task id; `live` last. */
const KEYS_AT = 2;
const ID_AT = KEYS_AT + 12;

const toWritable = Command.prototype.toWritable;

interface Sent {
  command: Command;
  bytes: Buffer;
}

/** The bytes of a command as ioredis writes it. */
function written(command: Command): Buffer {
  const out = command.toWritable(undefined as never) as string | Buffer;
  return Buffer.isBuffer(out) ? out : Buffer.from(out, 'utf8');
}

describe.skipIf(!redis)('the save script call with its keys kept as bytes', () => {
  let client: Redis;
  let prefixed: Redis;
  let sent: Sent[] = [];
  const prefixes: string[] = [];

  beforeAll(() => {
    client = new Redis(redis!.url);
    prefixed = new Redis(redis!.url, { keyPrefix: 'kp:' });
  });
  afterEach(() => vi.restoreAllMocks());
  afterAll(async () => {
    for (const prefix of prefixes) await redis!.deleteKeys(prefix);
    await redis!.deleteKeys('kp:');
    client.disconnect();
    prefixed.disconnect();
    await redis!.stop();
  });

  function capture(): void {
    sent = [];
    vi.restoreAllMocks();
    vi.spyOn(Command.prototype, 'toWritable').mockImplementation(function (this: Command, socket: unknown) {
      const out = toWritable.call(this, socket as never) as string | Buffer;
      if (this.name === 'evalsha' || this.name === 'eval')
        sent.push({ command: this, bytes: Buffer.isBuffer(out) ? out : Buffer.from(out, 'utf8') });
      return out;
    });
  }

  /**
   * Each save call sent for `request` equals the call with its keys as strings, as the code before built them
   * (`taskScriptKeys` and the others, of the task's bucket), under the client's `keyPrefix`.
   */
  function expectSentAsStrings(keysOf: (taskId: string) => RedisKeys, request: SaveRequest, keyPrefix = ''): void {
    const { taskId, summary } = request.envelope;
    const saves = sent.filter(({ command }) => command.args[1] === 12 || command.args[1] === '12');
    expect(saves.length).toBeGreaterThan(0);
    const keys = keysOf(taskId);
    const states = stateIndexKeys(keys);
    for (const { command, bytes } of saves) {
      const args = [...command.args] as (string | Buffer)[];
      const named = (at: number) => (args[at] as Buffer | string).toString().slice(keyPrefix.length);
      // The index of the state left: the one the store guessed, which must be one of the bucket's.
      const left = named(KEYS_AT + 11);
      expect(states).toContain(left);
      const strings = [
        ...taskScriptKeys(keys, taskId),
        keys.tombstone(taskId),
        keys.user(summary as TaskSummary),
        keys.epoch,
        keys.state(summary.state),
        left,
      ];
      expect((args[ID_AT] as Buffer | string).toString()).toBe(taskId);
      const before = [args[0]!, args[1]!, ...strings, taskId, ...args.slice(ID_AT + 1, -1), keys.live(taskId)];
      const expected = new Command(command.name, before, keyPrefix === '' ? {} : { keyPrefix });
      expect(bytes.equals(written(expected))).toBe(true);
    }
  }

  const fresh = () => {
    const prefix = `saveargs-${process.pid}-${prefixes.length}`;
    prefixes.push(prefix);
    return prefix;
  };

  it('sends the same bytes from two stores on one client saving the same task ids', async () => {
    const [p4, p1] = [fresh(), fresh()];
    const four = new RedisStore({ client, prefix: p4, buckets: 4, envelopeEdits: true });
    const one = new RedisStore({ client, prefix: p1 });
    const keysOf4 = (taskId: string) => redisBucketKeys(p4, bucketOf(taskId, 4), 4);
    const keysOf1 = () => redisBucketKeys(p1, 0, 1);
    for (const taskId of ['t0', 't1', 't2', 't3', 'réservez 🎉']) {
      for (const [store, keysOf] of [
        [four, keysOf4],
        [one, keysOf1],
      ] as const) {
        let request = createRequest(taskId);
        capture();
        await store.save(request);
        expectSentAsStrings(keysOf, request);
        for (const state of ['waiting_for_user', 'running', 'done'] as const) {
          request = nextRequest(request.envelope, { state });
          capture();
          await store.save(request);
          expectSentAsStrings(keysOf, request);
        }
        expect((await store.load(taskId))?.revision).toBe(4);
      }
    }
  });

  it('names the new owner index of a task id saved again under another owner', async () => {
    const prefix = fresh();
    const store = new RedisStore({ client, prefix, envelopeEdits: true });
    const keysOf = () => redisBucketKeys(prefix, 0, 1);
    const principal = { userId: 'U1', tenantId: 'acme', scopes: ['rooms:read', 'rooms:book'] };
    let request = createRequest('again', { input: { principal } });
    await store.save(request);
    await store.deleteAll();
    request = createRequest('again', { input: { principal: { ...principal, userId: 'U2' } } });
    capture();
    await store.save(request);
    expectSentAsStrings(keysOf, request);
    request = nextRequest(request.envelope);
    capture();
    await store.save(request);
    expectSentAsStrings(keysOf, request);
    const u2 = await store.list({ owner: { tenantId: 'acme', userId: 'U2' } });
    expect(u2.map((task) => task.taskId)).toEqual(['again']);
    expect(await store.list({ owner: { tenantId: 'acme', userId: 'U1' } })).toEqual([]);
  });

  it('sends the same bytes on a client with a keyPrefix, and the keys land under it', async () => {
    const prefix = fresh();
    const store = new RedisStore({ client: prefixed, prefix, envelopeEdits: true });
    const keysOf = () => redisBucketKeys(prefix, 0, 1);
    let request = createRequest('kp1');
    capture();
    await store.save(request);
    expectSentAsStrings(keysOf, request, 'kp:');
    request = nextRequest(request.envelope, { state: 'waiting_for_user' });
    capture();
    await store.save(request);
    expectSentAsStrings(keysOf, request, 'kp:');
    expect(await client.exists(`kp:${keysOf().task('kp1')}`)).toBe(1);
    expect(await client.exists(keysOf().task('kp1'))).toBe(0);
    expect((await store.load('kp1'))?.revision).toBe(2);
  });
});
