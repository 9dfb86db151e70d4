/**
 * The live task page stops reopening a stream the server refuses for good, in a real browser (playwright-core driving
 * Debian's chromium). The page reopens a stream the browser gave up on (a closing server's 503: see
 * shutdown.browser.test.ts), but a task erased while its page was open is refused for good (404, as an unknown task):
 * before reopening, the page asks the task's status URL, and on 403, 404 or 410 it stops and says why, instead of
 * asking again every 1 to 10 s for as long as the tab stays open.
 *
 * Needs Debian's chromium. Without it the test is skipped, except under CI=true, where it fails.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reply } from '../src/testing/scriptedModel.js';
import { CHROMIUM_INSTALL, findChromium } from './support/chromium.js';
import { startParent, subtaskSetup } from './support/subtasks.js';
import { scaled } from './support/timeScale.js';
import { closePages, type PageServer, servePages } from './support/pageServer.js';

const executable = findChromium();
const ci = process.env.CI === 'true';
const available = executable !== null || ci;
if (!available) console.warn(`test/taskPageRefused.browser.test.ts skipped: chromium is missing (${CHROMIUM_INSTALL})`);

describe.runIf(available)('the task page, when the server refuses its stream for good', () => {
  let server: PageServer;
  // The task asks its user a question and waits: at rest, so it can be erased while its page follows it.
  const s = subtaskSetup({ script: [reply.ask('Which order do you mean?')] });

  beforeAll(async () => {
    if (!executable) expect.fail(`chromium is not installed; install it with: ${CHROMIUM_INSTALL}`);
    server = await servePages(s.orchestrator, executable!);
  }, scaled(60_000));
  afterAll(async () => {
    await closePages(server);
    await s.orchestrator.close();
  });

  it(
    'stops reopening it once the task is erased (404) and says why',
    async () => {
      await startParent(s.orchestrator, 'erased-1');
      expect((await s.orchestrator.settled('erased-1')).state).toBe('waiting_for_user');
      const context = await server.browser.newContext();
      context.setDefaultTimeout(scaled(30_000));
      const login = await context.newPage();
      expect((await login.goto(`${server.origin}/login?user=E17`))?.ok()).toBe(true);
      const errors: string[] = [];
      const page = await context.newPage();
      page.on('pageerror', (error) => errors.push(error.message));
      const streams: number[] = [];
      page.on('response', (response) => {
        if (new URL(response.url()).pathname === '/api/tasks/erased-1/events') streams.push(response.status());
      });
      // The page's timers on a clock the test can run forward: its retries, were there any, come at once.
      await page.clock.install();
      await page.goto(`${server.origin}/tasks/erased-1`);
      await page.locator('body[data-state=waiting_for_user]').waitFor();
      await expect.poll(() => page.getByTestId('live').textContent()).toBe('live: following the task events');

      // The task is erased while its page follows it, then the connection drops (a restart, a proxy): the browser
      // reconnects by itself (after the stream's `retry`), is refused with 404 (an erased task is not found, as an
      // unknown one) and gives the stream up.
      await s.orchestrator.erase('erased-1', { reason: 'gdpr_erasure', by: 'test' });
      server.app.server.closeAllConnections();
      await page.locator('body[data-live=refused]').waitFor({ timeout: scaled(15_000) });
      expect(await page.getByTestId('live').textContent()).toMatch(
        /^the server refuses this task's events for good \(404 task_not_found: .+\): the page no longer follows it/,
      );
      expect(streams).toEqual([200, 404]);

      // A minute of the page's time later, it has not asked again.
      await page.clock.runFor(60_000);
      await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 0)));
      expect(streams).toEqual([200, 404]);
      expect(await page.locator('body').getAttribute('data-live')).toBe('refused');
      expect(errors).toEqual([]);
      await context.close();
    },
    scaled(60_000),
  );
});
