/** The keys a save names, kept as bytes from one save of a task to the next, are the keys' bytes. */
import { describe, expect, it } from 'vitest';
import { redisBucketKeys, taskScriptKeys } from '../src/store/redis/redisKeys.js';
import { BucketArgs, SaveArgCache } from '../src/store/redis/redisSaveArgs.js';

describe('the save arguments kept as bytes', () => {
  const keys = redisBucketKeys('app', 0, 1);

  it('are the bytes of the keys a save names, for any task id', () => {
    const cache = new SaveArgCache(2);
    for (const id of ['t1', 'réservez 🎉', 'a:audit']) {
      const user = keys.user({ tenantId: 'x', userId: id });
      const args = cache.of(keys, id, user);
      const [task, audit, transcript, fence, lease] = taskScriptKeys(keys, id);
      const bytes = [args.task, args.audit, args.transcript, args.fence, args.lease].map((b) => b.toString('utf8'));
      expect(bytes).toEqual([task, audit, transcript, fence, lease]);
      expect(args.taskKey).toBe(task);
      expect(args.tombstone.toString('utf8')).toBe(keys.tombstone(id));
      expect(args.live.toString('utf8')).toBe(keys.live(id));
      expect(args.id.toString('utf8')).toBe(id);
      expect(args.userBytes.toString('utf8')).toBe(user);
      expect(cache.of(keys, id, user)).toBe(args);
    }
  });

  it('follow a new owner index, and forget the first tasks beyond the limit', () => {
    const cache = new SaveArgCache(2);
    const first = cache.of(keys, 't1', 'u1');
    expect(cache.of(keys, 't1', 'u2').userBytes.toString('utf8')).toBe('u2');
    cache.of(keys, 't2', 'u1');
    cache.of(keys, 't3', 'u1');
    expect(cache.of(keys, 't1', 'u2')).not.toBe(first);
    expect(new SaveArgCache(0).of(keys, 't1', 'u1')).not.toBe(new SaveArgCache(0).of(keys, 't1', 'u1'));
  });

  it('of a bucket: its indexes and epoch marker', () => {
    const bucket = new BucketArgs(keys);
    expect([bucket.updated, bucket.wake, bucket.epoch].map((b) => b.toString('utf8'))).toEqual([
      keys.updated,
      keys.wake,
      keys.epoch,
    ]);
    expect(bucket.state('running').toString('utf8')).toBe(keys.state('running'));
    expect(bucket.state('running')).toBe(bucket.state('running'));
  });
});
