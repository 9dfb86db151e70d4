/**
 * `RedisStore.changes`: word of every task's saves, from any process, by Redis pub/sub. The save script publishes
 * "<revision> <audit length> <transcript length>" on the task's channel (`RedisKeys.live`) in the same atomic step
 * as the save, so no save goes unannounced. This side keeps one subscriber connection per store (opened with the
 * first watch), subscribed to the channels of the tasks someone watches here.
 *
 * Why pub/sub and not a Redis Stream of notifications: the journals are the source of truth and are numbered, so a
 * notification needs neither order nor durability, only to wake a reader who then reads the journal from where it
 * stands; that gives the order, and no gap and no duplicate, by itself. Pub/sub costs nothing when nobody listens
 * and keeps nothing in Redis. What it can lose (messages while the subscriber is disconnected, or before a
 * subscription is confirmed) is covered by a `'resync'` to every listener once the subscription is (again)
 * confirmed, and by `TaskWatch.live` being false meanwhile, so callers poll.
 *
 * The same connection carries other channels' raw messages (`listen`): the live model text of tasks driven in
 * another process (`redisLiveMessages.ts`), so that a process watching tasks holds one subscriber connection.
 */
import type { Cluster, Redis } from 'ioredis';
import { ChangeListeners } from '../changeListeners.js';
import type { TaskChange, TaskChanges, TaskWatch } from '../taskStore.js';
import { isCluster } from './redisConnection.js';

export class RedisTaskChanges implements TaskChanges {
  private subscriber: Redis | Cluster | null = null;
  private readonly listeners: ChangeListeners;
  /** Channel -> task id, for every watched task. */
  private readonly channels = new Map<string, string>();
  /** Channels whose subscription the current connection confirmed. */
  private readonly confirmed = new Set<string>();
  /** Channels listened to raw (`listen`), with their handler. */
  private readonly raw = new Map<string, (message: string) => void>();
  private closed = false;

  constructor(
    /** The store's client; the subscriber is a duplicate of it (a subscribed connection can do nothing else). */
    private readonly client: Redis | Cluster,
    /** The task's channel. */
    private readonly channelOf: (taskId: string) => string,
  ) {
    this.listeners = new ChangeListeners({
      first: (taskId) => this.subscribe(taskId),
      last: (taskId) => this.unsubscribe(taskId),
      live: (taskId) => this.subscriber?.status === 'ready' && this.confirmed.has(this.channelOf(taskId)),
    });
  }

  watch(taskId: string, listener: (change: TaskChange) => void): TaskWatch {
    if (this.closed) return { live: false, stop() {} };
    return this.listeners.watch(taskId, listener);
  }

  /**
   * Calls `onMessage` with each message published on `channel` (one handler per channel; subscribed again after
   * every reconnect, and what was published meanwhile is lost) until the returned function is called.
   */
  listen(channel: string, onMessage: (message: string) => void): () => void {
    if (this.closed) return () => {};
    this.raw.set(channel, onMessage);
    const sub = this.connection();
    if (sub.status === 'ready') void sub.subscribe(channel).catch(() => {});
    return () => {
      if (this.raw.get(channel) !== onMessage) return;
      this.raw.delete(channel);
      if (this.subscriber?.status === 'ready') void this.subscriber.unsubscribe(channel).catch(() => {});
    };
  }

  /** Closes the subscriber connection; later watches are never live (callers poll). */
  close(): void {
    this.closed = true;
    this.raw.clear();
    this.confirmed.clear();
    this.subscriber?.disconnect();
    this.subscriber = null;
  }

  private connection(): Redis | Cluster {
    if (this.subscriber) return this.subscriber;
    const client = this.client;
    // Subscriptions are renewed here on every (re)connect, followed by a resync, so ioredis's own renewal is off.
    const sub = isCluster(client)
      ? client.duplicate(undefined, { redisOptions: { ...client.options.redisOptions, autoResubscribe: false } })
      : client.duplicate({ autoResubscribe: false, enableAutoPipelining: false });
    sub.on('error', () => {});
    sub.on('close', () => this.confirmed.clear());
    sub.on('ready', () => {
      this.confirmed.clear();
      for (const taskId of this.channels.values()) this.confirm(taskId);
      for (const channel of this.raw.keys()) void sub.subscribe(channel).catch(() => {});
    });
    sub.on('message', (channel: string, message: string) => this.received(channel, message));
    this.subscriber = sub;
    return sub;
  }

  private subscribe(taskId: string): void {
    const channel = this.channelOf(taskId);
    this.channels.set(channel, taskId);
    const sub = this.connection();
    // Not ready yet: the 'ready' handler subscribes every watched channel.
    if (sub.status === 'ready') this.confirm(taskId);
  }

  /** Subscribes the task's channel, then tells its listeners to read what they may have missed meanwhile. */
  private confirm(taskId: string): void {
    const channel = this.channelOf(taskId);
    const sub = this.subscriber;
    if (!sub) return;
    sub.subscribe(channel).then(
      () => {
        if (this.subscriber !== sub || this.channels.get(channel) !== taskId) return;
        this.confirmed.add(channel);
        this.listeners.notify({ kind: 'resync', taskId });
      },
      // Left unconfirmed: the watch is not live (its caller polls) until the next reconnect subscribes again.
      () => {},
    );
  }

  private unsubscribe(taskId: string): void {
    const channel = this.channelOf(taskId);
    this.channels.delete(channel);
    this.confirmed.delete(channel);
    if (this.subscriber?.status === 'ready') void this.subscriber.unsubscribe(channel).catch(() => {});
  }

  private received(channel: string, message: string): void {
    const raw = this.raw.get(channel);
    if (raw) {
      try {
        raw(message);
      } catch {
        // A listener's failure is its own.
      }
      return;
    }
    const taskId = this.channels.get(channel);
    if (taskId === undefined) return;
    const [revision, audit, transcript] = message.split(' ').map(Number);
    if (![revision, audit, transcript].every((n) => Number.isSafeInteger(n))) {
      // Not ours to parse (another version's format): still a reason to read.
      this.listeners.notify({ kind: 'resync', taskId });
      return;
    }
    this.listeners.notify({ kind: 'saved', taskId, revision: revision!, audit: audit!, transcript: transcript! });
  }
}
