/**
 * The live task page links a parent and its sub-task both ways, in a real browser (playwright-core driving Debian's
 * chromium): the parent, waiting for its child, names it with its status; the child's page names its parent.
 *
 * Needs Debian's chromium. Without it the test is skipped, except under CI=true, where it fails.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_INSTALL, findChromium } from './support/chromium.js';
import { childWaiting, startParent, subtaskSetup } from './support/subtasks.js';
import { scaled } from './support/timeScale.js';
import { closePages, type PageServer, servePages } from './support/pageServer.js';

const executable = findChromium();
const ci = process.env.CI === 'true';
const available = executable !== null || ci;
if (!available) console.warn(`test/subtaskPage.browser.test.ts skipped: chromium is missing (${CHROMIUM_INSTALL})`);

describe.runIf(available)('sub-task links on the task page', () => {
  let server: PageServer;
  const s = subtaskSetup();

  beforeAll(async () => {
    if (!executable) expect.fail(`chromium is not installed; install it with: ${CHROMIUM_INSTALL}`);
    server = await servePages(s.orchestrator, executable!);
  }, scaled(60_000));
  afterAll(async () => {
    await closePages(server);
    await s.orchestrator.close();
  });

  it(
    "shows the parent's sub-task with its status, and the child's parent, each as a link",
    async () => {
      await startParent(s.orchestrator, 'page-parent');
      const child = await childWaiting(s.orchestrator, 'page-parent');
      const context = await server.browser.newContext();
      context.setDefaultTimeout(scaled(30_000));
      const login = await context.newPage();
      expect((await login.goto(`${server.origin}/login?user=E17`))?.ok()).toBe(true);
      const errors: string[] = [];
      const page = await context.newPage();
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${server.origin}/tasks/page-parent`);
      await page.locator('body[data-state=waiting_for_subtask]').waitFor();
      const links = page.getByTestId('links');
      expect(await links.textContent()).toBe(`sub-tasks: ${child.taskId} (delegate_refund: running)`);
      expect(await links.locator('a').getAttribute('href')).toBe(`/tasks/${child.taskId}`);

      await page.goto(`${server.origin}/tasks/${child.taskId}`);
      await page.locator('body[data-state=waiting_for_confirmation]').waitFor();
      expect(await page.getByTestId('links').textContent()).toBe(
        'sub-task of page-parent (its delegate_refund call call_1_1)',
      );
      expect(errors).toEqual([]);
      await context.close();
    },
    scaled(60_000),
  );
});
