/**
 * The operator's search on Redis: the store narrows by state and owner through its indexes, and the filters by what a
 * task waits for and the tool it waits on give the same answers as on the memory store (httpConsole.test.ts).
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { RedisStore } from '../src/store/redis/redisStore.js';
import { type OperatorDesk, operatorDesk } from './support/operatorDesk.js';
import { useTestRedis } from './support/redis.js';

const redis = await useTestRedis();

describe.skipIf(!redis)('the operator search on Redis', () => {
  let desk: OperatorDesk | null = null;
  let prefix = '';
  let store: RedisStore | null = null;
  afterEach(async () => {
    await desk?.close();
    await store?.close();
    await redis!.deleteKeys(prefix);
  });
  afterAll(() => redis?.stop());

  it('filters by waiting reason, tool, user and id, and pages, over the store indexes', async () => {
    prefix = redis!.freshPrefix();
    store = new RedisStore({ url: redis!.url, prefix });
    desk = await operatorDesk({ store });
    await desk.refund('refund-1');
    await desk.refund('refund-2', 'E99');
    await desk.heldBooking('booking-1', 'E99');
    const search = desk.orchestrator.search.bind(desk.orchestrator);
    const ids = async (query: Parameters<typeof search>[0]) => (await search(query)).map((t) => t.taskId).sort();
    expect(await ids({ tenantId: 'acme', waitingFor: ['review'] })).toEqual(['booking-1']);
    expect(await ids({ tenantId: 'acme', tool: 'refund_order' })).toEqual(['refund-1', 'refund-2']);
    expect(await ids({ tenantId: 'acme', userId: 'E99', waitingFor: ['confirmation'] })).toEqual(['refund-2']);
    expect(await ids({ tenantId: 'acme', idContains: 'booking' })).toEqual(['booking-1']);
    expect(await ids({ tenantId: 'globex' })).toEqual([]);
    const all = (await search({ tenantId: 'acme' })).map((t) => t.taskId);
    const pages = [0, 1, 2].map((offset) => search({ tenantId: 'acme', offset, limit: 1 }));
    expect((await Promise.all(pages)).flat().map((t) => t.taskId)).toEqual(all);
    const listed = await desk.app.inject({
      url: '/api/tasks?waitingFor=review&tool=reserve_room',
      headers: { authorization: 'Bearer O1' },
    });
    expect(listed.json().tasks).toEqual([
      expect.objectContaining({ taskId: 'booking-1', waitingFor: 'review', tool: 'reserve_room', access: 'operator' }),
    ]);
  });
});
