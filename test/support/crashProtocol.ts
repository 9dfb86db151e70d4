/**
 * What a crash worker (test/support/crashWorker.ts) and the test that drives it say to each other: the worker's
 * configuration (one JSON argument) and the lines it prints, one JSON value after a tag:
 *
 *   READY                      set up; with `waitForGo` it now waits for a "GO" line on stdin
 *   SAVED {AckedSave}          a save of the task was acknowledged by the store (printed before anything else runs)
 *   AT <boundary>              the worker reached the boundary and is blocked there: kill it now
 *   REPORT {RecoveryReport}    what `recover()` did
 *   RESULT {WorkerResult}      the task's final status as this worker saw it
 *   FAILED {name, code, message}  the worker stopped driving the task with an error
 *
 * Stdout to a pipe is synchronous on Linux, so a line the parent did not receive before SIGKILL was never
 * written: what the parent counts as acknowledged is a subset of what was.
 */
import { canonicalJson } from '../../machines/lib/canonicalJson.js';
import { sha256Hex } from '../../src/hashing.js';
import type { TaskSummary } from '../../src/store/envelope.js';
import type { SaveRequest, TaskStore } from '../../src/store/taskStore.js';

export interface WorkerConfig {
  redisUrl: string;
  prefix: string;
  taskId: string;
  flow: 'booking' | 'refund';
  /** run: start the task and drive it; recover: `recover()`, then drive what it resumed. */
  action: 'run' | 'recover';
  /** With action recover: a task found waiting for confirmation is confirmed (by its user) and driven on. */
  confirmWaiting?: boolean;
  /** Stop at the task's first confirmation request: print `AT awaiting-confirmation` and block. */
  blockWhenWaiting?: boolean;
  /** The model call of this turn hangs after printing `AT model-call`. */
  hangModelTurn?: number;
  /** Print READY, then wait for "GO" on stdin before acting (to start two workers at the same moment). */
  waitForGo?: boolean;
  lease: { ttlMs: number; renewEveryMs?: number; acquireTimeoutMs?: number };
  timeouts?: { search?: number; reserve?: number; refund?: number };
}

/** One acknowledged save, as the worker saw it. */
export interface AckedSave {
  taskId: string;
  revision: number;
  state: TaskSummary['state'];
  stateValue: string;
  /** Audit journal length committed by this save (the envelope's `journal.audit`). */
  audit: number;
  /** Digests of the audit entries this save appended, in order. */
  appended: string[];
}

export interface WorkerResult {
  taskId: string;
  state: string;
  code: string | null;
  answer: string | null;
  revision: number;
  pendingConfirmation: { id: string; argsHash: string; summary: string } | null;
}

/** A short, stable digest of a journal entry (canonical JSON, so it survives the round trip through the store). */
export function entryDigest(entry: unknown): string {
  return sha256Hex(canonicalJson(entry)).slice(0, 16);
}

/**
 * A store that remembers, for every save the inner store acknowledged, the audit length it committed and the
 * entries it appended. `onSaved` fires after the save resolved, so the record of that revision is always there.
 */
export function recordingAcks(inner: TaskStore): {
  store: TaskStore;
  ackOf(taskId: string, revision: number): Omit<AckedSave, 'state' | 'stateValue'> | undefined;
} {
  const acks = new Map<string, Omit<AckedSave, 'state' | 'stateValue'>>();
  const store: TaskStore = {
    kind: inner.kind,
    leases: inner.leases,
    // Reads are passed through unchanged, so the lease acquisition's reads are too.
    ...(inner.acquireAndRead ? { acquireAndRead: inner.acquireAndRead.bind(inner) } : {}),
    ...(inner.claimMandate && inner.releaseMandate
      ? { claimMandate: inner.claimMandate.bind(inner), releaseMandate: inner.releaseMandate.bind(inner) }
      : {}),
    async save(request: SaveRequest) {
      await inner.save(request);
      const { taskId, revision, journal } = request.envelope;
      acks.set(`${taskId}#${revision}`, {
        taskId,
        revision,
        audit: journal.audit,
        appended: request.append.audit.map(entryDigest),
      });
    },
    load: (taskId) => inner.load(taskId),
    list: (query) => inner.list(query),
    readJournal: (...args) => inner.readJournal(...args),
    quarantine: (taskId, reason) => inner.quarantine(taskId, reason),
    quarantined: (taskId) => inner.quarantined(taskId),
    close: () => inner.close(),
  };
  return { store, ackOf: (taskId, revision) => acks.get(`${taskId}#${revision}`) };
}
