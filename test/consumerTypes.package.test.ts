/**
 * A TypeScript consumer of the run's tarball (test/support/packOnce.ts), with the peers at the high end and every
 * optional peer installed (one `npm install` from scratch, the way an app installs it): compiled by `tsc` (strict,
 * skipLibCheck false) with node16 and with bundler resolution and run with node; the service served with
 * statechart-agent/fastify; the types of every entry compiled; the README's examples compiled as written and each run
 * with node, against a fake OpenAI server and the test Redis where they need one.
 *
 * The node16 program holds the consumer, the entries' types and the README's examples (test/fixtures/consumer/
 * tsconfig.node16.json): every file is a module with the same compiler options, so one program reports what three
 * would, and checks the libraries' declarations (skipLibCheck false, most of a compile's time) once instead of three
 * times. The bundler program (another resolution) compiles beside it.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packedTarball, project, sh, typescriptConsumerPackages } from './support/consumer.js';
import { fake, startFakeOpenAI } from './support/fakeOpenAI.js';
import { type ExampleName, SELF_CONTAINED_EXAMPLES, expectExampleOutput, readmeExamples } from './support/readme.js';
import { useTestRedis } from './support/redis.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();

let dir: string;
let root: string;

/** One `tsc -p tsconfig.<resolution>.json` per resolution, started once and awaited by each test that needs it. */
const compiles = new Map<string, Promise<string>>();
const compile = (resolution: 'node16' | 'bundler') => {
  let run = compiles.get(resolution);
  if (!run) {
    run = sh(join(root, 'node_modules', '.bin', 'tsc'), ['-p', `tsconfig.${resolution}.json`], root);
    // Awaited by the tests; this only keeps a failure from being reported as unhandled before they await it.
    run.catch(() => {});
    compiles.set(resolution, run);
  }
  return run;
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'consumer-ts-'));
  root = await project(dir, await packedTarball(), 'typescript', typescriptConsumerPackages());
  for (const [name, code] of await readmeExamples()) await writeFile(join(root, `readme-${name}.ts`), code);
  // The wait for the run's pack, then the install: each limit as long as it was when they were two hooks.
}, scaled(480_000));
afterAll(async () => {
  await redis?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('a TypeScript consumer (strict, skipLibCheck false)', () => {
  it.each(['node16', 'bundler'] as const)(
    'compiles with %s resolution and runs with node',
    async (resolution) => {
      // Both programs at once: each leaves a core idle while it reads the libraries' declarations.
      if (resolution === 'node16') compile('bundler');
      await compile(resolution);
      expect(await sh('node', [`dist-${resolution}/consumer.js`], root)).toBe(
        'ts: answered answered_without_criterion resumed 0',
      );
    },
    scaled(240_000),
  );

  it('compiles the types of every entry (in the node16 program)', async () => {
    await compile('node16');
  });

  it('serves a task over HTTP with statechart-agent/fastify (pages and elkjs layout included)', async () => {
    expect(await sh('node', ['service.mjs'], root)).toBe('service: 200 done true 200 true 200');
  });

  it(
    "compiles the README's examples as written (in the node16 program) and runs each",
    async () => {
      await compile('node16');
      const node = (name: ExampleName, env: NodeJS.ProcessEnv = {}) =>
        sh('node', [`dist-node16/readme-${name}.js`], root, env);
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
    scaled(240_000),
  );
});
