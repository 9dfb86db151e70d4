/**
 * Dispatch: the port between the orchestrator and a job queue (`statechart-agent/bullmq` implements it on BullMQ).
 * With a dispatch, no API call drives a task in the process that received it: `start` records a job that carries
 * the task's input, user events are recorded in the task's inbox (the store's) and a job is recorded to apply them,
 * `resume`, `recover` and the expiry sweep record jobs. Workers (`orchestrator.work()`) take jobs and drive tasks;
 * a job ends when its task waits or ends, so a waiting task holds no job, no lease and no memory.
 *
 * The queue delivers at least once; the task lease and its fence stay the correctness layer underneath: two
 * deliveries of one job, or two jobs of one task, never drive it twice at once, and an inbox event is applied once.
 */
import type { AgentInput } from '../../machines/context.js';

/** What a job asks a worker to do. Every kind ends with the task driven until it waits or ends. */
export type DriveJob =
  /** Create the task from its input (or, if a delivery before created it, drive it). */
  | { kind: 'start'; taskId: string; input: AgentInput }
  /** Apply the task's inbox up to `seq` (a user event recorded by any process). */
  | { kind: 'event'; taskId: string; seq: number }
  /** Drive the task: resume, a take-over found by recovery, or a deadline (`at`) whose timer event is due. */
  | { kind: 'wake'; taskId: string; at: number };

export interface EnqueueOptions {
  /** Holds the job back this long (a deadline). */
  delayMs?: number;
  /** Added to the job's id: a job that must not be deduplicated against the one that asks for it. */
  idSuffix?: string;
}

/** What a worker's handler answers for one job. */
export type DriveOutcome =
  /** The task waits, ended, is gone, or another job of this process drives it and was told. */
  | 'done'
  /** Another process holds the task's lease: the job is tried again later (the holder may have died). */
  | 'busy'
  /** This process cannot take the task now (at capacity, draining): put back for later, not counted as a try. */
  | 'later';

/** Jobs by state, as the queue counts them. */
export interface QueueDepth {
  waiting: number;
  active: number;
  delayed: number;
  failed: number;
}

/**
 * The queue's backlog, for fleet metrics: jobs no worker has taken yet, by state, and how long the oldest waiting one
 * has waited (null when none waits). Read through a short cache, so a storm of reads costs Redis one read a second.
 */
export interface QueueBacklog {
  waiting: number;
  delayed: number;
  prioritized: number;
  /** Now minus when the oldest waiting job was added (or, for a job added with a delay, came due); null: none waits. */
  oldestWaitingMs: number | null;
}

export interface DispatchWorkerOptions {
  /** How many tasks this worker drives at once (jobs it holds). */
  concurrency: number;
}

/** A running consumer of the queue. */
export interface DispatchWorker {
  /** Stops taking new jobs; the jobs in hand go on. */
  pause(): Promise<void>;
  /** Stops taking jobs; waits for the jobs in hand (their tasks come to rest or are handed back). */
  close(options?: { force?: boolean }): Promise<void>;
}

export interface Dispatch {
  /** "bullmq", ... */
  readonly kind: string;
  /** How long an API call waits for its event's reply, and how many unapplied events a task's inbox may hold. */
  readonly waits: { replyTimeoutMs: number; inboxLimit: number };
  /**
   * Records a job; resolves once it is durable. Jobs are deduplicated by what they ask (one start per task id, one
   * job per inbox event, one wake per task and time). `delayMs` holds it back (deadlines).
   */
  enqueue(job: DriveJob, options?: EnqueueOptions): Promise<void>;
  /** Throws QueueFullError when the queue holds more waiting jobs than allowed (checked before a start). */
  assertRoom(): Promise<void>;
  /** The input of a start job no worker has created the task of yet (a status before the task exists). */
  pendingStart(taskId: string): Promise<AgentInput | null>;
  /** Why the start job of a task failed for good (it is kept), or null. */
  startFailure(taskId: string): Promise<string | null>;
  /** Removes the start job of a task unless a worker has it (an erasure): true when one was removed. */
  forgetStart(taskId: string): Promise<boolean>;
  /** Start jobs not yet taken whose input names this owner (an erasure of the user's data). */
  pendingStarts(owner: { tenantId: string; userId: string }): Promise<string[]>;
  /** Puts start jobs that failed for good back in the queue (recovery); how many. */
  retryFailedStarts(limit: number): Promise<number>;
  /**
   * Starts consuming jobs with `handle`; a thrown error is retried by the queue with backoff. A thrown error with code
   * `catalog_mismatch` (CatalogMismatchError) says this process lacks the task's tools: the job goes back for another
   * worker, and must not be failed for good on that account.
   */
  work(handle: (job: DriveJob) => Promise<DriveOutcome>, options: DispatchWorkerOptions): DispatchWorker;
  /** Calls `listener` with the task id of every event job added by any process (to wake the process driving it). */
  onEvent(listener: (taskId: string) => void): () => void;
  depth(): Promise<QueueDepth>;
  /** The backlog (`QueueBacklog`), read at most about once a second; a dispatch that cannot tell omits it. */
  backlog?(): Promise<QueueBacklog>;
  /** Closes the queue's connections (after every worker closed). */
  close(): Promise<void>;
}

/**
 * A job id for the queue: the task id in base64url (it never holds ":", which BullMQ refuses in ids), and
 * deterministic per request, so that recording one twice records it once.
 */
export function jobIdOf(job: DriveJob, suffix = ''): string {
  const task = Buffer.from(job.taskId, 'utf8').toString('base64url');
  switch (job.kind) {
    case 'start':
      return `s.${task}`;
    case 'event':
      return `e.${task}.${job.seq}`;
    case 'wake':
      return `w.${task}.${job.at}${suffix}`;
  }
}

/**
 * What is wrong with a job read from the queue, or null when it is a DriveJob. Only the shape the worker routes by
 * is checked (a start's input is checked whole when the task is created): a job no API process wrote must fail on
 * its own with this reason, not as a TypeError deep in a worker or a reader of the queue.
 */
export function driveJobProblem(data: unknown): string | null {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return 'the job is not an object';
  const job = data as Record<string, unknown>;
  if (typeof job.taskId !== 'string' || job.taskId === '') return 'the job names no task id';
  switch (job.kind) {
    case 'start': {
      const input = job.input as { taskId?: unknown; principal?: Record<string, unknown> | null } | null | undefined;
      if (typeof input !== 'object' || input === null || Array.isArray(input))
        return "the start job's input is not an object";
      if (input.taskId !== job.taskId)
        return `the start job's input is for task ${JSON.stringify(input.taskId)}, not ${JSON.stringify(job.taskId)}`;
      // Read before the input is checked whole (capacity, the tenant's cap, erasures): a tenant and a user.
      const principal = input.principal;
      if (typeof principal?.tenantId !== 'string' || typeof principal.userId !== 'string')
        return "the start job's input has no principal with a tenantId and a userId";
      return null;
    }
    case 'event':
      return Number.isSafeInteger(job.seq) && (job.seq as number) >= 0
        ? null
        : "the event job's seq is not a whole number";
    case 'wake':
      return Number.isFinite(job.at) ? null : "the wake job's at is not a time";
    default:
      return `the job is of unknown kind ${JSON.stringify(job.kind)}`;
  }
}
