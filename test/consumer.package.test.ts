/**
 * The package as an app gets it: `npm pack` (which builds), then the tarball installed into new projects.
 *
 * - With the peer dependencies only (xstate, zod) at the low and the high end of their ranges: a plain `.mjs` runs a
 *   refund task to done on MemoryStore; the main entry loads without any optional peer, and each entry that needs one
 *   fails naming it.
 * - With ioredis added: the same task on RedisStore.
 * - A TypeScript consumer compiled by `tsc` (strict, skipLibCheck false) with node16 and with bundler resolution, run
 *   with node; the types of every entry compile with the optional peers installed; the README's examples, as written.
 * - publint and @arethetypeswrong/cli (ESM-only profile) find no problem in the tarball.
 */
import { cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fake, startFakeOpenAI } from './support/fakeOpenAI.js';
import { type ExampleName, SELF_CONTAINED_EXAMPLES, expectExampleOutput, readmeExamples } from './support/readme.js';
import { useTestRedis } from './support/redis.js';
import { PROJECT_ROOT, runCommand } from './support/workers.js';
import { scaled } from './support/timeScale.js';

const FILES = join(PROJECT_ROOT, 'test', 'fixtures', 'consumer');
const pkg = JSON.parse(await readFile(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
  version: string;
  peerDependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const redis = await useTestRedis();

let dir: string;
let tarball: string;

/** Runs a command to its end: its stdout, or an error with both outputs if it fails. */
async function sh(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}, input = '') {
  const run = await runCommand(command, args, { cwd, env, input, timeoutMs: 240_000 });
  if (run.code !== 0) throw new Error(`${[command, ...args].join(' ')} failed in ${cwd}\n${run.transcript}`);
  return run.out.trim();
}

/** A new project with the tarball and `packages` installed, and the consumer files copied in. */
async function project(name: string, packages: string[]): Promise<string> {
  const root = join(dir, name);
  await mkdir(root, { recursive: true });
  await writeFile(join(root, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }));
  await sh(
    'npm',
    ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', tarball, ...packages],
    root,
  );
  for (const file of await readdir(FILES)) await cp(join(FILES, file), join(root, file));
  return root;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'consumer-'));
  const packed = await sh('npm', ['pack', '--pack-destination', dir, '--loglevel=error'], PROJECT_ROOT);
  tarball = join(dir, packed.split('\n').at(-1)!);
}, scaled(240_000));
afterAll(async () => {
  await redis?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('the packed package', () => {
  it('ships only the build, the README, the docs, the license and the changelog', async () => {
    const listing = await sh('tar', ['-tzf', tarball], dir);
    const files = listing.split('\n');
    expect(
      files.filter(
        (f) => !/^package\/(dist\/|README\.md$|docs\/[a-z]+\.md$|LICENSE$|CHANGELOG\.md$|package\.json$)/.test(f),
      ),
    ).toEqual([]);
    expect(files).toContain('package/dist/src/store/redis/lua/save.lua');
    // The CLIs' help points at it for the host module.
    expect(files).toContain('package/docs/stores.md');
    expect(
      files.filter(
        (f) =>
          /\/(test|examples|scripts|\.ci)\/|tsconfig|vitest|\.tgz$/.test(f) ||
          (f.endsWith('.ts') && !f.endsWith('.d.ts')),
      ),
    ).toEqual([]);
  });

  it('passes publint and arethetypeswrong (ESM only)', async () => {
    expect(
      await sh(join(PROJECT_ROOT, 'node_modules', '.bin', 'publint'), ['run', tarball, '--strict'], dir),
    ).toContain('All good');
    await sh(join(PROJECT_ROOT, 'node_modules', '.bin', 'attw'), [tarball, '--profile', 'esm-only'], dir);
  });
});

const [low, high] = [
  { xstate: pkg.peerDependencies.xstate!.replace('^', ''), zod: pkg.peerDependencies.zod!.replace('^', '') },
  { xstate: pkg.devDependencies.xstate!, zod: pkg.devDependencies.zod! },
];

describe.each([
  ['the low end', low],
  ['the high end', high],
])('installed with its peers only, at %s of their ranges', (_label, versions) => {
  let root: string;
  beforeAll(async () => {
    root = await project(`peers-${versions.xstate}-${versions.zod}`, [
      `xstate@${versions.xstate}`,
      `zod@${versions.zod}`,
    ]);
  }, scaled(240_000));

  it(`runs a task to done from plain JavaScript (xstate ${versions.xstate}, zod ${versions.zod})`, async () => {
    expect(await sh('node', ['memory.mjs', 'memory'], root)).toBe('memory: done goal_met 1 refund');
  });

  it('installs the store CLIs as commands that run the built JavaScript', async () => {
    const bin = (name: string) => join(root, 'node_modules', '.bin', `statechart-agent-${name}`);
    expect(await sh(bin('tasks'), ['list', '--data-dir', join(root, 'no-tasks')], root)).toBe('No tasks.');
    // The help names the installed commands and points at the docs, never at a source file the package lacks.
    for (const name of ['tasks', 'trace', 'step']) {
      const help = await sh(bin(name), ['--help'], root);
      expect(help).toMatch(new RegExp(`^Usage: statechart-agent-${name} `));
      expect(help).not.toMatch(/src\/cli|\.ts\b/);
    }
  });

  it('continues a waiting task through the installed step command with a JavaScript host module', async () => {
    const dataDir = join(root, 'tasks-step');
    expect(await sh('node', ['waiting.mjs', dataDir], root)).toBe('refund-1 waiting_for_confirmation');
    const bin = join(root, 'node_modules', '.bin', 'statechart-agent-step');
    const out = await sh(bin, ['refund-1', '--data-dir', dataDir, '--host', './host.mjs'], root, {}, 'confirm\nnext\n');
    expect(out).toContain('waiting_for_confirmation');
    expect(out).toMatch(/done\b[^\n]*goal_met/);
    expect(out).toContain('refund TX-1');
    expect(
      await sh(join(root, 'node_modules', '.bin', 'statechart-agent-tasks'), ['list', '--data-dir', dataDir], root),
    ).toMatch(/refund-1\s+done/);
  });

  it('loads the main entry without any optional peer; the entries that need one fail naming it', async () => {
    expect((await sh('node', ['optional.mjs'], root)).split('\n')).toEqual([
      'statechart-agent/inspect: loaded (function, function)',
      'webSocketSink: missing_peer webSocketSink needs the optional peer dependency ws: npm install ws',
      'statechart-agent/redis: missing_peer statechart-agent/redis needs the optional peer dependency ioredis: npm install ioredis',
      'statechart-agent/openai: missing_peer statechart-agent/openai needs the optional peer dependency openai: npm install openai',
      'statechart-agent/ai-sdk: missing_peer statechart-agent/ai-sdk needs the optional peer dependency ai: npm install ai',
      'statechart-agent/otel: missing_peer statechart-agent/otel needs the optional peer dependency @opentelemetry/api: npm install @opentelemetry/api',
      'statechart-agent/bullmq: missing_peer statechart-agent/bullmq needs the optional peer dependency bullmq: npm install bullmq',
      'statechart-agent/mcp: loaded (function)',
      'connectMcp: missing_peer connectMcp needs the optional peer dependency @modelcontextprotocol/sdk: npm install @modelcontextprotocol/sdk',
      'statechart-agent/fastify: loaded (function)',
    ]);
  });
});

describe('with ioredis installed', () => {
  it.skipIf(!redis)(
    'runs the task on RedisStore',
    async () => {
      const root = await project('redis', [
        `xstate@${high.xstate}`,
        `zod@${high.zod}`,
        `ioredis@${pkg.devDependencies.ioredis}`,
      ]);
      expect(await sh('node', ['redis.mjs'], root, { REDIS_URL: redis!.url })).toBe('redis: done goal_met 1 refund');
    },
    scaled(240_000),
  );
});

describe('a TypeScript consumer (strict, skipLibCheck false)', () => {
  let root: string;
  beforeAll(async () => {
    const optional = [
      'ioredis',
      'openai',
      'ai',
      'ws',
      '@statelyai/inspect',
      'fastify',
      '@fastify/rate-limit',
      'elkjs',
      '@opentelemetry/api',
      '@opentelemetry/sdk-trace-base',
      '@modelcontextprotocol/sdk',
      'bullmq',
    ].map((name) => `${name}@${pkg.devDependencies[name]}`);
    // @ai-sdk/provider's declarations import `json-schema` types that it does not depend on (vercel/ai#15874): a
    // consumer that checks libraries (skipLibCheck false) needs @types/json-schema next to `ai`.
    const types = [
      `typescript@${pkg.devDependencies.typescript}`,
      `@types/node@${pkg.devDependencies['@types/node']}`,
      '@types/json-schema@7.0.15',
    ];
    root = await project('typescript', [`xstate@${high.xstate}`, `zod@${high.zod}`, ...types, ...optional]);
  }, scaled(240_000));

  it.each(['node16', 'bundler'])('compiles with %s resolution and runs with node', async (resolution) => {
    await sh(join(root, 'node_modules', '.bin', 'tsc'), ['-p', `tsconfig.${resolution}.json`], root);
    expect(await sh('node', [`dist-${resolution}/consumer.js`], root)).toBe(
      'ts: answered answered_without_criterion resumed 0',
    );
  });

  it('serves a task over HTTP with statechart-agent/fastify (pages and elkjs layout included)', async () => {
    expect(await sh('node', ['service.mjs'], root)).toBe('service: 200 done true 200 true 200');
  });

  it('compiles the types of every entry', async () => {
    await sh(join(root, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.entries.json'], root);
  });

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
