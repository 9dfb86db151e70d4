/**
 * Dispatch on BullMQ (`statechart-agent/bullmq`): the jobs of `../orchestrator/dispatch.ts` in one BullMQ queue on
 * the Redis the store uses (or another). BullMQ gives durable jobs, deduplication by job id, delayed jobs for
 * deadlines, retries with backoff, and the detection of stalled jobs: a worker that died stops renewing its jobs'
 * locks, and another worker gets them. Under that at-least-once delivery the task lease and its fence keep each task
 * driven by one process at a time; the inbox cursor keeps each event applied once.
 *
 * A recorded event also wakes the process that drives its task right away: one PUBLISH on a channel of the queue
 * (a signal only; the event itself is in the inbox, and its job is in the queue), read by one subscriber connection
 * per process. BullMQ's own event stream carries every job's every state change, and reading it in each worker
 * would cost every worker for every job.
 */
import type { ConnectionOptions, Job, Queue, Worker } from 'bullmq';
import { bullmq } from '../peers/bullmq.js';
import type { Redis } from 'ioredis';
import { AgentError, HostRequestError, QueueFullError } from '../errors.js';
import type { AgentInput } from '../../machines/context.js';
import {
  type Dispatch,
  type DispatchWorker,
  type DispatchWorkerOptions,
  type DriveJob,
  type DriveOutcome,
  type EnqueueOptions,
  type QueueBacklog,
  type QueueDepth,
  driveJobProblem,
  jobIdOf,
} from '../orchestrator/dispatch.js';
import { INBOX_REPLIES_KEPT } from '../store/envelope.js';

export interface BullmqDispatchOptions {
  /**
   * How BullMQ connects: ioredis options (`{ host, port }`...) or a client (a `Redis`, or a `Cluster` with a queue
   * `prefix` in braces, such as "{bull}"). Each part opens its own connections.
   */
  connection: ConnectionOptions;
  /** The queue's name. Default "statechart-agent". Every process that shares the tasks uses the same. */
  queueName?: string;
  /** BullMQ's key prefix. Default "bull". On a Redis Cluster it must be a hash tag, such as "{bull}". */
  prefix?: string;
  /** `start` throws QueueFullError (HTTP 503) while this many jobs or more wait. Default: no limit. */
  maxQueueDepth?: number;
  /** How long an API call waits for the reply to its event (then EventPendingError). Default 10 s. */
  replyTimeoutMs?: number;
  /**
   * How many unapplied events a task's inbox may hold (then QueueFullError, HTTP 429). Default and most: 32, the
   * replies a task keeps, so that every caller finds its reply.
   */
  inboxLimit?: number;
  /**
   * How long a job's lock lasts without renewal (default 30 s): a worker that dies gives its jobs up after about
   * this much, and another worker's stalled-job check (every `stalledIntervalMs`, default 30 s) takes them.
   */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
  /**
   * How often a job is tried (a busy task, a handed-back one, a store failure) before it is dropped. Default 30. A job
   * a worker cannot take for lack of its task's tools (`catalog_mismatch`, written to the job's log) or for lack of
   * room does not use up a try: it waits for a worker that can.
   */
  attempts?: number;
  /** The wait before each new try, and before a job put back for later. Default 1 s. */
  retryDelayMs?: number;
  /** Errors BullMQ reports (connection trouble, a job that failed for good). Default: ignored. */
  onError?: (error: Error, job?: DriveJob) => void;
}

/** A job the worker could not do now because another process holds the task; BullMQ tries it again. */
class TaskBusyRetry extends Error {
  constructor(taskId: string) {
    super(`task ${JSON.stringify(taskId)} is held by another process; tried again later`);
  }
}

/** How many log rows a job keeps (a job bounced between workers that lack its task's tools logs each bounce). */
const JOB_LOGS_KEPT = 20;

/** States in which a start job still means "not created by a worker yet, or being created". */
const PENDING_STATES = new Set(['waiting', 'delayed', 'prioritized', 'active', 'waiting-children']);

/** How long after a failed subscribe the wake-up subscriber is tried again (ms). */
const SUBSCRIBE_RETRY_MS = 2_000;

/** How long the waiting count is trusted for `assertRoom` (ms). */
const DEPTH_CACHE_MS = 200;

/** How long a backlog read is reused (ms): metrics scrapes from many readers cost Redis one read per this. */
const BACKLOG_CACHE_MS = 1_000;

