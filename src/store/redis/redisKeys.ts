/**
 * Every Redis key of the store, built in one place. All keys of a bucket start with its hash tag (`{prefix}` for a
 * single bucket), so a Redis Cluster puts them in one slot and a Lua script may touch a task, its journals and the
 * indexes atomically.
 *
 * The task id always comes last: a task id may contain ":" and could otherwise make one task's journal key equal
 * another task's hash key (`task:a:audit` vs. task "a:audit").
 */
import { createHash } from 'node:crypto';
import type { TaskOwner } from '../erasure.js';
import { TASK_STATES, type TaskState } from '../summary.js';

/** Fields of the task hash. The envelope is authoritative; the others are kept beside it so reads stay cheap. */
export const TASK_FIELDS = {
  envelope: 'envelope',
  /** The envelope's summary, so `list` does not parse whole envelopes. */
  summary: 'summary',
  revision: 'revision',
  state: 'state',
  /** Fence presented by the last write ("" for an unfenced write); for diagnosis. */
  fence: 'fence',
  /** Committed journal lengths (the envelope's `journal`), so `readJournal` does not parse the envelope. */
  auditLength: 'auditLength',
  transcriptLength: 'transcriptLength',
  /** The key of the owner's index (`user(owner)`), set with the index entry, so an erasure finds it without JSON. */
  owner: 'owner',
  /**
   * Which save wrote the envelope: "<writing store's id>:<revision>". A store sends its next save's envelope as
   * edits of the one it wrote only while this names its save (`redisEnvelopeText.ts`); absent before 0.4.
   */
  etag: 'etag',
} as const;

export interface RedisKeys {
  /** The `{prefix}` hash tag every key starts with. */
  readonly root: string;
  /** Hash: the envelope and the fields in TASK_FIELDS. */
  task(taskId: string): string;
  /** Stream: append-only audit journal (XADD, entry ids "<n>-0"); readable with XRANGE. */
  audit(taskId: string): string;
  /** List: append-only transcript journal. */
  transcript(taskId: string): string;
  /** String: lease holder's token, with a PX expiry. */
  lease(taskId: string): string;
  /** String: counter incremented by every lease acquisition; never expires, so fences only grow. */
  fence(taskId: string): string;
  /** List: the task's inbox (dispatch): events recorded for whichever process drives it, "<seq> <json>", oldest first. */
  inbox(taskId: string): string;
  /** String: the inbox's sequence counter; never goes back while the task exists. */
  inboxSeq(taskId: string): string;
  /** Sorted set: ids of tasks whose inbox holds unapplied events, scored by the time of the oldest. */
  readonly inboxes: string;
  /** Sorted set: every task id, scored by updatedAt. */
  readonly updated: string;
  /** Sorted set: ids of tasks in `state`, scored by updatedAt. */
  state(state: TaskState): string;
  /** Sorted set: ids of tasks with a wakeAt, scored by wakeAt. */
  readonly wake: string;
  /** Hash: taskId -> quarantine reason. */
  readonly quarantine: string;
  /** String: the claim of a mandate (the id of the task it authorises), in the bucket the mandate id hashes to. */
  mandate(mandateId: string): string;
  /** String: the id of the mandate the task claimed (its erasure gives the claim back). */
  mandateOf(taskId: string): string;
  /**
   * Sorted set: the tenant's slots of running tasks (`capacity.tenantCap`), task ids scored by expiry. Under the
   * prefix's own hash tag (`redisKeys`), whatever the bucket count: every process counts a tenant in one key.
   */
  tenantSlots(tenantId: string): string;
  /**
   * Pub/sub channel (not a key): the save script publishes "<revision> <audit length> <transcript length>" on it
   * after each save of the task (`redisTaskChanges.ts`).
   */
  live(taskId: string): string;
  /**
   * Pub/sub channel (not a key): the live model text of the task, published by the process that drives it while
   * another process watches (`redisLiveMessages.ts`). Never stored.
   */
  text(taskId: string): string;
  /** String with a short PX expiry: set, and refreshed, by a process while it watches the task's live text. */
  textWatched(taskId: string): string;
  /** String: the tombstone (JSON) of an erased task; saves, leases and quarantine of the id are refused. */
  tombstone(taskId: string): string;
  /** Sorted set: ids of erased tasks, scored by erasedAt (for the tombstones' retention). */
  readonly erased: string;
  /**
   * Sorted set: ids of one owner's tasks, scored by updatedAt. Named by a hash of (tenant, user), so that no user id
   * shows in key listings; the set (and its key) goes away with the owner's last task.
   */
  user(owner: TaskOwner): string;
  /** What every `user(...)` key starts with. */
  readonly userPrefix: string;
  /**
   * String: the epoch marker of the data set under the prefix ("<random id>@<ISO time of creation>"), written once
   * by the first save or lease (`redisEpoch.ts`).
   */
  readonly epoch: string;
}

