/**
 * A redis-server of the test's own, durable (AOF with fsync on every write, no RDB snapshots) on a free port and
 * in a temporary directory, that the test can SIGKILL and start again on the same port and directory.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './redis.js';
import { scaled } from './timeScale.js';

/** True when `redis-server` is on PATH. */
export const hasRedisServer = spawnSync('redis-server', ['--version']).status === 0;

export class DurableRedis {
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();

  private constructor(
    readonly port: number,
    readonly dir: string,
  ) {}

  /** Starts a server on a free port in a new temporary directory. */
  static async start(): Promise<DurableRedis> {
    const server = new DurableRedis(await freePort(), await mkdtemp(join(tmpdir(), 'statechart-redis-')));
    await server.start();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** (Re)starts the server on the same port and directory; resolves when it answers PING (data loaded). */
  async start(): Promise<void> {
    if (this.child) throw new Error('redis-server is already running');
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--dir',
        this.dir,
        '--appendonly',
        'yes',
        '--appendfsync',
        'always',
        '--save',
        '',
      ],
      { stdio: 'ignore' },
    );
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    child.once('exit', () => {
      if (this.child === child) this.child = null;
    });
    const deadline = Date.now() + scaled(10_000);
    while (!(await this.answers())) {
      if (!this.child) throw new Error(`redis-server on port ${this.port} exited during start`);
      if (Date.now() > deadline)
        throw new Error(`redis-server on port ${this.port} did not answer within ${scaled(10_000)} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** SIGKILL by pid (no shutdown, no final fsync); resolves when the process is gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child?.pid) return;
    process.kill(child.pid, 'SIGKILL');
    await this.exited;
  }

  /** Kills the server if it runs and deletes its directory. */
  async destroy(): Promise<void> {
    await this.kill();
    await rm(this.dir, { recursive: true, force: true });
  }

  private async answers(): Promise<boolean> {
    const client = new Redis(this.url, {
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: 500,
      lazyConnect: true,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      return (await client.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      client.disconnect();
    }
  }
}
