/**
 * The tasks CLI's `recover` (src/cli/tasks.ts) on Redis: a worker process is killed in the middle of a task, its
 * lease expires, and the CLI, run as a child process with the demo's host module, takes the task over and finishes it.
 */
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisBookingService } from '../examples/booking/redisBookingService.js';
import { leaseExpired } from './support/crashMatrix.js';
import { useTestRedis } from './support/redis.js';
import { ChildPool } from './support/workers.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();
const pool = new ChildPool();

const tasks = (args: string[], env: NodeJS.ProcessEnv = {}) => pool.run('src/cli/tasks.ts', args, { env });

afterEach(() => pool.killAll());

describe.skipIf(!redis)('tasks CLI recover on Redis', () => {
  let client: Redis;
  let prefix: string;

  beforeAll(() => {
    client = redis!.connect();
    prefix = redis!.freshPrefix();
  });
  afterAll(async () => {
    await redis!.deleteKeys(prefix);
    await redis!.stop();
  });

  it(
    'resumes a task whose process was killed and drives it to the end',
    async () => {
      const orphaned = pool.worker('orphaned', {
        redisUrl: redis!.url,
        prefix,
        taskId: 'orphan-1',
        flow: 'booking',
        action: 'run',
        hangModelTurn: 2,
        lease: { ttlMs: scaled(500) },
      });
      await orphaned.waitFor('AT model-call');
      await orphaned.kill();
      await leaseExpired(client, prefix, 'orphan-1');
      const redisArgs = ['--host', './examples/booking/host.ts', '--store', 'redis', '--prefix', prefix];
      const env = { REDIS_URL: redis!.url };

      const running = await tasks(['list', '--state', 'running', ...redisArgs], env);
      expect(running.out).toMatch(/^orphan-1\s+running\s+thinking\s+r\d+\s+E17@acme/m);
      const recovered = await tasks(['recover', ...redisArgs], env);
      expect(recovered.code).toBe(0);
      expect(recovered.out.split('\n')).toEqual([
        'resumed 1: orphan-1',
        'busy 0: -',
        'quarantined 0',
        'catalog mismatch 0',
        'expired confirmations 0',
        'orphan-1: done (goal_met)',
      ]);
      const services = new RedisBookingService({ client, prefix });
      expect((await services.bookings()).map((b) => `${b.bookingId} ${b.roomId} ${b.requesterId}`)).toEqual([
        'B204 R7 E17',
      ]);
      const again = await tasks(['recover', '--json', ...redisArgs], env);
      expect(JSON.parse(again.out)).toEqual({
        report: { resumed: [], busy: [], quarantined: [], catalogMismatch: [], expired: 0 },
        settled: [],
      });
    },
    scaled(40_000),
  );
});
