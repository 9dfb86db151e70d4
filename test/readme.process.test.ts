/**
 * The documentation's runnable examples (README.md and docs/*.md), each run against the sources in a child process
 * (tsx) and checked on what it prints. The Redis ones are in readme.redis.test.ts; readme.test.ts checks that every
 * marked example is here.
 */
import { describe, expect, it } from 'vitest';
import { fake, startFakeOpenAI } from './support/fakeOpenAI.js';
import { SELF_CONTAINED_EXAMPLES, expectExampleOutput, runExample } from './support/readme.js';

describe('documented examples (README.md, docs/*.md)', () => {
  it.each(SELF_CONTAINED_EXAMPLES)('runs its %s example against the sources', async (name) => {
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
