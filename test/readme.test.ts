import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXAMPLES, SOURCES, readmeExamples } from './support/readme.js';

const root = join(import.meta.dirname, '..');

describe('README', () => {
  it('has exactly two quick-start commands: one runs the demo, one runs the tests', async () => {
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const quickStart = readme.split('## Quick start')[1]!.split('```sh')[1]!.split('```')[0]!;
    const commands = quickStart.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);
    expect(commands).toEqual(['npm install && npm start', 'npm test']);
  });

  it('marks one runnable example per entry, each run by a test', async () => {
    // They run in readme.process.test.ts, the Redis ones in readme.redis.test.ts.
    expect([...(await readmeExamples()).keys()].sort()).toEqual([...EXAMPLES].sort());
    const imported = new Set<string>();
    for (const code of (await readmeExamples()).values()) {
      for (const match of code.matchAll(/from '(statechart-agent(?:\/[\w-]+)?)'/g)) imported.add(match[1]!);
    }
    expect([...imported].sort()).toEqual(Object.keys(SOURCES).sort());
  });
});
