import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const run = promisify(execFile);

describe('README', () => {
  it('has exactly two quick-start commands: one runs the demo, one runs the tests', async () => {
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const quickStart = readme.split('## Quick start')[1]!.split('```sh')[1]!.split('```')[0]!;
    const commands = quickStart.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);
    expect(commands).toEqual(['npm install && npm start', 'npm test']);
  });

  it('runs its embedding example as written, through the package name', async () => {
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const block = readme.split('<!-- example:start -->')[1]!.split('<!-- example:end -->')[0]!;
    const code = block.replace(/^\s*```ts\n/, '').replace(/```\s*$/, '');
    const dir = join(root, '.data', 'readme');
    await mkdir(dir, { recursive: true });
    const file = join(dir, 'example.ts');
    await writeFile(file, code);
    try {
      const { stdout } = await run(join(root, 'node_modules', '.bin', 'tsx'), [file], { cwd: root, timeout: 30_000 });
      expect(stdout).toContain('waiting_for_confirmation - Refund 199.00 on O-1001');
      expect(stdout).toContain('confirmed: true');
      expect(stdout).toContain('done - goal met: refund_order returned status=succeeded, refund_id=TX-1');
      expect(stdout).toMatch(/confirm +granted by E17/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
