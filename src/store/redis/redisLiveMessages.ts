/**
 * `RedisStore.liveMessages`: the live model text of a task, from the process that drives it (a worker) to the
 * viewers connected to another process (the API that serves the event stream), by Redis pub/sub on the task's text
 * channel (`RedisKeys.text`). Ephemeral: nothing is stored but a short-lived mark of interest.
 *
 * Nothing is published while nobody watches. A watching process sets the task's mark (`RedisKeys.textWatched`, a
 * string with a `markTtlMs` expiry) and refreshes it every third of that while a viewer is connected; the driving
 * process asks for the mark (one EXISTS) when a turn begins and again at most every `checkMs` while the turn's
 * text is being written, and publishes only while it is there. Unwatched, a streamed turn costs one EXISTS per
 * attempt (plus one per `checkMs` of streaming), and no message. When the last viewer of a process leaves, the mark
 * is left to expire (another process may be watching too): a worker publishes for at most `markTtlMs` more.
 *
 * Messages go through the subscriber connection of the task changes (`RedisTaskChanges.listen`). Each carries the
 * id of the process that published it, so a process that both drives and watches a task (a worker in the API
 * process) does not see its own text twice.
 */
import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { LiveMessages } from '../taskStore.js';
import type { RedisTaskChanges } from './redisTaskChanges.js';

export interface LiveMessageTimings {
  /** How long a watching process's mark lives without a refresh (ms). Default 15 s. */
  markTtlMs?: number;
  /** How often the driving process asks again whether a task is watched, while it writes (ms). Default 1 s. */
  checkMs?: number;
}

interface Check {
  wanted: boolean;
  at: number;
  pending: boolean;
}

/** Past this many tasks checked, entries older than a check are dropped. */
const MAX_CHECKS = 10_000;

export class RedisLiveMessages implements LiveMessages {
  /** This process, to recognise its own messages. */
  private readonly self = randomUUID();
  private readonly watchers = new Map<
    string,
    { listeners: Set<(message: unknown) => void>; stop: () => void; refresh: NodeJS.Timeout }
  >();
  private readonly checks = new Map<string, Check>();
  private readonly markTtlMs: number;
  private readonly checkMs: number;
  private closed = false;
  /** Counters, for tests and measurements: marks set, checks asked, messages published and received. */
  readonly counts = { marks: 0, checks: 0, published: 0, received: 0 };

  constructor(
    private readonly client: Redis | Cluster,
    private readonly changes: RedisTaskChanges,
    private readonly keys: { channel(taskId: string): string; mark(taskId: string): string },
    timings: LiveMessageTimings = {},
  ) {
    this.markTtlMs = Math.max(1_000, timings.markTtlMs ?? 15_000);
    this.checkMs = Math.max(10, timings.checkMs ?? 1_000);
  }

  watch(taskId: string, listener: (message: unknown) => void): () => void {
    if (this.closed) return () => {};
    let entry = this.watchers.get(taskId);
    if (!entry) {
      const stop = this.changes.listen(this.keys.channel(taskId), (raw) => this.received(taskId, raw));
      this.mark(taskId);
      const refresh = setInterval(() => this.mark(taskId), Math.floor(this.markTtlMs / 3));
      refresh.unref();
      entry = { listeners: new Set(), stop, refresh };
      this.watchers.set(taskId, entry);
    }
    const own = (message: unknown) => listener(message);
    entry.listeners.add(own);
    return () => {
      const current = this.watchers.get(taskId);
      if (!current?.listeners.delete(own) || current.listeners.size > 0) return;
      this.watchers.delete(taskId);
      clearInterval(current.refresh);
      current.stop();
    };
  }

  wanted(taskId: string): boolean {
    if (this.closed) return false;
    const now = performance.now();
    let check = this.checks.get(taskId);
    if (!check) {
      if (this.checks.size >= MAX_CHECKS) this.prune(now);
      this.checks.set(taskId, (check = { wanted: false, at: 0, pending: false }));
    }
    if (!check.pending && now - check.at >= this.checkMs) {
      check.pending = true;
      this.counts.checks += 1;
      const asked = check;
      this.client.exists(this.keys.mark(taskId)).then(
        (n) => {
          asked.wanted = n > 0;
          asked.at = performance.now();
          asked.pending = false;
        },
        () => {
          // Unknown: nothing is published until a check answers.
          asked.wanted = false;
          asked.at = performance.now();
          asked.pending = false;
        },
      );
    }
    return check.wanted;
  }

  publish(taskId: string, message: object): void {
    if (this.closed) return;
    let text: string;
    try {
      text = JSON.stringify({ from: this.self, message });
    } catch {
      return;
    }
    this.counts.published += 1;
    this.client.publish(this.keys.channel(taskId), text).catch(() => {});
  }

  /** Stops marking and listening; later calls do nothing. (The subscriber is closed with the task changes.) */
  close(): void {
    this.closed = true;
    for (const entry of this.watchers.values()) {
      clearInterval(entry.refresh);
      entry.stop();
    }
    this.watchers.clear();
    this.checks.clear();
  }

  private mark(taskId: string): void {
    if (this.closed) return;
    this.counts.marks += 1;
    this.client.set(this.keys.mark(taskId), '1', 'PX', this.markTtlMs).catch(() => {});
  }

  private received(taskId: string, raw: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return;
    }
    if (typeof parsed !== 'object' || parsed === null) return;
    const { from, message } = parsed as { from?: unknown; message?: unknown };
    if (from === this.self || message === undefined) return;
    this.counts.received += 1;
    for (const listener of [...(this.watchers.get(taskId)?.listeners ?? [])]) {
      try {
        listener(message);
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  private prune(now: number): void {
    for (const [taskId, check] of this.checks) {
      if (!check.pending && now - check.at >= this.checkMs) this.checks.delete(taskId);
    }
  }
}
