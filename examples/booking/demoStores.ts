/**
 * Where the demo keeps its tasks, and the promise that it only ever deletes what it made: one folder per scenario
 * under `--data-dir` (default .data/demo), one Redis key prefix per scenario under `--prefix` (default per user, so
 * two people on one Redis keep apart). A folder or prefix the demo made carries a marker; one that holds data
 * without the marker is refused, never emptied.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { FileStore, MemoryStore, type TaskStore } from '../../src/index.js';
import { RedisStore } from '../../src/redis.js';

export const DEMO_DATA_DIR = '.data/demo';
const MARKER = '.statechart-agent-demo';

/** The default Redis prefix of this user's demo runs. */
export function demoPrefix(): string {
  let user = 'user';
  try {
    user = userInfo().username.replace(/[^\w.-]/g, '_') || user;
  } catch {
    // no user name (some containers): one shared default
  }
  return `statechart-agent-demo:${user}`;
}

export class DemoDataError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A fresh store for one scenario's run, after clearing only what an earlier demo run of it left. */
export async function openScenarioStore(
  kind: string,
  options: { dataDir: string; prefix: string; scenario: string },
): Promise<TaskStore> {
  switch (kind) {
    case 'memory':
      return new MemoryStore();
    case 'file':
      return new FileStore(await freshFolder(join(options.dataDir, options.scenario)));
    case 'redis':
      return freshPrefix(`${options.prefix}:${options.scenario}`);
    default:
      throw new DemoDataError(`unknown store "${kind}"; use file, memory or redis`);
  }
}

async function freshFolder(dir: string): Promise<string> {
  if (existsSync(dir)) {
    const entries = await readdir(dir);
    if (entries.length > 0 && !entries.includes(MARKER)) {
      throw new DemoDataError(
        `${dir} holds data the demo did not make (no ${MARKER} marker): it is left alone. Choose another --data-dir, or delete the folder yourself.`,
      );
    }
    await rm(dir, { recursive: true, force: true });
  }
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, MARKER), 'made by the statechart-agent demo: npm start may delete this folder\n');
  return dir;
}

async function freshPrefix(prefix: string): Promise<RedisStore> {
  const client = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
    maxRetriesPerRequest: 1,
    connectTimeout: 1_000,
  });
  const marker = `{${prefix}}:demo-marker`;
  try {
    if ((await client.exists(marker)) === 0 && (await hasKeys(client, `{${prefix}}:*`))) {
      throw new DemoDataError(
        `Redis prefix ${prefix} holds keys the demo did not make (no demo marker key): they are left alone. Choose another --prefix.`,
      );
    }
    const store = new RedisStore({ prefix });
    await store.deleteAll();
    await client.set(marker, 'made by the statechart-agent demo: npm start may delete this prefix');
    return store;
  } finally {
    client.disconnect();
  }
}

async function hasKeys(client: Redis, pattern: string): Promise<boolean> {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1_000);
    if (keys.length > 0) return true;
    cursor = next;
  } while (cursor !== '0');
  return false;
}
