/**
 * Dispatch on BullMQ (`statechart-agent/bullmq`): the jobs of `../orchestrator/dispatch.ts` in one BullMQ queue on
 * the Redis the store uses (or another). BullMQ gives durable jobs, deduplication by job id, delayed jobs for
 * deadlines, retries with backoff, and the detection of stalled jobs: a worker that died stops renewing its jobs'
 * locks, and another worker gets them. Under that at-least-once delivery the task lease and its fence keep each task
 * driven by one process at a time; the inbox cursor keeps each event applied once.
 */
import { type ConnectionOptions, type Job, Queue, QueueEvents, Worker } from 'bullmq';
import { HostRequestError, QueueFullError } from '../errors.js';
import type { AgentInput } from '../../machines/context.js';
import { type Dispatch, type DispatchWorker, type DispatchWorkerOptions, type DriveJob, type DriveOutcome, type EnqueueOptions, type QueueDepth, jobIdOf, taskIdOfJob } from '../orchestrator/dispatch.js';

export interface BullmqDispatchOptions {
  /** How BullMQ connects: ioredis options (`{ host, port }`, `{ url }`...) or a client. Each part opens its own. */
  connection: ConnectionOptions;
  /** The queue's name. Default "statechart-agent". Every process that shares the tasks uses the same. */
  queueName?: string;
  /** BullMQ's key prefix. Default "bull". */
  prefix?: string;
  /** `start` throws QueueFullError (HTTP 503) while this many jobs or more wait. Default: no limit. */
  maxQueueDepth?: number;
  /** How long an API call waits for the reply to its event (then EventPendingError). Default 10 s. */
  replyTimeoutMs?: number;
  /** How many unapplied events a task's inbox may hold (then QueueFullError). Default 100. */
  inboxLimit?: number;
  /**
   * How long a job's lock lasts without renewal (default 30 s): a worker that dies gives its jobs up after about
   * this much, and another worker's stalled-job check (every `stalledIntervalMs`, default 30 s) takes them.
   */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
  /** How often a job is tried (a busy task, a handed-back one, a store failure) before it is dropped. Default 30. */
  attempts?: number;
  /** The wait before each new try. Default 1 s. */
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

/** States in which a start job still means "not created by a worker yet, or being created". */
const PENDING_STATES = new Set(['waiting', 'delayed', 'prioritized', 'active', 'waiting-children']);

/** How long the waiting count is trusted for `assertRoom` (ms). */
const DEPTH_CACHE_MS = 200;

export class BullmqDispatch implements Dispatch {
  readonly kind = 'bullmq';
  readonly waits: { replyTimeoutMs: number; inboxLimit: number };
  private readonly queue: Queue;
  private readonly name: string;
  private events: QueueEvents | null = null;
  private readonly listeners = new Set<(taskId: string) => void>();
  private readonly workers = new Set<Worker>();
  private depthCache: { at: number; waiting: number } | null = null;

  constructor(private readonly options: BullmqDispatchOptions) {
    if (!options || typeof options !== 'object' || !options.connection) throw new HostRequestError('invalid_request', 'bullmqDispatch needs a connection');
    for (const key of ['maxQueueDepth', 'replyTimeoutMs', 'inboxLimit', 'lockDurationMs', 'stalledIntervalMs', 'attempts', 'retryDelayMs'] as const) {
      const value = options[key];
      if (value !== undefined && !(Number.isInteger(value) && value > 0)) throw new HostRequestError('invalid_request', `bullmqDispatch: ${key} must be a positive whole number, not ${String(value)}`);
    }
    this.name = options.queueName ?? 'statechart-agent';
    this.waits = { replyTimeoutMs: options.replyTimeoutMs ?? 10_000, inboxLimit: options.inboxLimit ?? 100 };
    this.queue = new Queue(this.name, {
      connection: options.connection,
      ...(options.prefix ? { prefix: options.prefix } : {}),
      defaultJobOptions: {
        attempts: options.attempts ?? 30,
        backoff: { type: 'fixed', delay: options.retryDelayMs ?? 1_000 },
        removeOnComplete: true,
        removeOnFail: true,
      },
    });
    this.queue.on('error', (error: Error) => this.options.onError?.(error));
  }

  async enqueue(job: DriveJob, options: EnqueueOptions = {}): Promise<void> {
    const jobId = jobIdOf(job, options.idSuffix);
    await this.queue.add(job.kind, job, { jobId, ...(options.delayMs ? { delay: options.delayMs } : {}) });
  }

  async assertRoom(): Promise<void> {
    const limit = this.options.maxQueueDepth;
    if (limit === undefined) return;
    const now = Date.now();
    if (!this.depthCache || now - this.depthCache.at > DEPTH_CACHE_MS) this.depthCache = { at: now, waiting: await this.queue.getWaitingCount() };
    if (this.depthCache.waiting >= limit) throw new QueueFullError('queue', limit);
    // Counted here too, so that a burst within the cache's life is still bounded.
    this.depthCache.waiting += 1;
  }

  async pendingStart(taskId: string): Promise<AgentInput | null> {
    const job = (await this.queue.getJob(jobIdOf({ kind: 'start', taskId } as DriveJob))) as Job<DriveJob> | undefined;
    if (!job || job.data.kind !== 'start') return null;
    return PENDING_STATES.has(await job.getState()) ? job.data.input : null;
  }

  work(handle: (job: DriveJob) => Promise<DriveOutcome>, options: DispatchWorkerOptions): DispatchWorker {
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1) {
      throw new HostRequestError('invalid_request', `createWorker: concurrency must be a positive whole number, not ${String(options.concurrency)}`);
    }
    const worker = new Worker(
      this.name,
      async (job: Job<DriveJob>) => {
        if ((await handle(job.data)) === 'busy') throw new TaskBusyRetry(job.data.taskId);
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
      if (job && job.attemptsMade >= (job.opts.attempts ?? 1) && !(error instanceof TaskBusyRetry)) this.options.onError?.(error, job.data);
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
    if (!this.events) {
      this.events = new QueueEvents(this.name, { connection: this.options.connection, ...(this.options.prefix ? { prefix: this.options.prefix } : {}) });
      this.events.on('error', (error: Error) => this.options.onError?.(error));
      this.events.on('added', ({ jobId }: { jobId: string }) => {
        if (!jobId.startsWith('e.')) return;
        const taskId = taskIdOfJob(jobId);
        if (taskId !== null) for (const each of this.listeners) each(taskId);
      });
    }
    return () => {
      this.listeners.delete(listener);
    };
  }

  async depth(): Promise<QueueDepth> {
    const counts = await this.queue.getJobCounts('waiting', 'active', 'delayed', 'failed');
    return { waiting: counts.waiting ?? 0, active: counts.active ?? 0, delayed: counts.delayed ?? 0, failed: counts.failed ?? 0 };
  }

  /** Closes the queue, its event stream and any worker still open. */
  async close(): Promise<void> {
    await Promise.all([...this.workers].map((worker) => worker.close()));
    await this.events?.close();
    await this.queue.close();
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
