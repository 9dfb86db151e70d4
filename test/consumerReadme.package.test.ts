/**
 * The README's examples as written, in a TypeScript consumer of the run's tarball (test/support/packOnce.ts) with
 * every optional peer installed: compiled by `tsc` (strict, skipLibCheck false, node16 resolution) and each run with
 * node, against a fake OpenAI server and the test Redis where they need one. A file of its own (the project it
 * installs is the one of consumerTypes.package.test.ts), so its compile runs beside that file's.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { packedTarball, project, sh, typescriptConsumerPackages } from './support/consumer.js';
import { fake, startFakeOpenAI } from './support/fakeOpenAI.js';
import { type ExampleName, SELF_CONTAINED_EXAMPLES, expectExampleOutput, readmeExamples } from './support/readme.js';
import { useTestRedis } from './support/redis.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();

let dir: string;
let root: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'consumer-readme-'));
  root = await project(dir, await packedTarball(), 'typescript', typescriptConsumerPackages());
  // The wait for the run's pack, then the install: each limit as long as it was when they were two hooks.
}, scaled(480_000));
afterAll(async () => {
  await redis?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('a TypeScript consumer (strict, skipLibCheck false)', () => {
  it(
    "compiles the README's examples as written and runs each",
    async () => {
      for (const [name, code] of await readmeExamples()) await writeFile(join(root, `readme-${name}.ts`), code);
      await sh(join(root, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.example.json'], root);
      const node = (name: ExampleName, env: NodeJS.ProcessEnv = {}) =>
        sh('node', [`dist-example/readme-${name}.js`], root, env);
      for (const name of SELF_CONTAINED_EXAMPLES) expectExampleOutput[name](await node(name));
      const server = await startFakeOpenAI([fake.text('Hello, E17.')]);
      try {
        expectExampleOutput.openai(
          await node('openai', { OPENAI_BASE_URL: server.url, OPENAI_MODEL: 'fake', OPENAI_API_KEY: 'local' }),
        );
      } finally {
        await server.close();
      }
      if (redis) {
        const prefix = redis.freshPrefix();
        expectExampleOutput.redis(await node('redis', { REDIS_URL: redis.url, AGENT_PREFIX: prefix }));
        await redis.deleteKeys(prefix);
        const queuePrefix = redis.freshPrefix();
        expectExampleOutput.workers(await node('workers', { REDIS_URL: redis.url, AGENT_PREFIX: queuePrefix }));
        await redis.deleteKeys(queuePrefix);
        const client = redis.connect();
        const queueKeys = await client.keys(`bull:${queuePrefix}-tasks:*`);
        if (queueKeys.length > 0) await client.unlink(...queueKeys);
      }
    },
    scaled(120_000),
  );
});
