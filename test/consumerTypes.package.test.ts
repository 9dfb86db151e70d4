/**
 * A TypeScript consumer of the run's tarball (test/support/packOnce.ts), with the peers at the high end and every
 * optional peer installed: compiled by `tsc` (strict, skipLibCheck false) with node16 and with bundler resolution and
 * run with node; the service served with statechart-agent/fastify; the types of every entry compiled. The README's
 * examples, compiled in the same kind of project, are in consumerReadme.package.test.ts (a file of its own, so it runs
 * beside this one).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packedTarball, project, sh, typescriptConsumerPackages } from './support/consumer.js';
import { scaled } from './support/timeScale.js';

let dir: string;
let root: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'consumer-ts-'));
  root = await project(dir, await packedTarball(), 'typescript', typescriptConsumerPackages());
  // The wait for the run's pack, then the install: each limit as long as it was when they were two hooks.
}, scaled(480_000));
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('a TypeScript consumer (strict, skipLibCheck false)', () => {
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
});
