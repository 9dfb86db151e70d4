/**
 * One cell of the bench: one system running `tasks` tasks of `k` rounds at once, `repeat` times in a row, and
 * what it cost per round. `measureOnRedis` wraps a run with the Redis readings; the systems supply the run.
 */
import type { Redis } from 'ioredis';
import {
  type KeptBytes,
  SentCommands,
  allocatedSince,
  allocationMark,
  bytesWritten,
  commandsBetween,
  cpuMark,
  cpuSince,
  fullGc,
  keptBytes,
  serverStats,
} from './measure.js';

/** `other` is another checkout of this project (`--compare <dir>`), on Redis. */
export type SystemName = 'project' | 'project-memory' | 'other' | 'bare' | 'langgraph';

export const SYSTEM_LABELS: Record<SystemName, string> = {
  project: 'this project, RedisStore',
  'project-memory': 'this project, MemoryStore',
  other: 'other checkout, RedisStore',
  bare: 'bare XState + Redis loop',
  langgraph: 'LangGraph + SqliteSaver',
};

export interface Cell {
  k: number;
  tasks: number;
}

export interface CellRun extends Cell {
  /** Batches of `tasks` tasks run one after the other, so that a cell lasts long enough to measure. */
  repeat: number;
}

export interface CellResult extends CellRun {
  system: SystemName;
  rounds: number;
  wallMs: number;
  roundsPerSecond: number;
  mainCpuUsPerRound: number;
  processCpuUsPerRound: number;
  /** Bytes allocated on the JS heap per round (`allocatedSince`), the whole process while the cell ran; null for a peer in its own process. */
  allocatedBytesPerRound: number | null;
  /** Acknowledged saves (this project: onSaved; the bare loop: compare-and-sets; LangGraph: checkpoints). */
  savesPerRound: number | null;
  /** Payload kept per round: Redis keys under the cell's prefix, or the SQLite file's growth. */
  storedBytesPerRound: number | null;
  redis: RedisCost | null;
}

export interface RedisCost {
  /** Commands the server ran (INFO commandstats delta; commands inside Lua scripts count; other clients' too). */
  serverCommandsPerRound: number;
  /** Commands the system's client sent (a script call counts once). */
  sentCommandsPerRound: number;
  sentBytesPerRound: number;
  /** MEMORY USAGE of the keys per round. */
  memoryBytesPerRound: number;
  /** Clients connected to Redis other than the bench's own: their commands inflate the server count. */
  otherClients: number;
}

/** The bench's Redis connections: `client` carries a system's traffic (counted), `admin` the readings. */
export interface RedisLink {
  client: Redis;
  sent: SentCommands;
  admin: Redis;
  /** Connections the bench holds itself (for `otherClients`). */
  ownConnections: number;
}

export interface Drive {
  rounds: number;
  saves: number;
}

/** Runs `drive` and measures it: wall, CPU, Redis commands and bytes, then the bytes kept under `root`. */
export async function measureOnRedis(
  system: SystemName,
  run: CellRun,
  link: RedisLink,
  root: string,
  drive: () => Promise<Drive>,
): Promise<CellResult> {
  const before = await serverStats(link.admin);
  const bytesBefore = bytesWritten(link.client);
  link.sent.count = 0;
  link.sent.counting = true;
  const timed = await timeDrive(drive);
  link.sent.counting = false;
  const after = await serverStats(link.admin);
  const kept: KeptBytes = await keptBytes(link.admin, root);
  const { rounds } = timed;
  return {
    ...cellFigures(system, run, timed),
    storedBytesPerRound: kept.payload / rounds,
    redis: {
      serverCommandsPerRound: commandsBetween(before, after) / rounds,
      sentCommandsPerRound: link.sent.count / rounds,
      sentBytesPerRound: (bytesWritten(link.client) - bytesBefore) / rounds,
      memoryBytesPerRound: kept.memory / rounds,
      otherClients: Math.max(0, Math.max(before.clients, after.clients) - link.ownConnections),
    },
  };
}

/** Runs `drive` without a Redis (the memory store). */
export async function measureInProcess(
  system: SystemName,
  run: CellRun,
  drive: () => Promise<Drive>,
): Promise<CellResult> {
  return { ...cellFigures(system, run, await timeDrive(drive)), storedBytesPerRound: null, redis: null };
}

/**
 * Times `drive`, after a full collection: the garbage the previous system's cell left behind (a MemoryStore cell
 * leaves megabytes) is not charged to the next one. What a run collects of its own garbage still counts.
 */
async function timeDrive(drive: () => Promise<Drive>) {
  fullGc();
  const allocations = allocationMark();
  const cpu = cpuMark();
  const start = performance.now();
  const { rounds, saves } = await drive();
  const wallMs = performance.now() - start;
  return { rounds, saves, wallMs, cpu: cpuSince(cpu), allocated: allocatedSince(allocations) };
}

function cellFigures(system: SystemName, run: CellRun, timed: Awaited<ReturnType<typeof timeDrive>>) {
  const { rounds, saves, wallMs, cpu, allocated } = timed;
  return {
    system,
    ...run,
    rounds,
    wallMs,
    roundsPerSecond: rounds / (wallMs / 1000),
    mainCpuUsPerRound: cpu.main / rounds,
    processCpuUsPerRound: cpu.process / rounds,
    allocatedBytesPerRound: allocated / rounds,
    savesPerRound: saves / rounds,
  };
}
