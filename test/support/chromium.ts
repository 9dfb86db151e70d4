/**
 * Headless Chromium for screenshot tests: Debian's `chromium` package (not an npm dependency), started with the
 * flags this machine needs (no sandbox as root, no background networking on a closed network, a fresh profile)
 * and its own `--screenshot`. Every process started is tracked so a test can kill leftovers in afterEach.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { scaled } from './timeScale.js';

export const CHROMIUM_INSTALL = 'apt-get install -y chromium chromium-driver';

/** The Chromium binary, or null when it is not installed. */
export function findChromium(): string | null {
  for (const candidate of [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser']) {
    if (candidate && existsSync(candidate)) return candidate;
  }
  try {
    return (
      execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], { encoding: 'utf8' }).trim() ||
      null
    );
  } catch {
    return null;
  }
}

const running = new Set<ChildProcess>();

/** SIGKILLs every Chromium this module started that is still running. */
export function killChromiums(): void {
  for (const child of running) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  running.clear();
}

/** Screenshots `htmlFile` into `pngFile` at `width`x`height` CSS pixels (device scale 1, sRGB colours). */
export async function screenshot(
  binary: string,
  htmlFile: string,
  pngFile: string,
  size: { width: number; height: number },
  quietTimeoutMs = 30_000,
): Promise<void> {
  const timeoutMs = scaled(quietTimeoutMs);
  const profile = await mkdtemp(join(tmpdir(), 'chromium-profile-'));
  try {
    const child = spawn(
      binary,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        `--user-data-dir=${profile}`,
        '--hide-scrollbars',
        '--force-color-profile=srgb',
        '--force-device-scale-factor=1',
        `--window-size=${size.width},${size.height}`,
        `--screenshot=${pngFile}`,
        pathToFileURL(htmlFile).href,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    running.add(child);
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`chromium did not finish within ${timeoutMs} ms\n${output.slice(-2000)}`));
      }, timeoutMs);
      child.once('close', (exitCode) => {
        clearTimeout(timer);
        running.delete(child);
        resolve(exitCode);
      });
    });
    if (code !== 0 || !existsSync(pngFile))
      throw new Error(`chromium exited with ${code} without writing ${pngFile}\n${output.slice(-2000)}`);
  } finally {
    await rm(profile, { recursive: true, force: true });
  }
}
