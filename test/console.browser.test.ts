/**
 * The operator console in a real browser (playwright-core driving Debian's chromium): O1, acme's operator, signs in,
 * filters the tenant's tasks by what they wait for and by user, opens a task from the list, reads its history and
 * cancels it from the page; then opens a booking held for review and resolves the review from the page, and erases a
 * third task from its page. Each result is checked over the API, in the audit or the tombstone (as O1's). Globex's
 * operator sees none of it.
 *
 * Needs Debian's chromium. Without it the test is skipped, except under CI=true, where it fails.
 */
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CHROMIUM_INSTALL, findChromium } from './support/chromium.js';
import { type OperatorDesk, operatorDesk } from './support/operatorDesk.js';
import { scaled } from './support/timeScale.js';
import { launchBrowser } from './support/browser.js';

const executable = findChromium();
const ci = process.env.CI === 'true';
const missing = `chromium is not installed; install it with: ${CHROMIUM_INSTALL}`;
const available = executable !== null || ci;
if (!available) console.warn(`test/console.browser.test.ts skipped: ${missing}`);

let desk: OperatorDesk;
let origin: string;
let browser: Browser;
const errors: string[] = [];

async function signedIn(user: string): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  context.setDefaultTimeout(scaled(30_000));
  // The demo's sign-in is its `demo_user` cookie (what /login sets).
  await context.addCookies([{ name: 'demo_user', value: user, url: origin, httpOnly: true, sameSite: 'Strict' }]);
  return context;
}

async function open(context: BrowserContext, path: string): Promise<Page> {
  const page = await context.newPage();
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(`${origin}${path}`);
  return page;
}

/** How many list loads the console finished. */
async function loads(page: Page): Promise<number> {
  return Number((await page.locator('body').getAttribute('data-loads')) ?? 0);
}

/** The task ids the console lists once its load number `after + 1` finished. */
async function listed(page: Page, after: number): Promise<string[]> {
  await page.locator(`body[data-loads="${after + 1}"]`).waitFor({ state: 'attached' });
  return page.locator('[data-testid=task-row]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-task')));
}

async function filter(page: Page, fields: Record<string, string>): Promise<string[]> {
  for (const [testId, value] of Object.entries(fields)) {
    const field = page.getByTestId(testId);
    if ((await field.evaluate((node) => node.tagName)) === 'SELECT') await field.selectOption(value);
    else await field.fill(value);
  }
  const before = await loads(page);
  await page.getByTestId('filter-apply').click();
  return (await listed(page, before)).sort();
}

interface ApiAnswer {
  code?: string;
  status: { state: string; outcome: { reason: { message: string } } | null };
  entries: { kind: string; userId?: string }[];
}

