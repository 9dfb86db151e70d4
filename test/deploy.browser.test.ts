/**
 * The service's pages as deployed (playwright-core driving Debian's chromium): behind a reverse proxy that rewrites
 * `Host` like nginx, E17 approves the refund from the inbox served through the proxy; and an inbox opened before a
 * restart (no fixed `csrfSecret`, so the token it holds is dead) still approves: the page fetches a new token and
 * retries once.
 *
 * Needs Debian's chromium. Without it the test is skipped, except under CI=true, where it fails.
 */
import { type Browser, type BrowserContext } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  REFUND_START_BODY,
  type DemoService,
  type DemoServiceOptions,
  createDemoService,
} from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';
import { CHROMIUM_INSTALL, findChromium } from './support/chromium.js';
import { type ReverseProxy, startReverseProxy } from './support/reverseProxy.js';
import { scaled } from './support/timeScale.js';
import { launchBrowser } from './support/browser.js';

const executable = findChromium();
const ci = process.env.CI === 'true';
const missing = `chromium is not installed; install it with: ${CHROMIUM_INSTALL}`;
const available = executable !== null || ci;
if (!available) console.warn(`test/deploy.browser.test.ts skipped: ${missing}`);

let browser: Browser;
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function demo(options: Partial<DemoServiceOptions> = {}): Promise<{ service: DemoService; origin: string }> {
  const service = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0, ...options });
  cleanups.push(() => service.close());
  const origin = await service.app.listen({ port: 0, host: '127.0.0.1' });
  return { service, origin };
}

/** Starts the demo refund as E17 (bearer, no browser) and waits for its confirmation. */
async function waitingRefund(service: DemoService, origin: string): Promise<string> {
  const started = await fetch(`${origin}/api/tasks`, {
    method: 'POST',
    headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
    body: JSON.stringify(REFUND_START_BODY),
  });
  expect(started.status).toBe(201);
  const taskId = ((await started.json()) as { status: { taskId: string } }).status.taskId;
  expect((await service.orchestrator.settled(taskId)).state).toBe('waiting_for_confirmation');
  return taskId;
}

async function signedIn(origin: string, user: string): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  cleanups.push(() => context.close());
  context.setDefaultTimeout(scaled(30_000));
  const page = await context.newPage();
  expect((await page.goto(`${origin}/login?user=${user}`))?.ok()).toBe(true);
  await page.close();
  return context;
}

/** Opens the inbox at `origin`, clicks Approve on `taskId` and returns what the page says. */
async function approveInInbox(context: BrowserContext, origin: string, taskId: string) {
  const inbox = await context.newPage();
  await inbox.goto(`${origin}/inbox`);
  const item = inbox.locator(`[data-testid=inbox-item][data-task="${taskId}"]`);
  await item.waitFor();
  return { inbox, item };
}

describe.runIf(available)('deployed pages in chromium', () => {
  beforeAll(async () => {
    if (!executable) expect.fail(missing);
    browser = await launchBrowser(executable);
  }, scaled(60_000));
  afterAll(async () => {
    await browser?.close();
  });

  it(
    'approves through a proxy that rewrites Host, with trustProxy and X-Forwarded-Host',
    async () => {
      const { service, origin } = await demo({ trustProxy: '127.0.0.2' });
      const proxy: ReverseProxy = await startReverseProxy(origin, { forwardedHeaders: true });
      cleanups.push(() => proxy.close());
      const taskId = await waitingRefund(service, origin);
      const e17 = await signedIn(proxy.origin, 'E17');
      const { inbox, item } = await approveInInbox(e17, proxy.origin, taskId);
      await item.getByTestId('approve').click();
      await inbox.getByTestId('decided').waitFor();
      expect(await inbox.getByTestId('decided').textContent()).toContain('Approved "Refund 199.00');
      expect((await service.orchestrator.settled(taskId)).state).toBe('done');
    },
    scaled(60_000),
  );

  it(
    'is refused (cross_origin) through the same proxy without trustProxy: the default stays strict',
    async () => {
      const { service, origin } = await demo();
      const proxy = await startReverseProxy(origin, { forwardedHeaders: true });
      cleanups.push(() => proxy.close());
      const taskId = await waitingRefund(service, origin);
      const e17 = await signedIn(proxy.origin, 'E17');
      const { item } = await approveInInbox(e17, proxy.origin, taskId);
      await item.getByTestId('approve').click();
      await item.getByTestId('result').getByText('Refused: cross_origin').waitFor();
      expect((await service.orchestrator.status(taskId)).state).toBe('waiting_for_confirmation');
    },
    scaled(60_000),
  );

  it(
    'approves from an inbox opened before a restart without csrfSecret: the page refreshes its token and retries once',
    async () => {
      const store = new MemoryStore();
      const first = await createDemoService({ store, expirySweepMs: 0 });
      const origin = await first.app.listen({ port: 0, host: '127.0.0.1' });
      const taskId = await waitingRefund(first, origin);
      const e17 = await signedIn(origin, 'E17');
      const { inbox, item } = await approveInInbox(e17, origin, taskId);
      // The page holds the first process's token; the process restarts on the same port with a new random secret.
      await inbox.getByTestId('who').getByText('signed in as E17').waitFor();
      await first.close();
      const second = await createDemoService({ store, expirySweepMs: 0 });
      cleanups.push(() => second.close());
      await second.app.listen({ port: Number(new URL(origin).port), host: '127.0.0.1' });
      const posts: { url: string; status: number }[] = [];
      inbox.on('response', (response) => {
        if (response.request().method() === 'POST') posts.push({ url: response.url(), status: response.status() });
      });
      await item.getByTestId('approve').click();
      // Either answer ends the wait: approved, or refused on the card.
      const answer = inbox.locator('[data-testid=decided], [data-testid=result].refused').first();
      await answer.waitFor();
      expect(await answer.textContent()).toContain('Approved "Refund 199.00');
      expect(posts.map((p) => p.status)).toEqual([403, 200]);
      expect((await second.orchestrator.settled(taskId)).state).toBe('done');
    },
    scaled(60_000),
  );
});
