/**
 * ioredis, loaded when statechart-agent/redis loads. Without ioredis installed the entry fails with `missing_peer`,
 * naming the package to install; a static import would fail first, with Node's bare ERR_MODULE_NOT_FOUND.
 */
import type { Redis } from 'ioredis';
import { optionalPeer } from './optionalPeer.js';

export const ioredis: { Redis: typeof Redis } = await optionalPeer(
  'ioredis',
  async () => ({ Redis: (await import('ioredis')).Redis }),
  'statechart-agent/redis',
);
