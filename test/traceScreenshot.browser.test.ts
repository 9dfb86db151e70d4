/**
 * The trace page as a human sees it: rendered for real demo tasks, opened in headless Chromium, screenshotted,
 * and checked pixel by pixel (decoded here with node:zlib): the page is not blank, visited states carry the
 * highlight colour, the final state is emphasized, and the rejected gates show in the reject colour.
 * The screenshots are kept under .data/screenshots/ for humans.
 *
 * Needs Debian's chromium. Without it the test is skipped, except under CI=true, where it fails.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { scenarios } from '../examples/booking/scenarios.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import { TRACE_COLORS, renderTraceHtml } from '../src/visualize/traceHtml.js';
import { CHROMIUM_INSTALL, findChromium, killChromiums, screenshot } from './support/chromium.js';
import { countColor, decodePng, distinctColors } from './support/png.js';
import { PROJECT_ROOT } from './support/workers.js';
import { scaled } from './support/timeScale.js';

const chromium = findChromium();
const ci = process.env.CI === 'true';
const missing = `chromium is not installed; install it with: ${CHROMIUM_INSTALL}`;
const SIZE = { width: 1800, height: 2600 };
const KEEP = join(PROJECT_ROOT, '.data', 'screenshots');

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'trace-shot-'));
  await mkdir(KEEP, { recursive: true });
});
afterEach(() => killChromiums());
afterAll(() => rm(dir, { recursive: true, force: true }));

async function shoot(name: 'refused' | 'conflict') {
  const result = await scenarios[name]({ store: new MemoryStore() });
  const html = join(dir, `${name}.html`);
  await writeFile(html, renderTraceHtml({ status: result.status, audit: result.audit }));
  const png = join(KEEP, `trace-${name}.png`);
  await screenshot(chromium!, html, png, SIZE);
  return { result, png: decodePng(await readFile(png)) };
}

const available = chromium !== null || ci;
if (!available) console.warn(`test/traceScreenshot.browser.test.ts skipped: ${missing}`);

describe.runIf(available)('trace page screenshot', () => {
  it(
    'highlights visited states, emphasizes the final one and colours the rejected gates (refused scenario)',
    async () => {
      if (!chromium) expect.fail(missing);
      const { result, png } = await shoot('refused');
      expect(result.status.state).toBe('failed');
      expect([png.width, png.height]).toEqual([SIZE.width, SIZE.height]);
      // Not blank: many colours, and a real share of the page is not white.
      expect(distinctColors(png)).toBeGreaterThan(200);
      const area = png.width * png.height;
      expect(area - countColor(png, '#ffffff', 0)).toBeGreaterThan(area * 0.05);
      // deciding, thinking, vetting and executing.selecting are visited: four state boxes of about 120x34 each.
      expect(countColor(png, TRACE_COLORS.visited)).toBeGreaterThan(4 * 2_500);
      // The final state (failed), the path's last step and the legend.
      expect(countColor(png, TRACE_COLORS.current)).toBeGreaterThan(3_000);
      // Transitions taken are drawn in their own colour.
      expect(countColor(png, TRACE_COLORS.taken)).toBeGreaterThan(1_000);
      // Two gates rejected (permission, business) plus the failed outcome: table cells in the reject colour.
      expect(countColor(png, TRACE_COLORS.reject)).toBeGreaterThan(5_000);
      expect(countColor(png, TRACE_COLORS.pass)).toBeGreaterThan(5_000);
    },
    scaled(60_000),
  );

  it(
    'shows a task that took the conflict path: more states visited, a done final state, no gate rejected',
    async () => {
      if (!chromium) expect.fail(missing);
      const { result, png } = await shoot('conflict');
      expect(result.status.state).toBe('done');
      expect(distinctColors(png)).toBeGreaterThan(200);
      // Also reading and writing: six visited state boxes or more.
      expect(countColor(png, TRACE_COLORS.visited)).toBeGreaterThan(6 * 2_500);
      expect(countColor(png, TRACE_COLORS.current)).toBeGreaterThan(3_000);
      // Only the reserve_room conflict result is red here (one table cell).
      expect(countColor(png, TRACE_COLORS.reject)).toBeLessThan(5_000);
    },
    scaled(60_000),
  );
});
