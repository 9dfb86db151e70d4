/**
 * The Stately inspector relay in child processes: a process that used it exits on its own once it is stopped, even
 * with a viewer still connected (the reconnect-forever pitfall of the WebSocket client must not bite), and
 * `npm start -- --inspect` runs the demo with the relay and exits cleanly. In process: inspect.test.ts.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { parseJsonLines } from '../src/inspect/jsonLinesSink.js';
import { openViewer } from './support/statelyViewer.js';
import { scaled } from './support/timeScale.js';
import { ChildPool } from './support/workers.js';

const pool = new ChildPool();
const sockets: WebSocket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.terminate();
  await pool.killAll();
});

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'inspect-process-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('Stately inspector relay, in a process of its own', () => {
  it(
    'lets a process that used it exit on its own, even with a viewer still connected',
    async () => {
      const child = pool.spawnTs('stately', 'test/support/statelyChild.ts', []);
      const pageUrl = (await child.waitFor('READY ', 15_000)).split(' ')[1]!;
      // A viewer (like an open browser tab) that never closes by itself.
      const viewer = await openViewer(pageUrl);
      sockets.push(viewer.socket);
      child.send('go');
      const exit = await child.ended(15_000);
      expect(exit, child.transcript()).toEqual({ code: 0, signal: null });
      expect(child.lines).toContain('RESULT done');
      const stopped = child.values<string[]>('STOPPED')[0]!;
      // No timer (a reconnect), no socket, no server left (stdout/stderr pipes are fine).
      expect(stopped.filter((r) => r !== 'PipeWrap')).toEqual([]);
      expect(viewer.frames.length).toBeGreaterThan(20);
      await viewer.closed;
    },
    scaled(30_000),
  );

  it(
    'npm start -- --inspect runs the demo with the relay and exits cleanly',
    async () => {
      const child = pool.spawnTs('demo', 'examples/booking/demo.ts', [
        '--scenario',
        'normal',
        '--store',
        'memory',
        '--inspect',
        '--inspect-port',
        '0',
        '--inspect-stream',
        join(dir, 'demo.jsonl'),
        '--no-color',
      ]);
      child.process.stdin!.end();
      const exit = await child.ended(20_000);
      expect(exit, child.transcript()).toEqual({ code: 0, signal: null });
      const out = child.lines.join('\n');
      expect(out).toMatch(
        /Stately inspector: open http:\/\/127\.0\.0\.1:\d+\/\?key=[\w-]+ in a browser\. The page embeds the inspector UI from stately\.ai, which needs/,
      );
      expect(out).toContain('the local relay and its event stream do not');
      expect(out).toContain('Normal booking');
      const lines = parseJsonLines(await readFile(join(dir, 'demo.jsonl'), 'utf8'));
      expect(
        lines.filter((m) => m.taskId === 'normal-1' && m.root && m.type === '@xstate.snapshot').at(-1)!.snapshot!
          .status,
      ).toBe('done');
    },
    scaled(30_000),
  );
});
