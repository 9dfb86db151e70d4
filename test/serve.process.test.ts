/**
 * `npm run serve` as a user runs it: a fresh data folder, no server, no keys. It listens on 127.0.0.1, starts the
 * demo refund for E17, serves it to E17's inbox (and to nobody else's), and stops cleanly on SIGTERM.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { scaled } from './support/timeScale.js';
import { ChildPool } from './support/workers.js';

const pool = new ChildPool();
afterEach(() => pool.killAll());
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'serve-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('npm run serve', () => {
  it(
    'serves the demo refund to E17 on a fresh file store, and exits on SIGTERM',
    async () => {
      const child = pool.spawnTs('serve', 'examples/booking/serve.ts', [
        '--port',
        '0',
        '--data-dir',
        join(dir, 'tasks'),
      ]);
      const line = await child.waitFor('statechart-agent service on ', 30_000);
      const origin = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line)![1]!;
      const inbox = async (user: string) =>
        (
          (await (await fetch(`${origin}/api/inbox`, { headers: { authorization: `Bearer ${user}` } })).json()) as {
            items: { summary: string }[];
          }
        ).items;
      // The demo starts its refund after listening: poll until it reaches the inbox (the deadline only reports a hang).
      let items = await inbox('E17');
      for (const deadline = Date.now() + scaled(15_000); items.length === 0 && Date.now() < deadline;) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        items = await inbox('E17');
      }
      expect(items.map((item) => item.summary)).toEqual(['Refund 199.00 on order O-1001 (projector arrived broken)']);
      expect(await inbox('E99')).toEqual([]);
      expect(await inbox('Z5')).toEqual([]);
      expect((await fetch(`${origin}/inbox`)).headers.get('content-security-policy')).toContain("script-src 'self'");
      child.signal('SIGTERM');
      expect((await child.ended(15_000)).code, child.transcript()).toBe(0);
    },
    scaled(60_000),
  );
});
