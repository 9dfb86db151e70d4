/**
 * bullmq, loaded when statechart-agent/bullmq loads. Without bullmq installed the entry fails with `missing_peer`, naming
 * the package to install; a static import would fail first, with Node's bare ERR_MODULE_NOT_FOUND.
 */
import { optionalPeer } from './optionalPeer.js';

export const bullmq: typeof import('bullmq') = await optionalPeer(
  'bullmq',
  () => import('bullmq'),
  'statechart-agent/bullmq',
);
