import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { expectExampleOutput, readmeExample } from './support/readme.js';

const root = join(import.meta.dirname, '..');
const run = promisify(execFile);

describe('README', () => {
  it('has exactly two quick-start commands: one runs the demo, one runs the tests', async () => {
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const quickStart = readme.split('## Quick start')[1]!.split('```sh')[1]!.split('```')[0]!;
    const commands = quickStart.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);
    expect(commands).toEqual(['npm install && npm start', 'npm test']);
  });

  it('runs its embedding example against the sources (the package tier runs it as written, installed)', async () => {
    const code = (await readmeExample()).replace(/from 'statechart-agent(\/testing)?'/g, (_m, sub: string | undefined) =>
      `from '${join(root, 'src', sub ? 'testing/index.ts' : 'index.ts')}'`,
    );
    const dir = join(root, '.data', 'readme');
    await mkdir(dir, { recursive: true });
    const file = join(dir, 'example.ts');
    await writeFile(file, code);
    try {
      const { stdout } = await run(join(root, 'node_modules', '.bin', 'tsx'), [file], { cwd: root, timeout: 30_000 });
      expectExampleOutput(stdout);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
