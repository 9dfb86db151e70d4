/**
 * The trace CLI (`npm run trace`, src/cli/trace.ts) run as a child process: it writes the trace page of a task in a
 * file store. The page itself is tested in traceHtml.test.ts.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { scenarios } from '../examples/booking/scenarios.js';
import { FileStore } from '../src/store/file/fileStore.js';
import { scaled } from './support/timeScale.js';
import { ChildPool } from './support/workers.js';

const classesOf = (html: string, id: string) => html.match(new RegExp(`<g class="([^"]*)" id="state-${id}">`))?.[1];

describe('trace CLI', () => {
  const pool = new ChildPool();
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'trace-cli-'));
    await scenarios.conflict({ store: new FileStore(dir) });
  });
  afterEach(() => pool.killAll());
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it(
    'writes the trace page of a stored task',
    async () => {
      const out = join(dir, 'conflict.html');
      const child = pool.spawnTs('trace', 'src/cli/trace.ts', ['conflict-1', '--data-dir', dir, '--out', out]);
      const { code } = await child.ended(20_000);
      expect(code, child.transcript()).toBe(0);
      const store = new FileStore(dir);
      const entries = (await store.load('conflict-1'))!.journal.audit;
      await store.close();
      expect(child.lines).toContain(`wrote ${out}: conflict-1 done (done), ${entries} audit entries`);
      const html = await readFile(out, 'utf8');
      expect(html).toContain('<title>Trace of conflict-1</title>');
      expect(classesOf(html, 'done')).toBe('final visited current');
    },
    scaled(30_000),
  );
});
