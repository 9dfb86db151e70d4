/**
 * A throwaway Redis Cluster for tests: `masters` redis-servers with `--cluster-enabled yes` on free ports (and their
 * bus ports, +10000), in a temporary directory, joined by `redis-cli --cluster create` with no replicas. Stopped by
 * pid, and the directory removed, in `stop()`.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { freePort } from './redis.js';
import { scaled } from './timeScale.js';

const run = promisify(execFile);

export interface TestCluster {
  ports: number[];
  /** A new cluster client (closed by `stop()`); `forBullmq` as BullMQ wants it (no limit on retries per request). */
  connect(options?: { forBullmq?: boolean }): Cluster;
  /** A client on each master, by port (closed by `stop()`). */
  masters(): Redis[];
  stop(): Promise<void>;
}

/** A port that is free, with its cluster bus port (+10000) free as well. */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port > 55_000 || taken.has(port)) continue;
    const bus = await freePort().then(() => port + 10_000);
    if (await isFree(bus)) return port;
  }
}

async function isFree(port: number): Promise<boolean> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export async function startRedisCluster(masters = 3): Promise<TestCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'redis-cluster-'));
  const taken = new Set<number>();
  const ports: number[] = [];
  for (let i = 0; i < masters; i++) {
    const port = await clusterPort(taken);
    taken.add(port);
    ports.push(port);
  }
  const children: ChildProcess[] = ports.map((port) =>
    spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
      ],
      { stdio: 'ignore' },
    ),
  );
  const clients: (Redis | Cluster)[] = [];
  const stop = async () => {
    for (const client of clients) client.disconnect();
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null || !child.pid) return resolve();
            child.once('exit', () => resolve());
            process.kill(child.pid, 'SIGTERM');
          }),
      ),
    );
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) await waitForPing(port);
    await run(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes'],
      { timeout: scaled(30_000) },
    );
    for (const port of ports) await waitForClusterOk(port);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    ports,
    connect(options = {}) {
      const redisOptions = options.forBullmq
        ? { maxRetriesPerRequest: null }
        : { maxRetriesPerRequest: 1, commandTimeout: scaled(3_000) };
      const cluster = new Cluster(
        ports.map((port) => ({ host: '127.0.0.1', port })),
        { redisOptions, enableAutoPipelining: !options.forBullmq },
      );
      cluster.on('error', () => {});
      clients.push(cluster);
      return cluster;
    },
    masters() {
      return ports.map((port) => {
        const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
        client.on('error', () => {});
        clients.push(client);
        return client;
      });
    },
    stop,
  };
}

async function waitForPing(port: number): Promise<void> {
  const deadline = Date.now() + scaled(10_000);
  for (;;) {
    const client = new Redis({
      host: '127.0.0.1',
      port,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      lazyConnect: true,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      if ((await client.ping()) === 'PONG') return;
    } catch {
      if (Date.now() > deadline)
        throw new Error(`redis-server on port ${port} did not answer within ${scaled(10_000)} ms`);
    } finally {
      client.disconnect();
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function waitForClusterOk(port: number): Promise<void> {
  const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  try {
    const deadline = Date.now() + scaled(20_000);
    while (!String(await client.cluster('INFO')).includes('cluster_state:ok')) {
      if (Date.now() > deadline)
        throw new Error(`the cluster node on port ${port} is not ok after ${scaled(20_000)} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    client.disconnect();
  }
}