/** One read of the backlog: the counts, and since when the oldest waiting job waits (its age is taken per caller). */
type BacklogRead = Omit<QueueBacklog, 'oldestWaitingMs'> & { since: number | null };

export class BullmqDispatch implements Dispatch {
  readonly kind = 'bullmq';
  readonly waits: { replyTimeoutMs: number; inboxLimit: number };
  private readonly queue: Queue;
  private readonly name: string;
  /** The channel that wakes the process driving a task when an event is recorded for it. */
  private readonly channel: string;
  private subscriber: Promise<void> | null = null;
  /** The subscriber's connection once made, so that `close()` ends it even if it never got to subscribe. */
  private subscriberClient: Redis | null = null;
  private closed = false;
  private readonly listeners = new Set<(taskId: string) => void>();
  private readonly workers = new Set<Worker>();
  private depthCache: { at: number; waiting: number } | null = null;
  /** The last backlog read (or the one under way), shared by every caller within `BACKLOG_CACHE_MS`. */
  private backlogCache: { at: number; read: Promise<BacklogRead> } | null = null;

  constructor(private readonly options: BullmqDispatchOptions) {
    if (!options || typeof options !== 'object' || !options.connection)
      throw new HostRequestError('invalid_request', 'bullmqDispatch needs a connection');
    for (const key of [
      'maxQueueDepth',
      'replyTimeoutMs',
      'inboxLimit',
      'lockDurationMs',
      'stalledIntervalMs',
      'attempts',
      'retryDelayMs',
    ] as const) {
      const value = options[key];
      if (value !== undefined && !(Number.isInteger(value) && value > 0))
        throw new HostRequestError(
          'invalid_request',
          `bullmqDispatch: ${key} must be a positive whole number, not ${String(value)}`,
        );
    }
    if (options.inboxLimit !== undefined && options.inboxLimit > INBOX_REPLIES_KEPT) {
      throw new HostRequestError(
        'invalid_request',
        `bullmqDispatch: inboxLimit may be at most ${INBOX_REPLIES_KEPT} (the replies a task keeps), not ${options.inboxLimit}`,
      );
    }
    this.name = options.queueName ?? 'statechart-agent';
    this.channel = `${options.prefix ?? 'bull'}:${this.name}:inbox-recorded`;
    this.waits = {
      replyTimeoutMs: options.replyTimeoutMs ?? 10_000,
      inboxLimit: options.inboxLimit ?? INBOX_REPLIES_KEPT,
    };
    this.queue = new bullmq.Queue(this.name, {
      connection: options.connection,
      ...(options.prefix ? { prefix: options.prefix } : {}),
      defaultJobOptions: {
        attempts: options.attempts ?? 30,
        backoff: { type: 'fixed', delay: options.retryDelayMs ?? 1_000 },
        removeOnComplete: true,
        removeOnFail: true,
        keepLogs: JOB_LOGS_KEPT,
      },
    });
    this.queue.on('error', (error: Error) => this.options.onError?.(error));
  }

  async enqueue(job: DriveJob, options: EnqueueOptions = {}): Promise<void> {
    const jobId = jobIdOf(job, options.idSuffix);
    // A start that failed for good is kept, so that its status can say why: recording it again replaces it.
    if (job.kind === 'start') await this.removeIfFailed(jobId);
    await this.queue.add(job.kind, job, {
      jobId,
      ...(options.delayMs ? { delay: options.delayMs } : {}),
      ...(job.kind === 'start' ? { removeOnFail: false } : {}),
    });
    if (job.kind === 'event')
      await ((await this.queue.getBackend().client) as unknown as Redis).publish(this.channel, job.taskId);
  }

  async assertRoom(): Promise<void> {
    const limit = this.options.maxQueueDepth;
    if (limit === undefined) return;
    const now = Date.now();
    if (!this.depthCache || now - this.depthCache.at > DEPTH_CACHE_MS)
      this.depthCache = { at: now, waiting: await this.queue.getWaitingCount() };
    if (this.depthCache.waiting >= limit) throw new QueueFullError('queue', limit);
    // Counted here too, so that a burst within the cache's life is still bounded.
    this.depthCache.waiting += 1;
  }

