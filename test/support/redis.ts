/**
 * Redis for tests. Uses REDIS_URL (default redis://127.0.0.1:6379) when it answers. Otherwise it starts a throwaway
 * `redis-server` on a free port (stopped by pid when the tests end). When that binary is missing too, the Redis
 * tests skip with a message saying what to install, except under CI=true, where Redis tests must run: there it
 * fails loudly. Tests never FLUSHALL: each uses a fresh key prefix and deletes its keys afterwards.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { scaled } from './timeScale.js';

export interface TestRedis {
  url: string;
  /** A new client on `url` (fails fast if Redis goes away); closed by `stop()`. */
  connect(): Redis;
  /** A prefix no other test uses. */
  freshPrefix(): string;
  /** Deletes every key under `{prefix}` (SCAN + UNLINK); returns how many. */
  deleteKeys(prefix: string): Promise<number>;
  /** Closes the clients and stops the redis-server this helper started, if any. */
  stop(): Promise<void>;
}

const INSTALL_HINT =
  'Install Redis 7 so `redis-server` is on PATH (Debian/Ubuntu: `sudo apt-get install redis-server`; macOS: ' +
  '`brew install redis`), or set REDIS_URL to a running Redis.';

/** The test Redis, or null (after a console warning) when none can be had outside CI. */
export async function useTestRedis(): Promise<TestRedis | null> {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  if (await answers(url)) return testRedis(url, null);
  const server = await startRedisServer().catch((error: Error) => error);
  if (server instanceof Error) {
    if (process.env.CI === 'true') {
      throw new Error(
        `CI=true: Redis tests must run, but Redis at ${url} does not answer and ${server.message}. ${INSTALL_HINT}`,
      );
    }
    console.warn(`Skipping Redis tests: no Redis at ${url} and ${server.message}. ${INSTALL_HINT}`);
    return null;
  }
  return testRedis(server.url, server);
}

export interface RedisServer {
  url: string;
  pid: number;
  /** Stops this server (SIGTERM by pid) and waits for it to exit. */
  stop(): Promise<void>;
}

/**
 * Starts `redis-server` on `port` (default: a free one), keeping nothing on disk. Rejects if it is not installed
 * or does not answer within 5 s.
 */
export async function startRedisServer(port?: number): Promise<RedisServer> {
  port ??= await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const failed = new Promise<never>((_, reject) =>
    child.once('error', (error) => reject(new Error(`redis-server could not be started (${error.message})`))),
  );
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + scaled(5_000);
  await Promise.race([
    failed,
    (async () => {
      while (!(await answers(url))) {
        if (Date.now() > deadline) {
          stopChild(child);
          throw new Error(`redis-server on port ${port} did not answer within ${scaled(5_000)} ms`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })(),
  ]);
  return {
    url,
    pid: child.pid!,
    async stop() {
      stopChild(child);
      await exited;
    },
  };
}

/** A TCP port nothing listens on (at the time of the call). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

function stopChild(child: ChildProcess): void {
  if (child.exitCode === null && child.signalCode === null && child.pid) process.kill(child.pid, 'SIGTERM');
}

async function answers(url: string): Promise<boolean> {
  const client = quickClient(url);
  try {
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/** Its limits only report a Redis that does not answer: scaled, so a loaded machine does not fail a command. */
function quickClient(url: string): Redis {
  const client = new Redis(url, {
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: scaled(1000),
    commandTimeout: scaled(2000),
  });
  client.on('error', () => {});
  return client;
}

function testRedis(url: string, server: RedisServer | null): TestRedis {
  const clients: Redis[] = [];
  const admin = quickClient(url);
  clients.push(admin);
  return {
    url,
    connect() {
      const client = new Redis(url, {
        maxRetriesPerRequest: 1,
        connectTimeout: scaled(1000),
        commandTimeout: scaled(3000),
      });
      client.on('error', () => {});
      clients.push(client);
      return client;
    },
    freshPrefix: () => `test-${randomBytes(6).toString('hex')}`,
    async deleteKeys(prefix) {
      let cursor = '0';
      let deleted = 0;
      // Braces are literal in Redis glob patterns; the random prefix has no glob characters.
      // Also a bucketed store's keys ({prefix{<n>}:…).
      const match = `{${prefix}[}{]*`;
      do {
        const [next, keys] = await admin.scan(cursor, 'MATCH', match, 'COUNT', 500);
        cursor = next;
        if (keys.length > 0) deleted += await admin.unlink(...keys);
      } while (cursor !== '0');
      return deleted;
    },
    async stop() {
      for (const client of clients) client.disconnect();
      await server?.stop();
    },
  };
}
