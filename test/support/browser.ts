/** Debian's Chromium driven by playwright-core, with the flags this machine needs (see chromium.ts). */
import { type Browser, chromium } from 'playwright-core';

/** Starts headless Chromium at `executablePath` (from `findChromium()`). */
export function launchBrowser(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}