  async pendingStart(taskId: string): Promise<AgentInput | null> {
    const job = await this.startJob(taskId);
    if (!job || driveJobProblem(job.data) !== null) return null;
    return PENDING_STATES.has(await job.getState()) ? (job.data as Extract<DriveJob, { kind: 'start' }>).input : null;
  }

  async startFailure(taskId: string): Promise<string | null> {
    const job = await this.startJob(taskId);
    if (!job || (await job.getState()) !== 'failed') return null;
    return job.failedReason || 'unknown';
  }

  async forgetStart(taskId: string): Promise<boolean> {
    const job = await this.startJob(taskId);
    if (!job || (await job.getState()) === 'active') return false;
    await job.remove();
    return true;
  }

  async pendingStarts(owner: { tenantId: string; userId: string }): Promise<string[]> {
    // Active too: a worker creating the task now (its save is refused once the erasure left a tombstone).
    const jobs = (await this.queue.getJobs(['waiting', 'delayed', 'prioritized', 'active', 'failed'])) as (
      Job<DriveJob> | undefined
    )[];
    return jobs.flatMap((job) => {
      const data = job?.data;
      // A malformed job (no API process wrote it) names nobody: it must not make every erasure fail.
      return data?.kind === 'start' &&
        driveJobProblem(data) === null &&
        data.input.principal.tenantId === owner.tenantId &&
        data.input.principal.userId === owner.userId
        ? [data.taskId]
        : [];
    });
  }

  async retryFailedStarts(limit: number): Promise<number> {
    const failed = (await this.queue.getFailed(0, limit - 1)) as (Job<DriveJob> | undefined)[];
    let retried = 0;
    for (const job of failed) {
      if (job?.data?.kind !== 'start' || driveJobProblem(job.data) !== null) continue;
      await job.retry();
      retried += 1;
    }
    return retried;
  }

