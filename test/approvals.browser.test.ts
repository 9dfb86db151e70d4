/**
 * The four-eyes refund as its two people meet it, in a real browser (playwright-core driving Debian's chromium):
 * E17 asks for 450.00 on O-1002 and M1, the manager, approves it. Each sees only their own controls (E17 no Confirm,
 * M1 no Cancel, each with the reason on the page), M1's inbox shows the money, the mandate, the risk and the change
 * since the refused 600.00, a reject needs a typed reason, and after approving M1 still sees what the approval did.
 *
 * Needs Debian's chromium. Without it the test is skipped, except under CI=true, where it fails.
 */
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { APPROVAL_REFUND_START_BODY, type DemoService, createDemoService } from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';
import { CHROMIUM_INSTALL, findChromium } from './support/chromium.js';
import { scaled } from './support/timeScale.js';
import { launchBrowser } from './support/browser.js';

const executable = findChromium();
const ci = process.env.CI === 'true';
const missing = `chromium is not installed; install it with: ${CHROMIUM_INSTALL}`;
const available = executable !== null || ci;
if (!available) console.warn(`test/approvals.browser.test.ts skipped: ${missing}`);

let service: DemoService;
let origin: string;
let browser: Browser;
const errors: string[] = [];

async function signedIn(user: string): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  context.setDefaultTimeout(scaled(30_000));
  const page = await context.newPage();
  expect((await page.goto(`${origin}/login?user=${user}`))?.ok()).toBe(true);
  await page.close();
  return context;
}

async function open(context: BrowserContext, path: string): Promise<Page> {
  const page = await context.newPage();
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(`${origin}${path}`);
  return page;
}

