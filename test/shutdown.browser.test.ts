/**
 * A deploy with a live page open, as an operator meets it (playwright-core driving Debian's chromium): `npm run serve`
 * runs as a real process on a file store, E17 has the demo refund's task page open (its EventSource connected), and
 * the server gets SIGTERM. The process exits within 2 s (a tab never leaves by itself: before the stream was ended
 * by the server, shutdown waited 13-55 s on it), the page receives the `shutdown` event and says it is reconnecting,
 * and a second instance on the same port and store takes the page over: it resumes after the last event it received
 * (Last-Event-ID) and follows the task to its end when E17 confirms through the new instance.
 *
 * Needs Debian's chromium. Without it the test is skipped, except under CI=true, where it fails.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_INSTALL, findChromium } from './support/chromium.js';
import { scaled } from './support/timeScale.js';
import { type Child, ChildPool } from './support/workers.js';
import { launchBrowser } from './support/browser.js';

const executable = findChromium();
const ci = process.env.CI === 'true';
const missing = `chromium is not installed; install it with: ${CHROMIUM_INSTALL}`;
const available = executable !== null || ci;
if (!available) console.warn(`test/shutdown.browser.test.ts skipped: ${missing}`);

/**
 * The promise of issue 27: from SIGTERM to the process's exit, with a page's stream open (2 s on a quiet machine).
 * Scaled with TEST_TIME_SCALE like every other limit: on a loaded machine the process's own exit (closing its
 * server, store and pipes) takes longer, and CI's factor of 3 still leaves the budget far below the hang it guards
 * against (13-55 s, waiting on the tab's stream).
 */
const EXIT_BUDGET_MS = scaled(2_000);

const pool = new ChildPool();
let browser: Browser;
let dir: string;
afterEach(() => pool.killAll());

/** Starts `npm run serve`'s entry on `port` (0: a free one) and `dataDir`; resolves with its origin. */
async function serve(name: string, port: number, dataDir: string, extra: string[] = []) {
  const child = pool.spawnTs(name, 'examples/booking/serve.ts', [
    '--port',
    String(port),
    '--data-dir',
    dataDir,
    ...extra,
  ]);
  const line = await child.waitFor('statechart-agent service on ', 30_000);
  const origin = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line)![1]!;
  return { child, origin, port: Number(new URL(origin).port) };
}

/**
 * Milliseconds from SIGTERM to the process's `exit` event (its own, not the later close of its pipes). A process still
 * running after a generous wait (the hang this guards against) gives `Infinity`, so the test fails on the budget
 * rather than on its own timeout.
 */
async function timedSigterm(child: Child): Promise<{ ms: number; code: number | null }> {
  let timer: NodeJS.Timeout | undefined;
  const exited = new Promise<{ at: number; code: number | null }>((resolve) => {
    child.process.once('exit', (code) => resolve({ at: performance.now(), code }));
    timer = setTimeout(() => resolve({ at: Infinity, code: null }), scaled(15_000));
  });
  const sent = performance.now();
  child.signal('SIGTERM');
  const { at, code } = await exited;
  clearTimeout(timer);
  return { ms: at - sent, code };
}

/**
 * Stands in on `port` for a server that is closing: every request gets 503, as Fastify answers while it closes. Returns
 * once the page's EventSource has come back and been refused at least once, and the port is free again.
 */
