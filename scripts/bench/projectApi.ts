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
 * Its imports resolve from `dir`, so it needs a node_modules there or above (a symlink to this one's will do).
 */
export async function loadProjectApi(dir: string): Promise<ProjectApi> {
  const entry = (path: string) => import(pathToFileURL(join(resolve(dir), path)).href);
  const [otherCore, otherRedis, otherTesting] = await Promise.all([
    entry('src/index.ts'),
    entry('src/redis.ts'),
    entry('src/testing/index.ts'),
  ]);
  return {
    createOrchestrator: otherCore.createOrchestrator,
    defineTool: otherCore.defineTool,
    MemoryStore: otherCore.MemoryStore,
    RedisStore: otherRedis.RedisStore,
    reply: otherTesting.reply,
  };
}