describe.runIf(available)('four eyes in chromium', () => {
  beforeAll(async () => {
    if (!executable) expect.fail(missing);
    browser = await launchBrowser(executable);
  }, scaled(60_000));
  afterAll(() => browser?.close());
  // A fresh service per test: its refund desk would otherwise remember the 450.00 already refunded on O-1002.
  beforeEach(async () => {
    service = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0 });
    origin = await service.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterEach(() => service?.close());

  it(
    'shows the requester and the approver only their controls; M1 approves and still sees the outcome',
    async () => {
      const started = await fetch(`${origin}/api/tasks`, {
        method: 'POST',
        headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
        body: JSON.stringify(APPROVAL_REFUND_START_BODY),
      });
      const taskId = ((await started.json()) as { status: { taskId: string } }).status.taskId;
      expect((await service.orchestrator.settled(taskId)).state).toBe('waiting_for_confirmation');

      // E17, the requester: may withdraw (reject) or cancel, never confirm; the page says why.
      const e17 = await signedIn('E17');
      const mine = await open(e17, `/tasks/${taskId}`);
      await mine.locator('body[data-state=waiting_for_confirmation]').waitFor();
      expect(await mine.getByTestId('cmd-confirm').isHidden()).toBe(true);
      expect(await mine.getByTestId('cmd-reject').isEnabled()).toBe(true);
      expect(await mine.getByTestId('cmd-cancel').isEnabled()).toBe(true);
      const e17Why = await mine.getByTestId('may-not').textContent();
      expect(e17Why).toContain('self_approval');
      expect(e17Why).toContain('refunds:approve');
      expect(await mine.getByTestId('access').textContent()).toBe('your task');

      // M1, the approver: may approve or reject, never cancel E17's task.
      const m1 = await signedIn('M1');
      const theirs = await open(m1, `/tasks/${taskId}`);
      await theirs.locator('body[data-state=waiting_for_confirmation][data-access=approver]').waitFor();
      expect(await theirs.getByTestId('cmd-confirm').isEnabled()).toBe(true);
      expect(await theirs.getByTestId('cmd-reject').isEnabled()).toBe(true);
      expect(await theirs.getByTestId('cmd-cancel').isHidden()).toBe(true);
      expect(await theirs.getByTestId('may-not').textContent()).toContain('wrong_user');

      // M1's inbox: the money, the mandate, the risk, and what changed since the refused 600.00.
      const inbox = await open(m1, '/inbox');
      const item = inbox.locator(`[data-testid=inbox-item][data-task="${taskId}"]`);
      await item.waitFor();
      expect(await item.getByTestId('amount').textContent()).toBe(
        '450.00 · this task moved 0.00 so far of at most 450.00',
      );
      expect(await item.getByTestId('mandate').textContent()).toBe(
        'refund · max_amount_cents: 45000 · order_id: "O-1002"',
      );
      expect(await item.getByTestId('risk').textContent()).toBe('writable');
      expect(await item.getByTestId('why').textContent()).toContain('it moves money');
      expect(await item.getByTestId('difference').first().textContent()).toBe('amount_cents: 60000 → 45000');
      // Reject asks for the person's reason before it sends anything.
      await item.getByTestId('reject').click();
      expect(await item.getByTestId('result').textContent()).toBe('Type the reason to reject first.');
      expect((await service.orchestrator.status(taskId)).state).toBe('waiting_for_confirmation');

      await item.getByTestId('approve').click();
      const decided = inbox.locator(`[data-testid=decided][data-task="${taskId}"]`);
      await decided.waitFor();
      expect(await decided.textContent()).toContain('Approved "Refund 450.00 on order O-1002');
      // The inbox follows what the approval did, through the task M1 keeps reading.
      await decided.getByTestId('decided-outcome').filter({ hasText: 'Outcome: done' }).waitFor();

      // M1's live page, open since before the decision, follows the task to its end.
      await theirs.locator('body[data-state=done][data-access=decided]').waitFor();
      expect(await theirs.getByTestId('outcome').textContent()).toMatch(/^done: goal_met/);
      expect(await theirs.getByTestId('cmd-confirm').isDisabled()).toBe(true);
      await mine.locator('body[data-state=done]').waitFor();
      expect((await service.rows()).filter((row) => row.includes('O-1002'))).toHaveLength(1);
      expect(errors).toEqual([]);
      await e17.close();
      await m1.close();
    },
    scaled(90_000),
  );

  it(
    "M1 rejects with a reason typed in the inbox; the audit keeps it and E17's live page shows it",
    async () => {
      const started = await fetch(`${origin}/api/tasks`, {
        method: 'POST',
        headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
        body: JSON.stringify(APPROVAL_REFUND_START_BODY),
      });
      const taskId = ((await started.json()) as { status: { taskId: string } }).status.taskId;
      expect((await service.orchestrator.settled(taskId)).state).toBe('waiting_for_confirmation');
      const m1 = await signedIn('M1');
      const inbox = await open(m1, '/inbox');
      const item = inbox.locator(`[data-testid=inbox-item][data-task="${taskId}"]`);
      await item.waitFor();
      const reason = 'only the top is cracked: refund the top, 180.00';
      await item.getByTestId('reject-reason').fill(reason);
      await item.getByTestId('reject').click();
      await inbox.locator(`[data-testid=decided][data-task="${taskId}"]`).waitFor();
      const status = await service.orchestrator.settled(taskId);
      const entry = (await service.orchestrator.audit(taskId)).find(
        (e) => e.kind === 'confirmation' && e.action === 'rejected',
      );
      expect(entry).toMatchObject({ userId: 'M1', decidedAs: 'approver', reason });
      const e17 = await signedIn('E17');
      const live = await open(e17, `/tasks/${taskId}`);
      await live.locator(`body[data-state=${status.state}]`).waitFor();
      await live.locator('[data-testid=timeline] tr[data-kind=confirmation]', { hasText: reason }).waitFor();
      expect(errors).toEqual([]);
      await e17.close();
      await m1.close();
    },
    scaled(90_000),
  );
});
