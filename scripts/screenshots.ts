/**
 * `npm run screenshots`: regenerates the README's pictures of the service's two pages (docs/screenshots/), from a
 * real run: the demo service on a memory store, E17's refund waiting for confirmation (999.00 refused by the
 * mandate, 199.00 asked), the approval inbox as E17, and the live task page of that task. Needs Debian's chromium
 * (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { REFUND_START_BODY, createDemoService } from '../examples/booking/service.js';
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
  console.log(`wrote ${join('docs', 'screenshots', 'inbox.png')} and ${join('docs', 'screenshots', 'task.png')}`);
} finally {
  await browser.close();
  await service.close();
}
