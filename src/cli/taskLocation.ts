/**
 * Where a CLI finds a task: the store kind, the file store's directory, the Redis prefix. The demo keeps one store
 * per scenario (`.data/demo/<scenario>`, prefix `statechart-agent-demo:<scenario>`) and names its tasks
 * `<scenario>-1`, so a demo task id alone is enough; explicit flags always win.
 */
import { SCENARIO_NAMES } from '../demo/scenarios.js';

export const DEMO_DATA_DIR = '.data/demo';
export const DEMO_PREFIX = 'statechart-agent-demo';

export interface TaskLocation {
  store: string;
  dataDir: string;
  prefix: string;
  /** For messages: "file store .data/demo/refund". */
  description: string;
}

export function locateTask(taskId: string, flags: { store?: string; dataDir?: string; prefix?: string }): TaskLocation {
  const store = flags.store ?? 'file';
  const scenario = SCENARIO_NAMES.find((name) => taskId === `${name}-1`);
  const dataDir = flags.dataDir ?? (scenario ? `${DEMO_DATA_DIR}/${scenario}` : DEMO_DATA_DIR);
  const prefix = flags.prefix ?? (scenario ? `${DEMO_PREFIX}:${scenario}` : DEMO_PREFIX);
  const description = store === 'file' ? `file store ${dataDir}` : store === 'redis' ? `redis store, prefix ${prefix}` : `${store} store`;
  return { store, dataDir, prefix, description };
}
