/**
 * Measurement helpers of the bench: CPU of the main thread and of the process, Redis commands (server-side from
 * INFO commandstats, client-side by counting what the client sends), bytes written to the socket and bytes kept
 * under a key prefix, medians and percentiles.
 */
import { readFileSync } from 'node:fs';
import type { EventLoopUtilization } from 'node:perf_hooks';
import { GCProfiler, getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Redis } from 'ioredis';

// --- CPU -------------------------------------------------------------------------------------------------------

/** Where main-thread CPU comes from: the kernel's per-thread run time, or (elsewhere) the event loop's busy time. */
export type MainCpuSource = 'schedstat' | 'event-loop';

const SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`;

/** For `settle`: a cell nobody ever changes, so a wait on it sleeps for its whole timeout. */
const NEVER_CHANGED = new Int32Array(new SharedArrayBuffer(4));

/**
 * Makes the kernel bring the main thread's run time up to date: schedstat's figure for a thread that is running
 * is the one of its last stop (a sleep, a preemption, or the scheduler tick: 4 ms at HZ=250), so read without
 * this it counts the CPU used before a mark, since the thread's last stop, and leaves out the tail after it.
 * A 50 µs sleep is a stop that costs no CPU (measured: a 3 ms busy loop then reads 3.00-3.02 ms, against
 * 3.9-6.1 ms without it); its wall time must be kept out of the windows timed around the mark.
 */
function settle(): void {
  Atomics.wait(NEVER_CHANGED, 0, 0, 0.05);
}

/** Run time of this process's main thread in µs (Linux), or null where the kernel does not expose it. */
function schedstatUs(): number | null {
  try {
    settle();
    return Number(readFileSync(SCHEDSTAT, 'utf8').split(' ')[0]) / 1000;
  } catch {
    return null;
  }
}

export const MAIN_CPU_SOURCE: MainCpuSource = schedstatUs() === null ? 'event-loop' : 'schedstat';

export interface CpuMark {
  main: number | null;
  process: NodeJS.CpuUsage;
  loop: EventLoopUtilization;
}

export function cpuMark(): CpuMark {
  // The main thread's last: what runs after its read (the read's own tail) is counted in the window.
  const used = process.cpuUsage();
  const loop = performance.eventLoopUtilization();
  return { main: schedstatUs(), process: used, loop };
}

/**
 * CPU used since `mark`, in µs. `main` is the main thread alone (what a second task on the same event loop
 * competes for); `process` adds the other threads (GC helpers, libuv pool, the tsx loader).
 */
export function cpuSince(mark: CpuMark): { main: number; process: number } {
  const used = process.cpuUsage(mark.process);
  const now = schedstatUs();
  const main =
    mark.main !== null && now !== null ? now - mark.main : performance.eventLoopUtilization(mark.loop).active * 1000;
  return { main, process: used.user + used.system };
}

// --- allocations -----------------------------------------------------------------------------------------------

/** A full collection now (`gc()` without needing `node --expose-gc`). */
export const fullGc: () => void =
  (globalThis as { gc?: () => void }).gc ??
  (() => {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  })();

export interface AllocationMark {
  profiler: GCProfiler;
  used: number;
}

/** Starts counting the bytes the JS heap allocates (`allocatedSince`). One mark at a time. */
export function allocationMark(): AllocationMark {
  const profiler = new GCProfiler();
  profiler.start();
  return { profiler, used: getHeapStatistics().used_heap_size };
}

/**
 * Bytes allocated on the JS heap since `mark`: what each collection found in use beyond what the previous one
 * (or the mark) left, plus the growth after the last one. Buffers outside the heap do not count.
 */
export function allocatedSince(mark: AllocationMark): number {
  const end = getHeapStatistics().used_heap_size;
  const { statistics } = mark.profiler.stop();
  let allocated = 0;
  let left = mark.used;
  for (const gc of statistics) {
    allocated += Math.max(0, gc.beforeGC.heapStatistics.usedHeapSize - left);
    left = gc.afterGC.heapStatistics.usedHeapSize;
  }
  return allocated + Math.max(0, end - left);
}

// --- Redis commands --------------------------------------------------------------------------------------------

export interface ServerStats {
  /** Calls per command since the server started (commands run inside Lua scripts included). */
  calls: Map<string, number>;
  /** Clients connected, this one included. */
  clients: number;
}

/** INFO commandstats and clients (read-only). */
export async function serverStats(client: Redis): Promise<ServerStats> {
  const info = await client.info('commandstats', 'clients');
  const calls = new Map<string, number>();
  for (const match of info.matchAll(/cmdstat_(\S+):calls=(\d+)/g)) calls.set(match[1]!, Number(match[2]));
  return { calls, clients: Number(/connected_clients:(\d+)/.exec(info)?.[1] ?? 0) };
}

/** Commands the server ran between two readings, less the INFO call of the first reading. */
export function commandsBetween(before: ServerStats, after: ServerStats): number {
  let total = 0;
  for (const [name, calls] of after.calls) total += calls - (before.calls.get(name) ?? 0);
  return total - 1;
}

/** Counts the commands `client` sends (pipelined and scripted ones each count once) while `counting` is on. */
export class SentCommands {
  count = 0;
  counting = false;

  constructor(client: Redis) {
    const send = client.sendCommand.bind(client);
    client.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
      if (this.counting) this.count += 1;
      return send(...args);
    }) as Redis['sendCommand'];
  }
}

/** Bytes this client has written to its socket so far. */
export function bytesWritten(client: Redis): number {
  return client.stream?.bytesWritten ?? 0;
}

// --- bytes kept ------------------------------------------------------------------------------------------------

export interface KeptBytes {
  /** Sum of the payload: string values, hash fields and values, list elements, stream fields and values, set and sorted set members (+8 per score). */
  payload: number;
  /** Sum of MEMORY USAGE (SAMPLES 0: every element counted) over the same keys: payload plus Redis's overhead. */
  memory: number;
  keys: number;
}

/** What the keys under `{root}` hold (SCAN; each type read whole). */
export async function keptBytes(client: Redis, root: string): Promise<KeptBytes> {
  const keys = await scanKeys(client, root);
  let payload = 0;
  let memory = 0;
  for (let i = 0; i < keys.length; i += 200) {
    const batch = keys.slice(i, i + 200);
    const types = (await exec(batch.reduce((p, key) => p.type(key), client.pipeline()))) as string[];
    const reads = client.pipeline();
    batch.forEach((key, j) => {
      switch (types[j]) {
        case 'string':
          reads.strlen(key);
          break;
        case 'hash':
          reads.hgetallBuffer(key);
          break;
        case 'list':
          reads.lrangeBuffer(key, 0, -1);
          break;
        case 'stream':
          reads.xrangeBuffer(key, '-', '+');
          break;
        case 'zset':
          reads.zrangeBuffer(key, '0', '-1');
          break;
        default:
          reads.smembersBuffer(key);
      }
      reads.memory('USAGE', key, 'SAMPLES', '0');
    });
    const replies = await exec(reads);
    batch.forEach((_, j) => {
      payload += payloadBytes(types[j]!, replies[2 * j]);
      memory += Number(replies[2 * j + 1] ?? 0);
    });
  }
  return { payload, memory, keys: keys.length };
}

function payloadBytes(type: string, reply: unknown): number {
  const size = (value: unknown): number =>
    Buffer.isBuffer(value)
      ? value.length
      : Array.isArray(value)
        ? value.reduce((sum: number, v) => sum + size(v), 0)
        : 0;
  switch (type) {
    case 'string':
      return Number(reply);
    case 'hash':
      return Object.entries(reply as Record<string, Buffer>).reduce(
        (sum, [field, value]) => sum + Buffer.byteLength(field) + value.length,
        0,
      );
    case 'stream':
      // [[id, [field, value, ...]], ...]: the entry ids are Redis's, not the store's payload.
      return (reply as [Buffer, Buffer[]][]).reduce((sum, [, fields]) => sum + size(fields), 0);
    case 'zset':
      return size(reply) + 8 * (reply as unknown[]).length;
    default:
      return size(reply);
  }
}

export async function scanKeys(client: Redis, root: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    // Braces are literal in Redis glob patterns; the bench's prefixes have no glob characters.
    const [next, batch] = await client.scan(cursor, 'MATCH', `${root}:*`, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

/** Deletes every key matching `pattern` (SCAN + UNLINK); returns how many. Never FLUSHALL: the server is shared. */
export async function deleteMatching(client: Redis, pattern: string): Promise<number> {
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) deleted += await client.unlink(...keys);
  } while (cursor !== '0');
  return deleted;
}

async function exec(pipeline: ReturnType<Redis['pipeline']>): Promise<unknown[]> {
  const replies = (await pipeline.exec()) ?? [];
  return replies.map(([error, reply]) => {
    if (error) throw error;
    return reply;
  });
}

// --- statistics ------------------------------------------------------------------------------------------------

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The q-quantile (nearest rank) of `values`. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}
