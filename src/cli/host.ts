/**
 * The host module the store CLIs load (`--host <module>`): what a process needs to drive the host's stored tasks.
 * Reading a task (`tasks list/show/audit`, `trace`) needs none; `tasks recover` and `step` continue tasks, so they
 * need the host's tools and a model.
 *
 * A host module default-exports a function (or a plain object) giving a `HostSetup`:
 *
 * ```ts
 * // host.ts
 * export default async ({ store, prefix }) => ({ tools: [searchRooms, reserveRoom], model: myModel() });
 * ```
 *
 * It may also export `locate(taskId)`, which says where a task id lives when no flag says so.
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Clock } from '../clock.js';
import { AgentError } from '../errors.js';
import type { AgentModel } from '../model/agentModel.js';
import type { Tool } from '../tool.js';

/** What a CLI process is about to open, so the host can wire its tools to the same place. */
export interface HostContext {
  /** The store kind: file, memory or redis. */
  store: string;
  dataDir: string;
  prefix: string;
  clock: Clock;
}

export interface HostSetup {
  tools: readonly Tool[];
  /** The model that takes the tasks' next turns (`step` gates it: one turn per `next`). */
  model?: AgentModel;
  /** Where the host's business data lives, for messages ("in Redis, prefix x"). */
  where?: string;
  /** Lines describing the business records the tools wrote (bookings, refunds), shown by `step`. */
  rows?: () => Promise<string[]>;
  close?: () => Promise<void>;
}

export type HostFactory = (context: HostContext) => HostSetup | Promise<HostSetup>;

export interface HostModule {
  setup: HostFactory;
  /** Defaults for where a task lives, by its id. */
  locate?: (taskId: string) => { dataDir?: string; prefix?: string };
}

/** Loads a host module from a path (relative to the working directory) or a package name. */
export async function loadHost(specifier: string): Promise<HostModule> {
  const url = specifier.startsWith('.') || isAbsolute(specifier) ? pathToFileURL(resolve(specifier)).href : specifier;
  let module: { default?: unknown; locate?: unknown };
  try {
    module = (await import(url)) as typeof module;
  } catch (error) {
    throw new AgentError('invalid_host', `cannot load the host module ${specifier}: ${(error as Error).message}`);
  }
  const exported = module.default;
  const setup: HostFactory | null =
    typeof exported === 'function'
      ? (exported as HostFactory)
      : exported && typeof exported === 'object' && Array.isArray((exported as HostSetup).tools)
        ? () => exported as HostSetup
        : null;
  if (!setup)
    throw new AgentError(
      'invalid_host',
      `the host module ${specifier} must default-export a function or an object with tools`,
    );
  const locate = typeof module.locate === 'function' ? (module.locate as HostModule['locate']) : undefined;
  return locate ? { setup, locate } : { setup };
}

/** A host with no tools: enough to read stored tasks. */
export const READ_ONLY_HOST: HostModule = { setup: () => ({ tools: [] }) };
