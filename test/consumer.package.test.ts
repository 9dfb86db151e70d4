/**
 * The package as an app gets it: the run's tarball (`npm pack`, which builds; packed once for the tier by
 * test/support/packOnce.ts) installed into new projects.
 *
 * - With the peer dependencies only (xstate, zod) at the low and the high end of their ranges: a plain `.mjs` runs a
 *   refund task to done on MemoryStore; the main entry loads without any optional peer, and each entry that needs one
 *   fails naming it.
 * - With ioredis added: the same task on RedisStore.
 * - publint and @arethetypeswrong/cli (ESM-only profile) find no problem in the tarball.
 *
 * The TypeScript consumer and the README's examples, installed, are in consumerTypes.package.test.ts (a file of its own,
 * so it runs beside this one).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { high, low, packedTarball, pkg, project, sh } from './support/consumer.js';
import { useTestRedis } from './support/redis.js';
import { PROJECT_ROOT } from './support/workers.js';
import { scaled } from './support/timeScale.js';

const redis = await useTestRedis();

let dir: string;
let tarball: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'consumer-'));
  tarball = await packedTarball();
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

describe.each([
  ['the low end', low],
  ['the high end', high],
])('installed with its peers only, at %s of their ranges', (_label, versions) => {
  let root: string;
  beforeAll(async () => {
    root = await project(dir, tarball, `peers-${versions.xstate}-${versions.zod}`, [
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
      const root = await project(dir, tarball, 'redis', [
        `xstate@${high.xstate}`,
        `zod@${high.zod}`,
        `ioredis@${pkg.devDependencies.ioredis}`,
      ]);
      expect(await sh('node', ['redis.mjs'], root, { REDIS_URL: redis!.url })).toBe('redis: done goal_met 1 refund');
    },
    scaled(240_000),
  );
});