  work(handle: (job: DriveJob) => Promise<DriveOutcome>, options: DispatchWorkerOptions): DispatchWorker {
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1) {
      throw new HostRequestError(
        'invalid_request',
        `createWorker: concurrency must be a positive whole number, not ${String(options.concurrency)}`,
      );
    }
    const retryDelay = this.options.retryDelayMs ?? 1_000;
    const worker = new bullmq.Worker(
      this.name,
      async (job: Job<DriveJob>, token?: string) => {
        // Failed for good at once, with what is wrong with it: retrying cannot mend a job's data.
        const problem = driveJobProblem(job.data);
        if (problem !== null) throw new bullmq.UnrecoverableError(`malformed dispatch job ${job.id}: ${problem}`);
        const outcome = await handle(job.data).catch(async (error: unknown) => {
          if (!(error instanceof AgentError && error.code === 'catalog_mismatch')) throw error;
          // Not for this process (it lacks the task's tools as they were): back in the queue for a worker that has
          // them, without using up a try, so that it is never failed for good while such a worker may come. The
          // reason stays in the job's log.
          await job.log(`${new Date().toISOString()} ${error.code}: ${error.message}`);
          return 'later' as const;
        });
        if (outcome === 'busy') throw new TaskBusyRetry(job.data.taskId);
        if (outcome === 'later') {
          // Back in the queue without using up a try: the job waits for room, it did not fail.
          await job.moveToDelayed(Date.now() + retryDelay, token);
          throw new bullmq.DelayedError();
        }
      },
      {
        connection: this.options.connection,
        ...(this.options.prefix ? { prefix: this.options.prefix } : {}),
        concurrency: options.concurrency,
        lockDuration: this.options.lockDurationMs ?? 30_000,
        stalledInterval: this.options.stalledIntervalMs ?? 30_000,
        // The lease, not this count, keeps a task from being driven twice: a job may stall (its worker died) often.
        maxStalledCount: 100,
      },
    );
    worker.on('error', (error: Error) => this.options.onError?.(error));
    worker.on('failed', (job: Job<DriveJob> | undefined, error: Error) => {
      if (job && error instanceof bullmq.UnrecoverableError) this.options.onError?.(error);
      else if (job && job.attemptsMade >= (job.opts.attempts ?? 1) && !(error instanceof TaskBusyRetry))
        this.options.onError?.(error, job.data);
    });
    this.workers.add(worker);
    return {
      pause: () => worker.pause(true),
      close: async (closeOptions) => {
        await worker.close(closeOptions?.force);
        this.workers.delete(worker);
      },
    };
  }

  onEvent(listener: (taskId: string) => void): () => void {
    this.listeners.add(listener);
    this.subscriber ??= this.subscribe();
    return () => {
      this.listeners.delete(listener);
    };
  }

  async depth(): Promise<QueueDepth> {
    const counts = await this.queue.getJobCounts('waiting', 'active', 'delayed', 'failed');
    return {
      waiting: counts.waiting ?? 0,
      active: counts.active ?? 0,
      delayed: counts.delayed ?? 0,
      failed: counts.failed ?? 0,
    };
  }

  /**
   * Jobs no worker has taken yet, by state, and the age of the oldest waiting one: two reads (the counts, and the
   * head of the wait list, which BullMQ serves oldest first), shared by every caller for a second. A failed read is
   * shared too (so a scrape storm against a Redis that is away costs it nothing more) and rejects each caller.
   */
  async backlog(): Promise<QueueBacklog> {
    const now = Date.now();
    if (!this.backlogCache || now - this.backlogCache.at > BACKLOG_CACHE_MS)
      this.backlogCache = { at: now, read: this.readBacklog() };
    const { since, ...counts } = await this.backlogCache.read;
    // The age is taken now, so a reused read does not report the oldest job younger than it is.
    return { ...counts, oldestWaitingMs: since === null ? null : Math.max(0, Date.now() - since) };
  }

  private async readBacklog(): Promise<BacklogRead> {
    const [counts, [oldest]] = await Promise.all([
      this.queue.getJobCounts('waiting', 'delayed', 'prioritized'),
      this.queue.getWaiting(0, 0) as Promise<(Job<DriveJob> | undefined)[]>,
    ]);
    return {
      waiting: counts.waiting ?? 0,
      delayed: counts.delayed ?? 0,
      prioritized: counts.prioritized ?? 0,
      // A job added with a delay waits from when it came due, not from when it was added.
      since: oldest ? oldest.timestamp + (oldest.delay ?? 0) : null,
    };
  }

  /** Closes the queue, the wake-up subscriber and any worker still open. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.workers].map((worker) => worker.close()));
    // Not awaited: a subscriber that never connected (Redis down) must not hold the close.
    this.subscriberClient?.disconnect();
    await this.queue.close();
  }

  private async subscribe(): Promise<void> {
    try {
      // A connection like the queue's own (options or client alike), in subscriber mode. It reconnects (and
      // resubscribes) by itself; while it is away, events still reach the task by their jobs, only later.
      const subscriber = ((await this.queue.getBackend().client) as unknown as Redis).duplicate();
      if (this.closed) return subscriber.disconnect();
      this.subscriberClient = subscriber;
      subscriber.on('error', (error: Error) => this.options.onError?.(error));
      subscriber.on('message', (_channel: string, taskId: string) => {
        for (const listener of this.listeners) listener(taskId);
      });
      await subscriber.subscribe(this.channel);
    } catch (error) {
      this.options.onError?.(error instanceof Error ? error : new Error(String(error)));
      this.subscriberClient?.disconnect();
      this.subscriberClient = null;
      // Tried again in a while (events reach their tasks by their jobs meanwhile, only later).
      if (!this.closed) {
        const retry = setTimeout(() => {
          if (!this.closed) this.subscriber = this.subscribe();
        }, SUBSCRIBE_RETRY_MS);
        retry.unref();
      }
    }
  }

  private async startJob(taskId: string): Promise<Job<DriveJob> | undefined> {
    const job = (await this.queue.getJob(jobIdOf({ kind: 'start', taskId } as DriveJob))) as Job<DriveJob> | undefined;
    return job?.data.kind === 'start' ? job : undefined;
  }

  private async removeIfFailed(jobId: string): Promise<void> {
    const job = await this.queue.getJob(jobId);
    if (job && (await job.getState()) === 'failed') await job.remove();
  }
}

/**
 * A dispatch on BullMQ, for `createOrchestrator({ dispatch })`.
 *
 * @example
 * const dispatch = bullmqDispatch({ connection: { host: '127.0.0.1', port: 6379 } });
 * const orchestrator = createOrchestrator({ tools, model, store: new RedisStore(), dispatch });
 * orchestrator.createWorker({ concurrency: 50 });
 */
export function bullmqDispatch(options: BullmqDispatchOptions): BullmqDispatch {
  return new BullmqDispatch(options);
}
