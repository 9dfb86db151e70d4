/**
 * Optional peers: an app without one gets `missing_peer` naming the package to install, never Node's bare
 * ERR_MODULE_NOT_FOUND. The packed package checks the real entries (consumer*.package.test.ts); this checks the
 * loader and that no source imports a peer's values statically (which would fail before the loader runs).
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AgentError } from '../src/errors.js';
import { optionalPeer } from '../src/peers/optionalPeer.js';
import { PROJECT_ROOT } from './support/workers.js';

const PEERS = [
  'ioredis',
  'openai',
  'ai',
  '@opentelemetry/api',
  'bullmq',
  'ws',
  '@statelyai/inspect',
  'elkjs',
  '@modelcontextprotocol/sdk',
  'fastify',
  '@fastify/rate-limit',
];

describe('optionalPeer', () => {
  it('turns a missing peer into missing_peer naming the package and who needs it', async () => {
    const missing = await optionalPeer('not-a-real-peer', () => import('not-a-real-peer' as string), 'the thing').catch(
      (error: unknown) => error,
    );
    expect(missing).toBeInstanceOf(AgentError);
    expect(missing).toMatchObject({
      code: 'missing_peer',
      message: 'the thing needs the optional peer dependency not-a-real-peer: npm install not-a-real-peer',
    });
    expect((missing as Error).cause).toMatchObject({ code: 'ERR_MODULE_NOT_FOUND' });
  });

  it('keeps the error of a peer that is installed but broken (installing it again would not help)', async () => {
    const broken = Object.assign(new Error("Cannot find package 'left-pad' imported from /x/node_modules/peer/a.js"), {
      code: 'ERR_MODULE_NOT_FOUND',
    });
    await expect(optionalPeer('peer', () => Promise.reject(broken), 'the thing')).rejects.toBe(broken);
    const other = new SyntaxError('Unexpected token');
    await expect(optionalPeer('peer', () => Promise.reject(other), 'the thing')).rejects.toBe(other);
  });

  it('loads a peer that is there', async () => {
    const zod = await optionalPeer('zod', () => import('zod'), 'the thing');
    expect(typeof zod.z.object).toBe('function');
  });
});

describe('the sources', () => {
  it('import optional peers for their types only; values come through src/peers', async () => {
    const pattern = new RegExp(
      `^import (?!type )[^;]*from '(${PEERS.map((p) => p.replace(/[/@.]/g, '\\$&')).join('|')})(/[^']*)?';`,
      'gm',
    );
    const offenders: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(join(PROJECT_ROOT, dir), { withFileTypes: true })) {
        const path = `${dir}/${entry.name}`;
        if (entry.isDirectory()) await walk(path);
        else if (path.endsWith('.ts')) {
          for (const line of (await readFile(join(PROJECT_ROOT, path), 'utf8')).match(pattern) ?? [])
            offenders.push(`${path}: ${line}`);
        }
      }
    };
    await walk('src');
    expect(offenders).toEqual([]);
  });
});
