/**
 * The store's Lua scripts (`./lua/*.lua`, documented in their headers), registered on an ioredis client with
 * `defineCommand`, and the one place where their negative return codes become errors.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import {
  AgentError,
  CorruptTaskError,
  FencedOutError,
  QueueFullError,
  RevisionConflictError,
  StoreUnavailableError,
  TaskExistsError,
} from '../../errors.js';
import { erasedError, parseTombstone } from '../erasure.js';
import { TASK_STATES } from '../summary.js';
import { type EpochContext, dataLostError } from './redisEpoch.js';

/**
 * Every script replies `[code, detail]`; a negative code is a refusal, mapped by `scriptError`. The scripts that
 * check the epoch marker (save, lease acquisition and renewal, the reservation of a queued task's id) add, when they
 * succeed, the epoch in effect.
 */
export type ScriptReply<T = string> = [code: number, detail: T, epoch?: string | null];

type Command<T = string> = (...args: (string | number | Buffer)[]) => Promise<ScriptReply<T>>;

/** The lease acquisition's reply: ScriptReply, then whether it read (1) and what: envelope, revision, quarantine reason. */
export type AcquireReply = [
  code: number,
  detail: string,
  epoch?: string | null,
  read?: number,
  envelope?: string | null,
  revision?: string | null,
  quarantined?: string | null,
];

/**
 * A store's scripts, each a call of the command `defineStoreScripts` registered for it on the client. The commands'
 * names are prefixed, so they cannot clash with an app's own, and end with the script's digest
 * (`scriptCommandName`), so that stores of two versions on one client (two copies of the package in one app, a
 * benchmark comparing checkouts) never run each other's scripts: `defineCommand` replaces a name's script, and under
 * one name a store would call the other version's script with its own keys and arguments.
 */
export interface StoreScripts {
  taskStoreSaveEdits: Command;
  taskStoreAcquireLease: (...args: (string | number)[]) => Promise<AcquireReply>;
  taskStoreRenewLease: Command;
  taskStoreReleaseLease: Command;
  taskStoreReadJournal: Command<string[] | string>;
  taskStoreErase: Command;
  taskStoreForgetTombstone: Command;
  taskStoreQuarantine: Command;
  taskStoreIndexOwner: Command;
  taskStoreInboxAppend: Command<number | string>;
  taskStoreInboxTrim: Command<number>;
  taskStoreInboxReserve: Command;
  taskStoreMandateClaim: Command;
  taskStoreTenantSlot: Command<number | string>;
}

const lua = (name: string) => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8');

/** Number of KEYS of the save script: 10 fixed keys, then the indexes of the new state and of the one left. */
export const SAVE_KEY_COUNT = 12;
/** Number of KEYS of the erase script: 13 fixed keys, then one index per state. */
export const ERASE_KEY_COUNT = 13 + TASK_STATES.length;

const definitions: Record<keyof StoreScripts, { lua: string; numberOfKeys: number }> = {
  taskStoreSaveEdits: { lua: lua('save'), numberOfKeys: SAVE_KEY_COUNT },
  taskStoreErase: { lua: lua('erase'), numberOfKeys: ERASE_KEY_COUNT },
  taskStoreForgetTombstone: { lua: lua('forgetTombstone'), numberOfKeys: 2 },
  taskStoreQuarantine: { lua: lua('quarantine'), numberOfKeys: 2 },
  taskStoreIndexOwner: { lua: lua('indexOwner'), numberOfKeys: 2 },
  taskStoreAcquireLease: { lua: lua('acquireLease'), numberOfKeys: 6 },
  taskStoreRenewLease: { lua: lua('renewLease'), numberOfKeys: 2 },
  taskStoreReleaseLease: { lua: lua('releaseLease'), numberOfKeys: 1 },
  taskStoreReadJournal: { lua: lua('readJournal'), numberOfKeys: 2 },
  taskStoreInboxAppend: { lua: lua('inboxAppend'), numberOfKeys: 4 },
  taskStoreInboxTrim: { lua: lua('inboxTrim'), numberOfKeys: 2 },
  taskStoreInboxReserve: { lua: lua('inboxReserve'), numberOfKeys: 5 },
  taskStoreMandateClaim: { lua: lua('mandateClaim'), numberOfKeys: 1 },
  taskStoreTenantSlot: { lua: lua('tenantSlot'), numberOfKeys: 1 },
};

