/**
 * For the package tier (`*.package.test.ts`): the tarball `npm pack` made once for the run (test/support/packOnce.ts),
 * new projects that install it the way an app does, and the versions they install. The files of the tier run side by
 * side: each makes its projects in its own temporary directory and only reads the shared tarball.
 */
import { cp, mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';
import type { PackResult } from './packOnce.js';
import { scaled } from './timeScale.js';
import { PROJECT_ROOT, runCommand } from './workers.js';

const FILES = join(PROJECT_ROOT, 'test', 'fixtures', 'consumer');

export const pkg = JSON.parse(await readFile(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
  version: string;
  peerDependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

/** The peer dependencies at the low end of their ranges, and at the high end (the versions developed against). */
export const [low, high] = [
  { xstate: pkg.peerDependencies.xstate!.replace('^', ''), zod: pkg.peerDependencies.zod!.replace('^', '') },
  { xstate: pkg.devDependencies.xstate!, zod: pkg.devDependencies.zod! },
];

/** Runs a command to its end: its stdout, or an error with both outputs if it fails. */
export async function sh(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}, input = '') {
  const run = await runCommand(command, args, { cwd, env, input, timeoutMs: 240_000 });
  if (run.code !== 0) throw new Error(`${[command, ...args].join(' ')} failed in ${cwd}\n${run.transcript}`);
  return run.out.trim();
}

/**
 * The path of the tarball, once the run's `npm pack` ended (it started with the run; a quiet machine needs well under
 * four minutes, scaled). Throws with npm's output if the pack failed.
 */
export async function packedTarball(): Promise<string> {
  const dir = inject('packDir');
  const resultFile = join(dir, 'pack.json');
  const limit = scaled(240_000);
  const deadline = Date.now() + limit;
  while (!existsSync(resultFile)) {
    if (Date.now() > deadline) throw new Error(`npm pack did not end within ${limit} ms (into ${dir})`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const result = JSON.parse(await readFile(resultFile, 'utf8')) as PackResult;
  if (result.code !== 0) {
    throw new Error(
      `npm pack failed (${result.code ?? result.signal})\n--- stdout\n${result.out}\n--- stderr\n${result.err}`,
    );
  }
  return join(dir, result.out.trim().split('\n').at(-1)!);
}

/** A new project `dir/name` with the tarball and `packages` installed, and the consumer files copied in. */
export async function project(dir: string, tarball: string, name: string, packages: string[]): Promise<string> {
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

/**
 * What the TypeScript consumer installs beside the tarball: the peers at the high end, TypeScript and Node's types,
 * and every optional peer.
 */
export function typescriptConsumerPackages(): string[] {
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
  return [`xstate@${high.xstate}`, `zod@${high.zod}`, ...types, ...optional];
}
