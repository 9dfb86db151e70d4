/**
 * `npm run serve` as a user runs it: a fresh data folder, no server, no keys. It listens on 127.0.0.1, starts the
 * demo refund for E17, serves it to E17's inbox (and to nobody else's), and stops cleanly on SIGTERM, also with a
 * live page's event stream open (a browser tab never leaves by itself).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { networkInterfaces, tmpdir } from 'node:os';
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
    'serves the demo refunds on a fresh file store (E17 confirms one, M1 approves the other), and exits on SIGTERM',
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
            items: { summary: string; taskId: string }[];
          }
        ).items;
      // The demo starts its refund after listening: poll until it reaches the inbox (the deadline only reports a hang).
      const polled = async (user: string) => {
        let found = await inbox(user);
        for (const deadline = Date.now() + scaled(15_000); found.length === 0 && Date.now() < deadline;) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          found = await inbox(user);
        }
        return found;
      };
      const items = await polled('E17');
      expect(items.map((item) => item.summary)).toEqual(['Refund 199.00 on order O-1001 (projector arrived broken)']);
      // Four eyes in the shipped demo: the manager's inbox holds E17's 450.00 refund (it was always empty before).
      expect((await polled('M1')).map((item) => item.summary)).toEqual([
        'Refund 450.00 on order O-1002 (cracked desk top; the customer keeps the desk)',
      ]);
      expect(await inbox('E99')).toEqual([]);
      expect(await inbox('Z5')).toEqual([]);
      expect((await fetch(`${origin}/inbox`)).headers.get('content-security-policy')).toContain("script-src 'self'");
      // A live page's stream stays open until the server ends it with `shutdown`.
      const stream = await fetch(`${origin}/api/tasks/${items[0]!.taskId}/events`, {
        headers: { authorization: 'Bearer E17' },
      });
      expect(stream.status).toBe(200);
      const reader = stream.body!.getReader();
      let received = new TextDecoder().decode((await reader.read()).value);
      child.signal('SIGTERM');
      // Before the stream ended first, the server waited on it: 13-55 s, or for good with a tab that stays open.
      expect((await child.ended(10_000)).code, child.transcript()).toBe(0);
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
        received += new TextDecoder().decode(chunk.value);
      expect(received).toContain('event: shutdown');
      // On loopback: the bind address said, and no warning.
      expect(line).toMatch(/\(listening on 127\.0\.0\.1:\d+, file store /);
      expect(child.stderr).not.toContain('WARNING');
    },
    scaled(60_000),
  );

  it(
    'says where it listens with --host 0.0.0.0, and warns loudly that its sign-in by name is on the network',
    async () => {
      const child = pool.spawnTs('serve', 'examples/booking/serve.ts', [
        '--port',
        '0',
        '--host',
        '0.0.0.0',
        '--empty',
        '--data-dir',
        join(dir, 'network'),
      ]);
      const line = await child.waitFor('statechart-agent service on ', 30_000);
      const port = /:(\d+) \(listening on/.exec(line)?.[1];
      // The real bind address (before, only a 127.0.0.1 URL, as if it listened on loopback alone).
      expect(line, child.transcript()).toContain(`(listening on 0.0.0.0:${port}, `);
      // The warning goes to stderr, right after the stdout lines: wait for it (the deadline only reports a hang).
      for (const deadline = Date.now() + scaled(10_000); !child.stderr.includes('Run it off loopback');) {
        if (Date.now() > deadline || !child.running) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(child.stderr).toContain(`WARNING: listening on 0.0.0.0:${port} (every network interface)`);
      // And where the network reaches it: each of this machine's own IPv4 addresses (none on a loopback-only box).
      for (const net of Object.values(networkInterfaces()).flat())
        if (net && !net.internal && net.family === 'IPv4')
          expect(child.stderr).toContain(`http://${net.address}:${port}`);
      expect(child.stderr).toContain('anyone who can reach this port can act as any demo user (E17, M1...) by name');
      // Still served on this machine (0.0.0.0 includes loopback), and the sign-in by name works there: the danger.
      const origin = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line)![1]!;
      expect((await fetch(`${origin}/api/inbox`, { headers: { authorization: 'Bearer M1' } })).status).toBe(200);
      child.signal('SIGTERM');
      expect((await child.ended(10_000)).code, child.transcript()).toBe(0);
    },
    scaled(60_000),
  );
});
