/**
 * The service's pages in a real browser (playwright-core driving Debian's chromium): E17 opens the approval inbox,
 * sees the 199.00 refund with the earlier 999.00 proposal, approves it, and watches the live task page reach done
 * over SSE; E99 (same tenant) and Z5 (another tenant) can neither see nor decide it, from their own browsers.
 *
 * Needs Debian's chromium. Without it the test is skipped, except under CI=true, where it fails.
 */
import { type Browser, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_USERS, REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { callerTaskId } from '../src/http/index.js';
import { MemoryStore } from '../src/index.js';
import { CHROMIUM_INSTALL, findChromium } from './support/chromium.js';
import { scaled } from './support/timeScale.js';
import { launchBrowser } from './support/browser.js';

const executable = findChromium();
const ci = process.env.CI === 'true';
const missing = `chromium is not installed; install it with: ${CHROMIUM_INSTALL}`;
const available = executable !== null || ci;
if (!available) console.warn(`test/service.browser.test.ts skipped: ${missing}`);

let service: DemoService;
let origin: string;
let browser: Browser;

/** A browser session signed in as `user` (the demo's cookie). */
async function signedIn(user: string): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  // Playwright's own 30 s for each action and wait, scaled like the test's.
  context.setDefaultTimeout(scaled(30_000));
  const page = await context.newPage();
  const response = await page.goto(`${origin}/login?user=${user}`);
  expect(response?.ok()).toBe(true);
  await page.close();
  return context;
}

