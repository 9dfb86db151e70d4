/**
 * `npm run screenshots`: regenerates the pictures of the service's pages (docs/screenshots/), from a real run: the
 * demo service on a memory store, E17's refund waiting for confirmation (999.00 refused by the mandate, 199.00
 * asked), the approval inbox as E17, the live task page of that task, and the operator console as O1. Needs Debian's chromium
 * (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { APPROVAL_REFUND_START_BODY, REFUND_START_BODY, createDemoService } from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';

const root = join(import.meta.dirname, '..');
const out = join(root, 'docs', 'screenshots');
const executable = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find(
  (p) => p && existsSync(p),
);
if (!executable) {
  console.error('screenshots need chromium: apt-get install -y chromium (or set CHROMIUM_PATH)');
  process.exit(2);
}
mkdirSync(out, { recursive: true });

const service = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0 });
const browser = await chromium.launch({
  executablePath: executable,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
try {
  const origin = await service.app.listen({ port: 0, host: '127.0.0.1' });
  const started = await fetch(`${origin}/api/tasks`, {
    method: 'POST',
    headers: { authorization: 'Bearer E17', 'content-type': 'application/json' },
    body: JSON.stringify({ ...REFUND_START_BODY, taskId: 'refund-42' }),
  });
  if (started.status !== 201)
    throw new Error(`could not start the demo task: ${started.status} ${await started.text()}`);
  // Stored under its caller (acme:E17:refund-42); the pages take the caller's own id too.
  const { taskId } = ((await started.json()) as { status: { taskId: string } }).status;
  await service.orchestrator.settled(taskId);

  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  await page.goto(`${origin}/login?user=E17`);
  await page.locator('[data-testid=inbox-item]').waitFor();
  await page.screenshot({ path: join(out, 'inbox.png'), fullPage: true });

  await page.setViewportSize({ width: 1440, height: 1000 });
  await page.goto(`${origin}/tasks/refund-42`);
  await page.locator('[data-testid=chart] g.state.current').waitFor();
  await page.locator('[data-testid=timeline] tr').first().waitFor();
  // The chart is larger than its pane: bring the current state (and the gates above it) into view.
  // (A string: this script is compiled without the DOM's types.)
  await page.evaluate(`(() => {
    const box = document.querySelector('.chart-box');
    const b = box.getBoundingClientRect();
    const c = document.querySelector('[data-testid=chart] g.state.current rect').getBoundingClientRect();
    box.scrollTo({ left: c.left - b.left + box.scrollLeft - b.width / 2, top: c.top - b.top + box.scrollTop - b.height * 0.6 });
  })()`);
  await page.screenshot({ path: join(out, 'task.png'), fullPage: false });

  // The operator console as O1: a second refund (E99's) and the four-eyes refund beside E17's, filtered to the tasks
  // waiting for a confirmation (the requester's or an approver's).
  for (const [user, body] of [
    ['E99', { ...REFUND_START_BODY, taskId: 'refund-7' }],
    ['E17', { ...APPROVAL_REFUND_START_BODY, taskId: 'approval-3' }],
  ] as const) {
    const response = await fetch(`${origin}/api/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (response.status !== 201) throw new Error(`could not start ${body.taskId}: ${await response.text()}`);
    await service.orchestrator.settled(((await response.json()) as { status: { taskId: string } }).status.taskId);
  }
  const operator = await browser.newContext({ viewport: { width: 1280, height: 560 }, deviceScaleFactor: 1 });
  const console_ = await operator.newPage();
  await console_.goto(`${origin}/login?user=O1`);
  await console_.goto(`${origin}/console?state=waiting_for_confirmation`);
  await console_.locator('[data-testid=task-row]').nth(2).waitFor();
  await console_.screenshot({ path: join(out, 'console.png'), fullPage: true });
  console.log(`wrote ${['inbox', 'task', 'console'].map((n) => join('docs', 'screenshots', `${n}.png`)).join(', ')}`);
} finally {
  await browser.close();
  await service.close();
}
