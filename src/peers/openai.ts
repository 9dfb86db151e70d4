/**
 * openai, loaded when statechart-agent/openai loads. Without openai installed the entry fails with `missing_peer`, naming
 * the package to install; a static import would fail first, with Node's bare ERR_MODULE_NOT_FOUND.
 */
import { optionalPeer } from './optionalPeer.js';

export const openai: typeof import('openai') = await optionalPeer(
  'openai',
  () => import('openai'),
  'statechart-agent/openai',
);
