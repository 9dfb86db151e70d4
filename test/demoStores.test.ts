/** The demo's promise: it only ever deletes folders it made itself, and one scenario's run leaves the others. */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DemoDataError, openScenarioStore } from '../examples/booking/demoStores.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'demo-stores-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('the demo file stores', () => {
  it('refuses a scenario folder holding data it did not make, and leaves it as it was', async () => {
    await mkdir(join(dir, 'normal'));
    await writeFile(join(dir, 'normal', 'precious.txt'), 'mine');
    await expect(openScenarioStore('file', { dataDir: dir, prefix: 'p', scenario: 'normal' })).rejects.toThrow(
      DemoDataError,
    );
    expect(await readdir(join(dir, 'normal'))).toEqual(['precious.txt']);
  });

  it('empties only the folder of the scenario it runs, when it made it', async () => {
    for (const scenario of ['normal', 'refund']) {
      const store = await openScenarioStore('file', { dataDir: dir, prefix: 'p', scenario });
      await writeFile(join(dir, scenario, 'left-by-the-run'), 'x');
      await store.close();
    }
    await writeFile(join(dir, 'unrelated.txt'), 'mine');
    await (await openScenarioStore('file', { dataDir: dir, prefix: 'p', scenario: 'normal' })).close();
    expect(existsSync(join(dir, 'normal', 'left-by-the-run'))).toBe(false);
    expect(existsSync(join(dir, 'refund', 'left-by-the-run'))).toBe(true);
    expect(existsSync(join(dir, 'unrelated.txt'))).toBe(true);
  });
});
