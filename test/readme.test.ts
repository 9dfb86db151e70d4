import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fake, startFakeOpenAI } from './support/fakeOpenAI.js';
import { EXAMPLES, SOURCES, expectExampleOutput, readmeExamples, runExample } from './support/readme.js';

const root = join(import.meta.dirname, '..');

describe('README', () => {
  it('has exactly two quick-start commands: one runs the demo, one runs the tests', async () => {
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const quickStart = readme.split('## Quick start')[1]!.split('```sh')[1]!.split('```')[0]!;
    const commands = quickStart.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);
    expect(commands).toEqual(['npm install && npm start', 'npm test']);
  });

  it('marks one runnable example per entry, each checked here', async () => {
    // The Redis example runs in readme.redis.test.ts.
    expect([...(await readmeExamples()).keys()].sort()).toEqual([...EXAMPLES].sort());
    const imported = new Set<string>();
    for (const code of (await readmeExamples()).values()) {
      for (const match of code.matchAll(/from '(statechart-agent(?:\/[\w-]+)?)'/g)) imported.add(match[1]!);
    }
    expect([...imported].sort()).toEqual(Object.keys(SOURCES).sort());
  });

  it.each(['embed', 'mandate', 'inspect', 'visualize', 'aisdk', 'fastify', 'acceptance', 'otel', 'privacy', 'mcp', 'erasure', 'hooks'] as const)('runs its %s example against the sources', async (name) => {
    expectExampleOutput[name](await runExample(name));
  });

  it('runs its openai example against the sources, on a local OpenAI-compatible server', async () => {
    const server = await startFakeOpenAI([fake.text('Hello, E17.')]);
    try {
      const env = { OPENAI_BASE_URL: server.url, OPENAI_MODEL: 'fake', OPENAI_API_KEY: 'local' };
      expectExampleOutput.openai(await runExample('openai', env));
      expect(server.requests).toHaveLength(1);
      expect(server.requests[0]!.body.max_tokens ?? server.requests[0]!.body.max_completion_tokens).toBe(1024);
    } finally {
      await server.close();
    }
  });
});