async function answerClosing(port: number): Promise<void> {
  let refused!: () => void;
  const streamRefused = new Promise<void>((resolve) => (refused = resolve));
  const server = createServer((request, response) => {
    response.writeHead(503, { 'content-type': 'application/json', connection: 'close' });
    response.end('{"code":"closing"}');
    if (request.url?.includes('/events')) refused();
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  try {
    await streamRefused;
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

async function api<T>(origin: string, path: string, init: RequestInit = {}): Promise<T> {
  const response = await fetch(`${origin}${path}`, {
    ...init,
    headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
  });
  expect(response.ok, `${path}: ${response.status} ${await response.clone().text()}`).toBe(true);
  return (await response.json()) as T;
}

describe.runIf(available)('shutdown with a task page open, in chromium', () => {
  beforeAll(async () => {
    if (!executable) expect.fail(missing);
    dir = await mkdtemp(join(tmpdir(), 'shutdown-'));
    browser = await launchBrowser(executable);
  }, scaled(60_000));
  afterAll(async () => {
    await browser?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(
    'exits within 2 s of SIGTERM; the page gets `shutdown`, reconnects to the next instance and follows the task',
    async () => {
      const dataDir = join(dir, 'tasks');
      const first = await serve('serve-1', 0, dataDir);
      // The demo starts E17's refund after listening: poll its inbox (the deadline only reports a hang).
      let taskId: string | undefined;
      for (const deadline = Date.now() + scaled(20_000); !taskId && Date.now() < deadline;) {
        const { items } = await api<{ items: { taskId: string }[] }>(first.origin, '/api/inbox');
        taskId = items[0]?.taskId;
        if (!taskId) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(taskId, 'the demo refund never reached E17').toBeDefined();

      const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
      context.setDefaultTimeout(scaled(30_000));
      try {
        const page = await context.newPage();
        // What the page's EventSource receives, from the browser's own network layer (not from the page's text).
        const cdp = await context.newCDPSession(page);
        const received: { eventName: string; eventId: string }[] = [];
        cdp.on('Network.eventSourceMessageReceived', ({ eventName, eventId }) => received.push({ eventName, eventId }));
        await cdp.send('Network.enable');
        expect((await page.goto(`${first.origin}/login?user=E17&next=/tasks/${taskId}`))?.ok()).toBe(true);
        await page.locator('body[data-state=waiting_for_confirmation]').waitFor();
        await page.getByTestId('live').getByText('live: following the task events').waitFor();
        const timelineRows = await page.locator('[data-testid=timeline] tr').count();
        expect(timelineRows).toBeGreaterThan(0);

        const { ms, code } = await timedSigterm(first.child);
        console.log(`shutdown with a live page open: exit ${ms.toFixed(0)} ms after SIGTERM`);
        expect(ms, `exit took ${ms.toFixed(0)} ms\n${first.child.transcript()}`).toBeLessThan(EXIT_BUDGET_MS);
        expect(code, first.child.transcript()).toBe(0);

        // The last thing the stream carried was the server's `shutdown`, and the page says why it is reconnecting.
        expect(received.at(-1)?.eventName).toBe('shutdown');
        await page.locator('body[data-live=restarting]').waitFor();
        expect(await page.getByTestId('live').textContent()).toBe('the server is restarting: reconnecting…');
        const lastId = received.filter((event) => event.eventId !== '').at(-1)!.eventId;

        // A slow close: the old instance still answers (Fastify gives 503 while it closes) when the browser comes
        // back. The browser gives such a stream up for good; the page must open it again itself.
        await answerClosing(first.port);

        // The next instance: same port (the address the page knows), same store, nothing new started.
        const second = await serve('serve-2', first.port, dataDir, ['--empty']);
        expect(second.origin).toBe(first.origin);
        await page.locator('body:not([data-live])').waitFor({ timeout: scaled(20_000) });
        expect(await page.getByTestId('live').textContent()).toBe('live: following the task events');
        // Resumed after the last event received (Last-Event-ID): nothing sent twice, the task still shown.
        expect(await page.getByTestId('task-id').textContent()).toBe(taskId);
        expect(await page.getByTestId('state').textContent()).toBe('waiting_for_confirmation');
        expect(await page.locator('[data-testid=timeline] tr').count()).toBe(timelineRows);
        const afterShutdown = received.slice(received.findIndex((event) => event.eventName === 'shutdown') + 1);
        expect(
          afterShutdown.filter((event) => event.eventId !== '' && Number(event.eventId) <= Number(lastId)),
        ).toEqual([]);

        // The reconnected stream is live on the new instance: E17 confirms there, the open page follows to the end.
        const { status } = await api<{ status: { pendingConfirmation: { id: string; argsHash: string } } }>(
          second.origin,
          `/api/tasks/${taskId}`,
        );
        await api(second.origin, `/api/tasks/${taskId}/confirm`, {
          method: 'POST',
          body: JSON.stringify({
            confirmationId: status.pendingConfirmation.id,
            argsHash: status.pendingConfirmation.argsHash,
          }),
        });
        await page.locator('body[data-state=done][data-ended=true]').waitFor({ timeout: scaled(20_000) });
        expect(await page.getByTestId('live').textContent()).toBe('the task has ended: every event received');
        expect(await page.locator('[data-testid=timeline] tr').count()).toBeGreaterThan(timelineRows);

        // The second instance, with no stream open any more (the task ended), also stops in time.
        const again = await timedSigterm(second.child);
        console.log(`second instance: exit ${again.ms.toFixed(0)} ms after SIGTERM`);
        expect(again.ms, second.child.transcript()).toBeLessThan(EXIT_BUDGET_MS);
        expect(again.code, second.child.transcript()).toBe(0);
      } finally {
        await context.close();
      }
    },
    scaled(120_000),
  );
});
