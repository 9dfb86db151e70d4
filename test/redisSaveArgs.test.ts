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

  it('are the bytes Buffer.from makes of any text (lone surrogates, astral, empty)', () => {
    const cache = new SaveArgCache(4);
    for (const id of ['\ud800x', 'a\udc00', '𝄞🎉', '']) {
      const args = cache.of(keys, id, `u:${id}`);
      expect(args.id.equals(Buffer.from(id, 'utf8'))).toBe(true);
      expect(args.userBytes.equals(Buffer.from(`u:${id}`, 'utf8'))).toBe(true);
      expect(args.live.equals(Buffer.from(keys.live(id), 'utf8'))).toBe(true);
      expect(cache.of(keys, id, `v:${id}`).userBytes.equals(Buffer.from(`v:${id}`, 'utf8'))).toBe(true);
    }
  });

  it("hold no more memory than their bytes: not views of Node's shared 8 KB pool, each holding its slab", () => {
    // Between two tasks' first saves, a save makes Buffers of a few KB (its audit message, its edits) from the pool.
    const cache = new SaveArgCache(1024);
    const slabs = new Set<ArrayBufferLike>();
    let held = 0;
    for (let n = 0; n < 1024; n++) {
      const args = cache.of(keys, `task-${n}`, keys.user({ tenantId: 'x', userId: `u${n}` }));
      const { task, audit, transcript, fence, lease, tombstone, live, id, userBytes } = args;
      for (const bytes of [task, audit, transcript, fence, lease, tombstone, live, id, userBytes]) {
        slabs.add(bytes.buffer);
        held += bytes.length;
      }
      Buffer.from('x'.repeat(3000), 'utf8');
      Buffer.from('y'.repeat(3000), 'utf8');
    }
    const bucket = new BucketArgs(keys);
    for (const state of ['running', 'done'] as const) {
      slabs.add(bucket.state(state).buffer);
      Buffer.from('z'.repeat(3000), 'utf8');
    }
    let pinned = 0;
    for (const slab of slabs) pinned += slab.byteLength;
    // Before: 1,024 tasks' 241 KB of keys held 8.4 MB of pool slabs (now 0.24 MB, one ArrayBuffer a task).
    expect(pinned).toBeLessThan(2 * held + 4096);
  });
});