/** The command name a script is registered under: its role and the first 16 hex digits of its SHA-1. */
export function scriptCommandName(role: keyof StoreScripts, lua: string): string {
  return `${role}_${createHash('sha1').update(lua).digest('hex').slice(0, 16)}`;
}

const commandNames = Object.fromEntries(
  Object.entries(definitions).map(([role, { lua }]) => [role, scriptCommandName(role as keyof StoreScripts, lua)]),
) as Record<keyof StoreScripts, string>;

/** The name this version registers `role`'s script under (for tests that watch a script's calls). */
export const storeScriptCommand = (role: keyof StoreScripts): string => commandNames[role];

/**
 * Registers the scripts on `client` (idempotent: redefining a name gives it the same code) and returns their calls.
 * Each call looks its command up when it runs, as a call of the client's method would.
 */
export function defineStoreScripts(client: Redis): StoreScripts {
  const commands = client as unknown as Record<string, (...args: unknown[]) => unknown>;
  const scripts: Record<string, (...args: unknown[]) => unknown> = {};
  for (const [role, definition] of Object.entries(definitions)) {
    const name = commandNames[role as keyof StoreScripts];
    client.defineCommand(name, definition);
    scripts[role] = (...args: unknown[]) => commands[name]!(...args);
  }
  return scripts as unknown as StoreScripts;
}

/** What a script was doing, for the error it may turn into. */
export interface ScriptContext {
  taskId: string;
  expectedRevision?: number;
  fence?: string | undefined;
  /** For the scripts that check the epoch marker. */
  epoch?: EpochContext;
}

/** The error for a script's negative return code. */
export function scriptError(code: number, detail: string, context: ScriptContext): Error {
  const { taskId, expectedRevision = 0 } = context;
  switch (code) {
    case -1:
      return new TaskExistsError(taskId);
    case -2:
    case -5:
      return new RevisionConflictError(taskId, expectedRevision, detail === '' ? null : Number(detail));
    case -3:
      return new FencedOutError(
        taskId,
        Number(context.fence) < Number(detail)
          ? `fence ${context.fence} is stale; the lease was acquired since with fence ${detail}`
          : `fence ${context.fence} was never handed out; the last acquisition got fence ${detail}`,
      );
    case -4:
      return new FencedOutError(taskId, 'a save without a fence was refused while another holder has the lease');
    case -6:
      return new CorruptTaskError(taskId, `Redis key ${detail} holds a value of the wrong type for this store`);
    case -7:
      return new StoreUnavailableError(
        `index key ${detail} holds a value of the wrong type; something other than this store wrote under its prefix`,
      );
    case -8:
      return new AgentError('invalid_save', `save of task ${taskId}: unknown state ${JSON.stringify(detail)}`);
    case -9:
      try {
        return erasedError(parseTombstone(taskId, detail));
      } catch (error) {
        return error as Error;
      }
    case -10:
      return new AgentError(
        'invalid_save',
        `save of task ${taskId}: it belongs to another user; a task's owner never changes`,
      );
    case -11:
      if (context.epoch) return dataLostError(context.epoch, detail);
      return new StoreUnavailableError(
        `a store script reported the data set lost without an epoch to compare (${detail})`,
      );
    case -12:
      return new StoreUnavailableError(
        `the epoch marker ${detail} holds a value of the wrong type; something other than this store wrote under its prefix`,
      );
    case -13:
      return new QueueFullError('inbox', Number(detail));
    default:
      return new StoreUnavailableError(`a store script answered with unknown code ${code} (${detail})`);
  }
}
