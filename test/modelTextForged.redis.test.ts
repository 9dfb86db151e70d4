/**
 * What reaches a viewer through the live text channel (`RedisStore.liveMessages`): messages anyone may publish on
 * Redis. Malformed ones are dropped without harm; ids with glob characters or colons stay on their own channel.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { ModelTextBus, type ModelTextEvent } from '../src/runtime/modelText.js';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { until } from './support/harness.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();

describe.skipIf(!redis)('live text channel: forged and odd messages', () => {
  afterAll(() => redis?.stop());

  it('drops malformed messages, keeps ids with glob characters apart, and survives all of it', async () => {
    const prefix = redis!.freshPrefix();
    const store = new RedisStore({ url: redis!.url, prefix, liveMessages: { markTtlMs: 1_000, checkMs: 20 } });
    const admin = new Redis(redis!.url, { maxRetriesPerRequest: 1 });
    try {
      const bus = new ModelTextBus();
      bus.connect(store.liveMessages);
      const seen: Record<string, ModelTextEvent[]> = {};
      const stops = ['t*', 't?', 't[1]', 'a:b', '{t1}'].map((id) =>
        bus.watch(id, (e) => (seen[id] ??= []).push(e), { calls: true }),
      );
      const channel = (id: string) => `{${prefix}}:text:${id}`;
      await until(async () => ((await admin.pubsub('NUMSUB', channel('t*'))) as [string, number])[1] === 1, 3_000);
      const good = { from: 'x', message: { kind: 'text', turn: 1, attempt: 1, text: 'hi', replace: false } };
      for (const raw of [
        'not json',
        'null',
        '[]',
        '"str"',
        '{"from":"x"}',
        '{"from":"x","message":null}',
        '{"from":"x","message":{"kind":"text","turn":-1,"attempt":1,"text":"a","replace":false}}',
        '{"from":"x","message":{"kind":"call","turn":1,"attempt":1,"index":1.5,"callId":null,"name":null,"text":"a","replace":false}}',
        '{"from":"x","message":{"kind":"text","turn":1,"attempt":1,"text":{"toString":1},"replace":false}}',
        '{"__proto__":{"polluted":1},"from":"x","message":{"kind":"discarded","turn":1,"attempt":"1"}}',
      ])
        await admin.publish(channel('t*'), raw);
      // Published for other tasks whose ids the glob characters would match: never heard by these watches.
      for (const id of ['t1', 'tx', 'a', '{t1}x']) await admin.publish(channel(id), JSON.stringify(good));
      await admin.publish(channel('t*'), JSON.stringify(good));
      await until(() => (seen['t*']?.length ?? 0) === 1, 3_000);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(seen['t*']).toEqual([{ kind: 'text', taskId: 't*', turn: 1, attempt: 1, text: 'hi', replace: false }]);
      expect(Object.keys(seen)).toEqual(['t*']);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      for (const stop of stops) stop();
      await until(async () => ((await admin.pubsub('NUMSUB', channel('t*'))) as [string, number])[1] === 0, 3_000);
    } finally {
      await admin.quit();
      await store.close();
    }
  });
});
