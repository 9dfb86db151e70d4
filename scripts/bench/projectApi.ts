/**
 * The part of this project's public API the bench drives, taken from the package's entry points (what a user
 * imports), so that another checkout of the project (`--compare <dir>`: an older commit, a rewrite in progress) can
 * run in the same passes as this one, against the same baseline.
 */
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as core from '../../src/index.js';
import * as redis from '../../src/redis.js';
import * as testing from '../../src/testing/index.js';

export interface ProjectApi {
  createOrchestrator: typeof core.createOrchestrator;
  defineTool: typeof core.defineTool;
  MemoryStore: typeof core.MemoryStore;
  RedisStore: typeof redis.RedisStore;
  reply: typeof testing.reply;
}

export const LOCAL_API: ProjectApi = {
  createOrchestrator: core.createOrchestrator,
  defineTool: core.defineTool,
  MemoryStore: core.MemoryStore,
  RedisStore: redis.RedisStore,
  reply: testing.reply,
};

/**
 * The same entry points of the checkout in `dir` (its src/index.ts, src/redis.ts, src/testing/index.ts, run by tsx).
 * Its imports resolve from `dir`, so it needs a node_modules there or above (a symlink to this one's will do). An
 * older checkout laid its entries out otherwise (before src/redis.ts and src/testing/, e.g. `c2ae86f`, which issue
 * 25 names: RedisStore in src/store/redisStore.ts, `reply` from src/index.ts): each name is taken from the first
 * entry that has it.
 */
export async function loadProjectApi(dir: string): Promise<ProjectApi> {
  const entry = async (path: string): Promise<Record<string, unknown>> => {
    try {
      return await import(pathToFileURL(join(resolve(dir), path)).href);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && String(error).includes(path)) return {};
      throw error;
    }
  };
  const entries = await Promise.all(
    ['src/index.ts', 'src/redis.ts', 'src/testing/index.ts', 'src/store/redisStore.ts'].map(entry),
  );
  const named = <K extends keyof ProjectApi>(name: K): ProjectApi[K] => {
    const found = entries.find((module) => module[name] !== undefined)?.[name];
    if (found === undefined) throw new Error(`the checkout in ${dir} exports no ${name} from its entries`);
    return found as ProjectApi[K];
  };
  return {
    createOrchestrator: named('createOrchestrator'),
    defineTool: named('defineTool'),
    MemoryStore: named('MemoryStore'),
    RedisStore: named('RedisStore'),
    reply: named('reply'),
  };
}