describe.runIf(available)('service pages in chromium', () => {
  beforeAll(async () => {
    if (!executable) expect.fail(missing);
    service = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0 });
    origin = await service.app.listen({ port: 0, host: '127.0.0.1' });
    browser = await launchBrowser(executable);
  }, scaled(60_000));
  afterAll(async () => {
    await browser?.close();
    await service?.close();
  });

  it(
    'E17 approves the 199.00 refund in the inbox and the live page follows the task to done; E99 and Z5 cannot',
    async () => {
      const started = await fetch(`${origin}/api/tasks`, {
        method: 'POST',
        headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
        body: JSON.stringify(REFUND_START_BODY),
      });
      const taskId = ((await started.json()) as { status: { taskId: string } }).status.taskId;
      await service.orchestrator.settled(taskId);

      const e17 = await signedIn('E17');
      const errors: string[] = [];
      const inbox = await e17.newPage();
      inbox.on('pageerror', (error) => errors.push(error.message));
      await inbox.goto(`${origin}/inbox`);
      const item = inbox.locator(`[data-testid=inbox-item][data-task="${taskId}"]`);
      await item.waitFor();
      expect(await item.getByTestId('summary').textContent()).toBe(
        'Refund 199.00 on order O-1001 (projector arrived broken)',
      );
      // The approver sees why the host asks, and the tool's risk class.
      expect(await item.getByTestId('why').textContent()).toBe(
        "Asked because: the tool's rule asks for these arguments; it moves money · risk: writable",
      );
      expect(JSON.parse((await item.getByTestId('args').textContent())!)).toMatchObject({
        order_id: 'O-1001',
        amount_cents: 19_900,
      });
      expect(await item.getByTestId('earlier').textContent()).toContain('outside_mandate');
      expect(await item.getByTestId('difference').first().textContent()).toBe('amount_cents: 99900 → 19900');
      expect(await item.getByTestId('time-left').textContent()).toMatch(/^\d+ min \d\d s$/);

      // The live page, open before the decision: it follows the events.
      const live = await e17.newPage();
      live.on('pageerror', (error) => errors.push(error.message));
      await live.goto(`${origin}/tasks/${taskId}`);
      await live.locator('body[data-state=waiting_for_confirmation]').waitFor();
      await live.locator('[data-testid=chart] g.state.current[data-state="executing.awaitingConfirmation"]').waitFor();
      expect(await live.getByTestId('pending-summary').textContent()).toContain('Refund 199.00');

      // E99 (same tenant) and Z5 (another tenant): an empty inbox, no task page, and a decision from their page fails.
      for (const user of ['E99', 'Z5']) {
        const other = await signedIn(user);
        const page = await other.newPage();
        await page.goto(`${origin}/inbox`);
        await page.getByTestId('empty').waitFor();
        expect(await page.getByTestId('inbox-item').count()).toBe(0);
        await page.goto(`${origin}/tasks/${taskId}`);
        expect(await page.getByTestId('error').textContent()).toContain('task_not_found');
        const pending = (await service.orchestrator.status(taskId)).pendingConfirmation!;
        const answer = await page.evaluate(
          async ({ taskId, pending }) => {
            const session = (await (await fetch('/api/session')).json()) as { csrfToken: string };
            const response = await fetch(`/api/tasks/${taskId}/confirm`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-csrf-token': session.csrfToken },
              body: JSON.stringify({ confirmationId: pending.id, argsHash: pending.argsHash }),
            });
            return { status: response.status, body: (await response.json()) as { code: string } };
          },
          { taskId, pending: { id: pending.id, argsHash: pending.argsHash } },
        );
        expect([user, answer.status, answer.body.code]).toEqual([user, 404, 'task_not_found']);
        await other.close();
      }
      expect((await service.orchestrator.status(taskId)).state).toBe('waiting_for_confirmation');
      expect(await service.rows()).toEqual([]);

      await item.getByTestId('approve').click();
      await inbox.getByTestId('decided').waitFor();
      expect(await inbox.getByTestId('decided').textContent()).toContain('Approved "Refund 199.00');

      await live.locator('body[data-state=done][data-ended=true]').waitFor({ timeout: scaled(15_000) });
      await live.locator('[data-testid=chart] g.state.current.final[data-state="done"]').waitFor();
      expect(await live.getByTestId('state').textContent()).toBe('done');
      expect(await live.getByTestId('outcome').textContent()).toContain('goal_met');
      expect(await live.locator('[data-testid=timeline] tr[data-kind=confirmation]').count()).toBeGreaterThanOrEqual(2);
      expect(await live.locator('[data-testid=chart] g.edge.taken').count()).toBeGreaterThan(10);
      expect(await service.rows()).toEqual([expect.stringMatching(/^refund \S+ O-1001 199\.00 by E17$/)]);

      // Time travel: the task as it was at step 3, then live again.
      await live.getByTestId('travel-step').fill('3');
      await live.getByTestId('travel-go').click();
      await live.getByTestId('travel-note').getByText('after its first 3 audit entries').waitFor();
      await live.locator('[data-testid=chart] g.state.current[data-state="thinking"]').waitFor();
      await live.getByTestId('travel-live').click();
      await live.locator('[data-testid=chart] g.state.current[data-state="done"]').waitFor();
      expect(errors).toEqual([]);
      await e17.close();
    },
    scaled(60_000),
  );

  it(
    'steps a task from its live page: next, next, next, confirm, next, done',
    async () => {
      const stepped = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0, step: true });
      try {
        const base = await stepped.app.listen({ port: 0, host: '127.0.0.1' });
        const response = await fetch(`${base}/api/tasks`, {
          method: 'POST',
          headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
          body: JSON.stringify({ ...REFUND_START_BODY, taskId: 'stepped-1' }),
        });
        expect(response.status).toBe(201);
        // Stored under its caller (src/http/start.ts); the page's URL takes the caller's own id.
        await stepped.stepper!.whenWaiting(callerTaskId(DEMO_USERS.E17!, 'stepped-1'));
        const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
        context.setDefaultTimeout(scaled(30_000));
        const page = await context.newPage();
        await page.goto(`${base}/login?user=E17&next=/tasks/stepped-1`);
        const result = page.getByTestId('control-result');
        for (let turn = 1; turn <= 3; turn++) {
          await page.locator('[data-testid=cmd-next]:not([disabled])').click();
          // Its answer, accepted or refused: a refusal fails here with the server's words, not after a long wait.
          // (Waited for by a locator: `waitForFunction` with a string evaluates it again with `eval` when its first
          // try finds no answer yet, which the page's Content-Security-Policy refuses.)
          await result.filter({ hasText: /^next (→|refused)/ }).waitFor();
          expect(await result.textContent()).toMatch(/^next → /);
          // (A string: the tests compile without the DOM's types.)
          await page.evaluate("document.querySelector('[data-testid=control-result]').textContent = ''");
        }
        await page.locator('body[data-state=waiting_for_confirmation]').waitFor();
        expect(await page.getByTestId('pending-summary').textContent()).toContain('Refund 199.00');
        await page.locator('[data-testid=cmd-confirm]:not([disabled])').click();
        await result.getByText('confirm → ').waitFor();
        await page.locator('[data-testid=cmd-next]:not([disabled])').click();
        await page.locator('body[data-state=done][data-ended=true]').waitFor({ timeout: scaled(15_000) });
        expect(await stepped.rows()).toEqual([expect.stringMatching(/^refund \S+ O-1001 199\.00 by E17$/)]);
        await context.close();
      } finally {
        await stepped.close();
      }
    },
    scaled(60_000),
  );
});
