/**
 * One save of a live task (`liveTask.ts` decides when): the envelope it writes, and the write itself, retried with
 * backoff while the store is unavailable. A retry after an ambiguous failure may meet the task's own earlier write
 * as a conflict; it then checks whether that write landed, by comparing what is stored with what was sent.
 */
import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import { AGENT_MACHINE_VERSION } from '../../machines/agentMachine.js';
import { canonicalJson } from '../../machines/lib/canonicalJson.js';
import { type Clock, backoffDelay, sleep } from '../clock.js';
import { RevisionConflictError, StoreUnavailableError, TaskExistsError } from '../errors.js';
import {
  ENVELOPE_SCHEMA_VERSION,
  type InboxCursor,
  type PersistedAgentSnapshot,
  type TaskEnvelope,
} from '../store/envelope.js';
import type { SaveRequest, TaskStore } from '../store/taskStore.js';

/** What changes from save to save; the inbox cursor is copied, so later changes do not reach the saved envelope. */
export type EnvelopeParts = Pick<
  TaskEnvelope,
  'taskId' | 'revision' | 'createdAt' | 'updatedAt' | 'summary' | 'journal'
> & {
  snapshot: PersistedAgentSnapshot;
  inbox: InboxCursor | null;
};

/** The envelope of this build's schema and machine version. */
export function envelopeOf(parts: EnvelopeParts): TaskEnvelope {
  const { taskId, revision, createdAt, updatedAt, summary, journal, snapshot, inbox } = parts;
  return {
    schemaVersion: ENVELOPE_SCHEMA_VERSION,
    machineVersion: AGENT_MACHINE_VERSION,
    taskId,
    revision,
    createdAt,
    updatedAt,
    summary,
    journal,
    snapshot,
    ...(inbox ? { inbox: { applied: inbox.applied, replies: [...inbox.replies] } } : {}),
  };
}

type Members = Record<string, unknown>;
const NO_CONTEXT = {};

/**
 * A task's persisted snapshots, as `actor.getPersistedSnapshot()` gives them, without its walk of the whole context
 * on every save: XState looks at every object in the context for actor references (to persist each as its id),
 * which cost ~2% of a busy process's CPU. The chart keeps none there, and a step never changes a part of the
 * context in place (it makes new objects for what it changes), so only the parts that are not the very ones of the
 * last context found without references are looked at: what changed since the last save. The persisted snapshot is
 * XState's for all but the context, which is the live one, as XState gives it when it holds no reference; a context
 * that holds one is persisted by XState, as before.
 */
export class PersistedSnapshots {
  /** The last context found without actor references. */
  private clean: Members | null = null;

  constructor(private readonly machine: AnyStateMachine) {}

  of(snapshot: AnyMachineSnapshot): PersistedAgentSnapshot {
    const context = snapshot.context as Members;
    if (!this.withoutRefs(context)) {
      this.clean = null;
      return this.machine.getPersistedSnapshot(snapshot) as unknown as PersistedAgentSnapshot;
    }
    this.clean = context;
    const persisted = this.machine.getPersistedSnapshot({ ...snapshot, context: NO_CONTEXT }) as Members;
    persisted.context = context;
    return persisted as unknown as PersistedAgentSnapshot;
  }

  private withoutRefs(context: Members): boolean {
    const last = this.clean;
    if (context === last) return true;
    if (holdsRefs(context, false)) return false;
    for (const key in context) {
      const part = context[key];
      if (last !== null && part === last[key]) continue;
      if (holdsRefs(part, true)) return false;
    }
    return true;
  }
}

/** Whether `part` is or (`deep`) holds an actor reference, what XState's `persistContext` replaces. */
function holdsRefs(part: unknown, deep: boolean): boolean {
  if (typeof part !== 'object' || part === null) return false;
  if ('sessionId' in part && 'send' in part && 'ref' in part) return true;
  if (deep) for (const key in part) if (holdsRefs((part as Members)[key], true)) return true;
  return false;
}

export interface SaveDeps {
  store: TaskStore;
  clock: Clock;
  random: () => number;
  /** Retries of a store that is unavailable, before the save fails. */
  saveRetries: number;
}

/**
 * Saves `request`, retrying StoreUnavailableError up to `saveRetries` times with backoff. `stopped` is asked before
 * each retry: a task no longer driven here (closed, lease lost, evicted) must not save again, and its error is thrown.
 */
export async function saveWithRetry(deps: SaveDeps, request: SaveRequest, stopped: () => Error | null): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await deps.store.save(request);
      return;
    } catch (error) {
      // A retry after an ambiguous failure meets our own earlier write as a conflict (or, for the first save, as
      // "task exists"): check whether it landed.
      const ownWrite =
        error instanceof RevisionConflictError || (error instanceof TaskExistsError && request.expectedRevision === 0);
      if (ownWrite && attempt > 0 && (await landedEarlier(deps.store, request.envelope))) return;
      if (!(error instanceof StoreUnavailableError) || attempt >= deps.saveRetries) throw error;
      await sleep(deps.clock, backoffDelay(attempt, { baseDelayMs: 50, maxDelayMs: 2000 }, deps.random));
      const failure = stopped();
      if (failure) throw failure;
    }
  }
}

/** After an ambiguous failure, a retry can conflict with our own earlier write: whether that write landed. */
async function landedEarlier(store: TaskStore, envelope: TaskEnvelope): Promise<boolean> {
  try {
    const stored = await store.load(envelope.taskId);
    // Compared as stored: the live envelope holds `undefined` members (e.g. the snapshot's `error`) that JSON drops
    // and canonicalJson refuses.
    const sent = JSON.parse(JSON.stringify(envelope)) as unknown;
    return stored !== null && stored.revision === envelope.revision && canonicalJson(stored) === canonicalJson(sent);
  } catch {
    return false;
  }
}
