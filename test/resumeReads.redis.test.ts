/**
 * Taking a task over on Redis reads it in the lease acquisition's own script: one round trip, and what it reads is
 * the state once the lease is taken. A stored task that cannot be restored is still quarantined, with its lease
 * given back, whether what is wrong is its envelope or the type of its key.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { TaskQuarantinedError } from '../src/errors.js';
import { createOrchestrator } from '../src/orchestrator/orchestrator.js';
import type { AgentModel } from '../src/model/agentModel.js';
import { redisKeys } from '../src/store/redis/redisKeys.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { reply } from '../src/testing/index.js';
import { defineTool } from '../src/tool.js';
import { E17 } from './support/harness.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();
afterAll(() => redis?.stop());

const lookUp = defineTool({
  name: 'look_up',
  description: 'reads a number',
  effect: 'read',
  scopes: [],
  timeoutMs: 5_000,
  input: z.strictObject({ n: z.number().int() }),
  output: z.strictObject({ n: z.number().int() }),
  execute: async ({ n }) => ({ ok: true, value: { n } }),
});

/** Turn 1 proposes a read; every later turn waits until aborted, and tells the `waiting()` promises given out before. */
function parkingModel(): { model: AgentModel; waiting: () => Promise<void> } {
  let waiters: (() => void)[] = [];
  const model: AgentModel = {
    name: 'parking',
    decide({ turn, signal }) {
      if (turn === 1) return Promise.resolve(reply.call('look_up', { n: 1 }, 'c1'));
      for (const wake of waiters) wake();
      waiters = [];
      return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
    },
  };
  return { model, waiting: () => new Promise<void>((resolve) => waiters.push(resolve)) };
}

/** The names and first keys of the commands `client` sends while `on` is set. */
function recordCommands(client: Redis) {
  const sent: string[] = [];
  let on = false;
  const send = client.sendCommand.bind(client);
  client.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
    const [command] = args as unknown as [{ name: string; args: unknown[] }];
    if (on) sent.push(`${command.name} ${String(command.args[0] ?? '')}`);
    return send(...args);
  }) as Redis['sendCommand'];
  return { sent, start: () => (on = true), stop: () => (on = false) };
}

/** Task "t", left by a closed orchestrator while its second model turn was in flight. */
async function parkedTask() {
  const client = redis!.connect();
  const prefix = redis!.freshPrefix();
  const store = new RedisStore({ client, prefix });
  const parking = parkingModel();
  const options = { tools: [lookUp], model: parking.model, store, expirySweepMs: 0, retentionSweepMs: 0 };
  const first = createOrchestrator(options);
  const parked = parking.waiting();
  await first.start({ principal: E17, goal: 'read once', taskId: 't' });
  await parked;
  await first.close();
  return { client, prefix, store, parking, options };
}

describe.skipIf(!redis)('taking a task over on Redis', () => {
  it('reads the task in the lease acquisition: no read of its own before the model is called again', async () => {
    const { client, prefix, parking, options } = await parkedTask();
    const commands = recordCommands(client);
    const second = createOrchestrator(options);
    const again = parking.waiting();
    commands.start();
    await second.resume('t');
    await again;
    commands.stop();
    // The acquisition script, then (the model's turn was in flight) nothing until the model answers.
    expect(commands.sent).toHaveLength(1);
    expect(commands.sent[0]).toMatch(/^eval(sha)? /);
    expect((await second.status('t')).state).toBe('running');
    await second.close();
    await redis!.deleteKeys(prefix);
  });

  it('quarantines a task whose stored envelope is not JSON, and gives its lease back', async () => {
    const { client, prefix, store, options } = await parkedTask();
    const keys = redisKeys(prefix);
    await client.hset(keys.task('t'), 'envelope', '{not json');

    const second = createOrchestrator(options);
    const refused = await second.resume('t').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TaskQuarantinedError);
    expect(String((refused as Error).message)).toMatch(/not JSON/);
    expect(await store.quarantined('t')).toMatch(/not JSON/);
    expect(await client.exists(keys.lease('t'))).toBe(0);
    await second.close();
    await redis!.deleteKeys(prefix);
  });

  it('leaves a task key of another type to the load, which quarantines the task (as without the reads)', async () => {
    const { client, prefix, store, options } = await parkedTask();
    const keys = redisKeys(prefix);
    await client.del(keys.task('t'));
    await client.set(keys.task('t'), 'a string');
    const taken = (await store.acquireAndRead('t', 10_000))!;
    expect(taken.read).toBeNull();
    await store.leases.release(taken.lease);

    const second = createOrchestrator(options);
    const refused = await second.resume('t').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TaskQuarantinedError);
    expect(await store.quarantined('t')).toMatch(/wrong type/);
    expect(await client.exists(keys.lease('t'))).toBe(0);
    await second.close();
    await redis!.deleteKeys(prefix);
  });
});
