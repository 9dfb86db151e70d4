/**
 * ai, loaded when statechart-agent/ai-sdk loads. Without ai installed the entry fails with `missing_peer`, naming
 * the package to install; a static import would fail first, with Node's bare ERR_MODULE_NOT_FOUND.
 */
import { optionalPeer } from './optionalPeer.js';

export const aiSdk: typeof import('ai') = await optionalPeer('ai', () => import('ai'), 'statechart-agent/ai-sdk');
