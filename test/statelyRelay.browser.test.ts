/**
 * The relay's page in a real browser (playwright-core driving Debian's chromium), with a local stand-in for the
 * Stately inspector's frame (served from another origin, as stately.ai is): the page's WebSocket passes the relay's
 * Origin and token checks as a browser sends them, the page waits for the frame's `@statelyai.connected`, then
 * posts it the backlog and the live frames, in order, at the frame's origin; the definition names every guard; a
 * step shown with `showStep` arrives as the task's snapshot.
 *
 * Needs Debian's chromium. Without it the test is skipped, except under CI=true, where it fails.
 */
import { once } from 'node:events';
import http from 'node:http';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replayAudit } from '../src/audit/replayAudit.js';
import { OFFLINE_NOTICE_MS } from '../src/inspect/relayPage.js';
import { createStatelyInspection } from '../src/inspect/statelyInspector.js';
import { reply } from '../src/testing/index.js';
import { CHROMIUM_INSTALL, findChromium } from './support/chromium.js';
import { CLERK, cashDesk } from './support/domain.js';
import { scaled } from './support/timeScale.js';
import { launchBrowser } from './support/browser.js';

const executable = findChromium();
const ci = process.env.CI === 'true';
const missing = `chromium is not installed; install it with: ${CHROMIUM_INSTALL}`;
const available = executable !== null || ci;
if (!available) console.warn(`test/statelyRelay.browser.test.ts skipped: ${missing}`);

/** The stand-in inspector: records what the embedding page posts, after saying it is connected. */
const STAND_IN = `<!DOCTYPE html><html><body><script>
  window.received = [];
  window.addEventListener('message', (e) => window.received.push({ origin: e.origin, data: e.data }));
  setTimeout(() => window.parent.postMessage({ type: '@statelyai.connected' }, '*'), 300);
</script></body></html>`;

type Received = { origin: string; data: { type: string; sessionId?: string; [field: string]: unknown } };

let browser: Browser;
let standIn: http.Server;
let standInUrl: string;

describe.runIf(available)('the Stately relay page in chromium', () => {
  beforeAll(async () => {
    if (!executable) expect.fail(missing);
    standIn = http.createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end(STAND_IN);
    });
    standIn.listen(0, '127.0.0.1');
    await once(standIn, 'listening');
    // Another origin than the relay's (localhost, not 127.0.0.1), as stately.ai is.
    standInUrl = `http://localhost:${(standIn.address() as { port: number }).port}/inspect`;
    browser = await launchBrowser(executable);
  }, scaled(60_000));
  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => standIn?.close(resolve));
  });

  it(
    'feeds the inspector frame the backlog, then live frames and steps, at its origin only',
    async () => {
      const inspection = await createStatelyInspection({ port: 0, inspectorUrl: standInUrl });
      const closers: (() => Promise<unknown>)[] = [() => inspection.stop()];
      try {
        const run = async (taskId: string) => {
          const { orchestrator } = cashDesk({ script: [reply.answer('Nothing to pay.')], inspect: inspection.inspect });
          closers.push(() => orchestrator.close());
          expect((await orchestrator.run({ principal: CLERK, goal: 'Say hello', taskId })).state).toBe('answered');
          return orchestrator;
        };
        await run('before-page');

        const context = await browser.newContext();
        context.setDefaultTimeout(scaled(30_000));
        const page = await context.newPage();
        const response = await page.goto(inspection.url);
        expect(response?.status()).toBe(200);
        expect(response?.headers()['referrer-policy']).toBe('no-referrer');
        const frame = page.frames().find((f) => f.url() === standInUrl)!;
        expect(frame).toBeDefined();
        const received = () => frame.evaluate(() => (globalThis as unknown as { received: Received[] }).received);
        const has = async (predicate: (r: Received) => boolean) =>
          expect.poll(async () => (await received()).some(predicate), { timeout: scaled(10_000) }).toBe(true);

        // The backlog arrives once the frame says it is connected.
        await has((r) => r.data.sessionId === 'task:before-page' && r.data.type === '@xstate.snapshot');
        // Live frames and a step.
        const live = await run('after-page');
        await has((r) => r.data.sessionId === 'task:after-page' && r.data.type === '@xstate.snapshot');
        const audit = await live.audit('after-page');
        inspection.showStep({
          taskId: 'after-page',
          replayed: replayAudit(audit, 1),
          access: await live.status('after-page'),
        });
        await has((r) => (r.data.event as { type?: string } | undefined)?.type === 'inspect.step');

        const all = await received();
        // Every message came from the relay page (the top window), at the relay's origin.
        expect(new Set(all.map((r) => r.origin))).toEqual(new Set([inspection.origin]));
        const frames = all.map((r) => r.data);
        const actors = frames.filter((f) => f.type === '@xstate.actor' && f.parentId === undefined);
        expect(actors.map((f) => f.sessionId)).toEqual(['task:before-page', 'task:after-page']);
        expect(actors[0]!.definition as string).toContain('"guard":"not(hasScopesForTool)"');
        // In order: a task's actor frame comes before its snapshots.
        const firstSnapshot = frames.findIndex(
          (f) => f.sessionId === 'task:after-page' && f.type === '@xstate.snapshot',
        );
        expect(frames.findIndex((f) => f === actors[1])).toBeLessThan(firstSnapshot);
        const step = frames.find((f) => (f.event as { type?: string } | undefined)?.type === 'inspect.step')!;
        expect(step).toMatchObject({ sessionId: 'task:after-page', snapshot: { context: { step: 1 } } });
        await context.close();
      } finally {
        for (const close of closers.reverse()) await close();
      }
    },
    scaled(90_000),
  );

  it(
    'says so when the inspector frame never answers (offline), and stays quiet when it does',
    async () => {
      // A port nothing listens on: the frame fails to load, as stately.ai does offline.
      const closed = http.createServer();
      closed.listen(0, '127.0.0.1');
      await once(closed, 'listening');
      const port = (closed.address() as { port: number }).port;
      await new Promise((resolve) => closed.close(resolve));
      const offline = await createStatelyInspection({ port: 0, inspectorUrl: `http://localhost:${port}/inspect` });
      const online = await createStatelyInspection({ port: 0, inspectorUrl: standInUrl });
      const context = await browser.newContext();
      try {
        context.setDefaultTimeout(scaled(30_000));
        // The connected frame's page first: by the time the offline page shows its notice, this one has waited as long.
        const other = await context.newPage();
        await other.goto(online.url);
        const page = await context.newPage();
        await page.goto(offline.url);
        expect(await page.locator('#offline').isVisible()).toBe(false);
        await page.locator('#offline').waitFor({ state: 'visible', timeout: OFFLINE_NOTICE_MS + scaled(10_000) });
        expect(await page.locator('#offline').textContent()).toMatch(/did not answer[\s\S]*\/console/);

        expect(await other.locator('#offline').isVisible()).toBe(false);
      } finally {
        await context.close();
        await offline.stop();
        await online.stop();
      }
    },
    scaled(90_000),
  );
});
