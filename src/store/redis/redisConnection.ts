/**
 * The ioredis client the store creates for itself, configured so that a Redis that is down or unreachable gives
 * an error within seconds instead of queueing commands forever, and the mapping of client errors to store errors
 * (`toStoreError`, applied to every call by `redisCall`).
 */
import type { Cluster, Redis } from 'ioredis';
import { ioredis } from '../../peers/ioredis.js';
import { AgentError, CorruptTaskError, ProcessOverloadedError, StoreUnavailableError } from '../../errors.js';
import { longestBlockSince, watchLoopLag } from '../../runtime/loopLag.js';

/** Bounds of the store's own client. */
export interface RedisClientBounds {
  /** A command (including its wait for a connection) fails after this long. Default 3000. */
  commandTimeoutMs?: number;
  /** One TCP connect attempt gives up after this long. Default 1000. */
  connectTimeoutMs?: number;
}

/** Where the store connects when given neither a client, a url nor REDIS_URL. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/**
 * A client for `url` with bounded failure: it reconnects forever in the background with capped backoff, but a
 * command fails within about a second when Redis is down, and within `commandTimeoutMs` in any case.
 */
export function createRedisClient(url: string, bounds: RedisClientBounds = {}): Redis {
  const client = new ioredis.Redis(url, {
    // ioredis fails the queued commands every (maxRetriesPerRequest + 1) reconnection attempts, so this and the
    // cap on the delay bound how long a command waits for a Redis that is down: about 2 x 400 ms.
    maxRetriesPerRequest: 1,
    retryStrategy: (times) => Math.min(50 * 2 ** (times - 1), 400),
    connectTimeout: bounds.connectTimeoutMs ?? 1000,
    commandTimeout: bounds.commandTimeoutMs ?? 3000,
    // Kept on so commands issued before the first connect completes wait for it (bounded by the above).
    enableOfflineQueue: true,
    // A save whose connection dropped may or may not have run. Resending it silently could report our own write
    // as a revision conflict; failing it (as unavailable) lets the caller retry and check what landed.
    autoResendUnfulfilledCommands: false,
    // Group commit: the saves (and reads) of many tasks issued in the same tick go to Redis as one pipeline, one
    // write on the socket; each is still its own script call with its own compare-and-set and its own result.
    enableAutoPipelining: true,
  });
  // Failures reach callers as rejected commands; without a listener ioredis would log every reconnect failure.
  client.on('error', () => {});
  return client;
}

/** Whether `client` is an ioredis Cluster (it takes the same commands; scans and messages differ). */
export function isCluster(client: Redis | Cluster): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true;
}

/**
 * host:port (or socket path) of a client, without credentials, for error messages; for a cluster, its masters (or,
 * before it connected, the nodes it was given), read when the message is made.
 */
export function describeRedis(client: Redis | Cluster): string | (() => string) {
  if (isCluster(client)) {
    return () => {
      const masters = client
        .nodes('master')
        .map((node) => `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`);
      const startup = (client as unknown as { startupNodes?: { host?: string; port?: number }[] }).startupNodes ?? [];
      const nodes =
        masters.length > 0 ? masters : startup.map((node) => `${node.host ?? '127.0.0.1'}:${node.port ?? 6379}`);
      return `the Redis Cluster of ${nodes.join(', ') || 'no known node'}`;
    };
  }
  const { host, port, path } = client.options;
  return path ? path : `${host ?? '127.0.0.1'}:${port ?? 6379}`;
}

/** How long a scan waits for a cluster client to learn its slots. */
const CLUSTER_READY_MS = 5_000;

/**
 * The nodes a scan must visit to see every key: every master of a cluster, or the one server. A cluster client that
 * has not learned its slots yet is waited for (a scan of its seed node alone would miss the other masters' keys).
 */
export async function scanNodes(client: Redis): Promise<Redis[]> {
  const any = client as Redis | Cluster;
  if (!isCluster(any)) return [client];
  if (any.status !== 'ready') {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        any.off('ready', ready);
        reject(new Error(`the cluster did not report its slots within ${CLUSTER_READY_MS} ms (status ${any.status})`));
      }, CLUSTER_READY_MS);
      const ready = () => {
        clearTimeout(timer);
        resolve();
      };
      any.once('ready', ready);
      if (any.status === 'wait') void any.connect().catch(() => {});
    });
  }
  return any.nodes('master');
}

/**
 * The error to throw for a failed Redis call: store errors pass through; WRONGTYPE on a task's own key means the
 * task's data is unusable (CorruptTaskError naming `key`); anything else means the store is unavailable.
 */
export function toStoreError(
  error: unknown,
  where: string,
  action: string,
  task?: { taskId: string; key: string },
): Error {
  if (error instanceof AgentError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (task && message.includes('WRONGTYPE')) {
    return new CorruptTaskError(task.taskId, `Redis key ${task.key} holds a value of the wrong type for this store`, {
      cause: error,
    });
  }
  if (error instanceof Error && error.name === 'ReplyError') {
    return new StoreUnavailableError(`Redis at ${where} refused the ${action}: ${message}`, { cause: error });
  }
  return new StoreUnavailableError(
    `Redis at ${where} could not be reached for the ${action} (${message}); check that it is running and that ` +
      "REDIS_URL or the store's url option points to it",
    { cause: error },
  );
}

/** Runs one Redis call, mapping its failure to a store error (made by `redisCall`). */
export type RedisCall = <T>(action: string, fn: () => Promise<T>, task?: { taskId: string; key: string }) => Promise<T>;

/** The store's RedisCall: refused once `isClosed()`; any failure becomes a store error (see `toStoreError`). */
export function redisCall(where: string | (() => string), isClosed: () => boolean): RedisCall {
  watchLoopLag();
  return async <T>(action: string, fn: () => Promise<T>, task?: { taskId: string; key: string }): Promise<T> => {
    if (isClosed()) throw new StoreUnavailableError(`the store was closed before the ${action}`);
    const sent = performance.now();
    try {
      return await fn();
    } catch (error) {
      // Timed out while the loop was blocked (for a good part of the wait): the store is not the one that failed.
      const blockedMs = isTimeout(error) ? longestBlockSince(sent) : 0;
      if (blockedMs >= Math.max(OVERLOAD_BLOCK_MS, (performance.now() - sent) / 3))
        throw new ProcessOverloadedError(blockedMs, action, { cause: error });
      throw toStoreError(error, typeof where === 'string' ? where : where(), action, task);
    }
  };
}

/** A block of the loop this long, during a command that timed out, makes the timeout the process's doing. */
const OVERLOAD_BLOCK_MS = 250;

/** ioredis's command timeout ("Command timed out"). */
function isTimeout(error: unknown): boolean {
  return error instanceof Error && /timed out/i.test(error.message);
}
