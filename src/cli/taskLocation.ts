/**
 * Where a CLI finds a task: the store kind, the file store's directory, the Redis prefix. Explicit flags win, then
 * the host module's `locate(taskId)`, then the defaults.
 */
import type { HostModule } from './host.js';

export const DEFAULT_DATA_DIR = '.data/tasks';
export const DEFAULT_PREFIX = 'agent';

export interface TaskLocation {
  store: string;
  dataDir: string;
  prefix: string;
  /** For messages: "file store .data/tasks". */
  description: string;
}

export function locateTask(
  taskId: string | undefined,
  flags: { store?: string | undefined; dataDir?: string | undefined; prefix?: string | undefined },
  host?: HostModule,
): TaskLocation {
  const store = flags.store ?? 'file';
  const hint = taskId !== undefined ? (host?.locate?.(taskId) ?? {}) : {};
  const dataDir = flags.dataDir ?? hint.dataDir ?? DEFAULT_DATA_DIR;
  const prefix = flags.prefix ?? hint.prefix ?? DEFAULT_PREFIX;
  const description =
    store === 'file' ? `file store ${dataDir}` : store === 'redis' ? `redis store, prefix ${prefix}` : `${store} store`;
  return { store, dataDir, prefix, description };
}