const api = async (user: string, path: string) =>
  (await (await fetch(`${origin}${path}`, { headers: { authorization: `Bearer ${user}` } })).json()) as ApiAnswer;

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + scaled(10_000);
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.runIf(available)('the operator console in chromium', () => {
  beforeAll(async () => {
    if (!executable) expect.fail(missing);
    browser = await launchBrowser(executable);
  }, scaled(60_000));
  afterAll(() => browser?.close());
  beforeEach(async () => {
    errors.length = 0;
    desk = await operatorDesk();
    origin = await desk.app.listen({ port: 0, host: '127.0.0.1' });
    await desk.refund('refund-e17');
    await desk.refund('refund-e99', 'E99');
    await desk.heldBooking('booking-e99', 'E99');
  });
  afterEach(() => desk?.close());

  it(
    'filters the list, opens a task, reads its history and cancels it; resolves a held review and erases from the page',
    async () => {
      const o1 = await signedIn('O1');
      const console = await open(o1, '/console');
      expect((await listed(console, 0)).sort()).toEqual(['booking-e99', 'refund-e17', 'refund-e99']);
      expect(await console.getByTestId('who').textContent()).toContain('O1 @ acme');

      expect(await filter(console, { 'filter-waiting': 'review' })).toEqual(['booking-e99']);
      expect(await console.locator('[data-task=booking-e99] td').nth(3).textContent()).toBe('reserve_room');
      expect(await filter(console, { 'filter-waiting': 'confirmation', 'filter-user': 'E17' })).toEqual(['refund-e17']);
      // The filters live in the address: a reload shows the same view.
      expect(console.url()).toContain('waitingFor=confirmation');
      expect(console.url()).toContain('user=E17');
      expect(await filter(console, { 'filter-user': '', 'filter-q': 'e99', 'filter-waiting': '' })).toEqual([
        'booking-e99',
        'refund-e99',
      ]);
      expect(await filter(console, { 'filter-q': '', 'filter-tool': 'refund_order', 'filter-limit': '10' })).toEqual([
        'refund-e17',
        'refund-e99',
      ]);

      // Open refund-e17 from the list: its history, then cancel it from the page.
      await console.getByTestId('filter-user').fill('E17');
      const before = await loads(console);
      await console.getByTestId('filter-apply').click();
      expect(await listed(console, before)).toEqual(['refund-e17']);
      await console.locator('[data-task=refund-e17] [data-testid=task-link]').click();
      await console.locator('body[data-state=waiting_for_confirmation]').waitFor();
      expect(await console.getByTestId('access').textContent()).toContain('you operate');
      await console.locator('[data-testid=calls] tr[data-phase=awaiting_confirmation]').waitFor();
      expect(await console.getByTestId('turns').textContent()).toContain('get_order returned');
      expect(await console.getByTestId('cmd-confirm').isHidden()).toBe(true);
      await console.getByTestId('cmd-cancel').click();
      await console.locator('body[data-state=cancelled]').waitFor();
      const cancelled = await until(
        () => api('O1', '/api/tasks/refund-e17'),
        (view) => view.status.state === 'cancelled',
      );
      expect(cancelled.status.outcome?.reason.message).toContain('cancelled by O1');

      // The held booking: resolve its review from the page.
      const held = await open(o1, '/console?waitingFor=review');
      expect(await listed(held, 0)).toEqual(['booking-e99']);
      await held.locator('[data-task=booking-e99] [data-testid=task-link]').click();
      await held.locator('body[data-state=review_required]').waitFor();
      await held.getByTestId('review-panel').waitFor();
      expect(await held.getByTestId('review-summary').textContent()).toContain('reserve_room');
      expect(await held.locator('[data-testid=calls] tr[data-phase=outcome_unknown]').count()).toBe(1);
      await held.getByTestId('review-note').fill('checked the booking system: nothing there');
      await held.getByTestId('review-not-happened').click();
      await held.locator('body[data-operated=review]').waitFor();
      expect(await held.getByTestId('operator-result').textContent()).toContain('review →');
      const resolved = await until(
        () => api('O1', '/api/tasks/booking-e99'),
        (view) => view.status.state !== 'review_required',
      );
      expect(resolved.status.state).not.toBe('review_required');
      const { entries } = await api('O1', '/api/tasks/booking-e99/audit');
      expect(entries.filter((e) => e.kind === 'review').at(-1)).toMatchObject({ userId: 'O1' });

      // Erase refund-e99 from its page: gone for everyone, its tombstone names O1.
      const doomed = await open(o1, '/tasks/refund-e99');
      await doomed.getByTestId('operator').waitFor();
      await doomed.getByTestId('erase').click();
      expect(await doomed.getByTestId('operator-result').textContent()).toContain('type the reason code first');
      await doomed.getByTestId('erase-reason').fill('gdpr_erasure');
      await doomed.getByTestId('erase').click();
      await doomed.locator('body[data-operated=erase]').waitFor();
      expect(await doomed.getByTestId('operator-result').textContent()).toContain('erased by acme:O1');
      expect((await api('O1', '/api/tasks/refund-e99')).code).toBe('task_not_found');
      expect((await desk.orchestrator.tombstone('refund-e99'))?.by).toBe('acme:O1');

      // Another tenant's operator sees none of acme's tasks, on the console or by id.
      const g1 = await signedIn('G1');
      const theirs = await open(g1, '/console');
      expect(await listed(theirs, 0)).toEqual([]);
      expect((await api('G1', '/api/tasks/booking-e99/history')).code).toBe('task_not_found');
      expect(errors).toEqual([]);
    },
    scaled(120_000),
  );

  it(
    'shows the retry button only while the task waits for the model, asks the model again, then forks the task',
    async () => {
      desk.modelDown = true;
      await desk.outage('outage-e17');
      const o1 = await signedIn('O1');
      // A task that does not wait for the model offers no retry.
      const other = await open(o1, '/tasks/booking-e99');
      await other.getByTestId('operator').waitFor();
      expect(await other.getByTestId('retry-model').isHidden()).toBe(true);

      const page = await open(o1, '/tasks/outage-e17');
      await page.getByTestId('retry-model').waitFor();
      expect(await page.getByTestId('model-wait').textContent()).toContain('503 service unavailable');
      desk.modelDown = false;
      await page.getByTestId('retry-model').click();
      await page.locator('body[data-operated=retry-model]').waitFor();
      expect(await page.getByTestId('operator-result').textContent()).toContain('retry →');
      const answered = await until(
        () => api('O1', '/api/tasks/outage-e17'),
        (view) => view.status.state === 'answered',
      );
      expect(answered.status.state).toBe('answered');
      const { entries } = await api('O1', '/api/tasks/outage-e17/audit');
      expect(entries.filter((e) => e.kind === 'model_outage').at(-1)).toMatchObject({ by: 'acme:O1' });

      // Fork it from step 1: the copy's page says it is a copy, and of what.
      await page.getByTestId('fork-step').fill('1');
      await page.getByTestId('fork').click();
      await page.locator('body[data-operated=fork]').waitFor();
      const forked = (await page.getByTestId('operator-result').textContent()) ?? '';
      expect(forked).toContain('forked →');
      const copyId = /forked → (\S+):/.exec(forked)![1]!;
      const copy = await open(o1, `/tasks/${encodeURIComponent(copyId)}`);
      await copy.getByTestId('fork-marker').waitFor();
      expect(await copy.getByTestId('fork-marker').textContent()).toBe('A copy (fork) of outage-e17 at step 1.');
      expect(errors).toEqual([]);
    },
    scaled(120_000),
  );
});