/** The key layout for one prefix. The prefix may not contain braces: they would end the hash tag early. */
export function redisKeys(prefix: string): RedisKeys {
  checkPrefix(prefix);
  return keysUnder(`{${prefix}}`);
}

/**
 * The keys of bucket `index` of `count` (`redisLayout.ts`): the prefix's own for a single bucket, else under the hash
 * tag `{<prefix>{<index>}` (the tag is "<prefix>{<index>"). No prefix holds a brace, so no other prefix, bucketed or
 * not, can have the same tag.
 */
export function redisBucketKeys(prefix: string, index: number, count: number): RedisKeys {
  checkPrefix(prefix);
  return count === 1 ? keysUnder(`{${prefix}}`) : keysUnder(`{${prefix}{${index}}`);
}

function checkPrefix(prefix: string): void {
  if (prefix.length === 0 || /[{}]/.test(prefix)) {
    throw new TypeError(`Redis key prefix ${JSON.stringify(prefix)} must be non-empty and contain no braces`);
  }
}

function keysUnder(root: string): RedisKeys {
  // A task's saves name the same owner every time: the last owner's key is kept rather than hashed again.
  let last: { tenantId: string; userId: string; key: string } | null = null;
  const user = (owner: TaskOwner): string => {
    if (last?.tenantId === owner.tenantId && last.userId === owner.userId) return last.key;
    const key = `${root}:index:user:${createHash('sha256')
      .update(JSON.stringify([owner.tenantId, owner.userId]), 'utf8')
      .digest('hex')}`;
    last = { tenantId: owner.tenantId, userId: owner.userId, key };
    return key;
  };
  return {
    root,
    task: (id) => `${root}:task:${id}`,
    audit: (id) => `${root}:audit:${id}`,
    transcript: (id) => `${root}:transcript:${id}`,
    lease: (id) => `${root}:lease:${id}`,
    fence: (id) => `${root}:fence:${id}`,
    inbox: (id) => `${root}:inbox:${id}`,
    inboxSeq: (id) => `${root}:inboxseq:${id}`,
    updated: `${root}:index:updated`,
    inboxes: `${root}:index:inboxes`,
    state: (state) => `${root}:index:state:${state}`,
    wake: `${root}:index:wake`,
    quarantine: `${root}:quarantine`,
    tombstone: (id) => `${root}:tombstone:${id}`,
    live: (id) => `${root}:live:${id}`,
    text: (id) => `${root}:text:${id}`,
    textWatched: (id) => `${root}:textwatched:${id}`,
    mandate: (id) => `${root}:mandate:${id}`,
    mandateOf: (id) => `${root}:mandateof:${id}`,
    tenantSlots: (tenantId) => `${root}:tenantslots:${tenantId}`,
    erased: `${root}:index:erased`,
    user,
    userPrefix: `${root}:index:user:`,
    epoch: `${root}:epoch`,
  };
}

/**
 * KEYS[1..7] of both the save and the erase script: the task hash, its audit stream, transcript list, fence counter
 * and lease, then the updatedAt and wakeAt indexes (each script's header lists the keys that follow).
 */
export function taskScriptKeys(keys: RedisKeys, taskId: string): string[] {
  return [
    keys.task(taskId),
    keys.audit(taskId),
    keys.transcript(taskId),
    keys.fence(taskId),
    keys.lease(taskId),
    keys.updated,
    keys.wake,
  ];
}

/** The per-state index keys in TASK_STATES order (the save script receives all of them). */
export function stateIndexKeys(keys: RedisKeys): string[] {
  return TASK_STATES.map((state) => keys.state(state));
}
