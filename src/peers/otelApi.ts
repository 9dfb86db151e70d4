/**
 * @opentelemetry/api, loaded when statechart-agent/otel loads. Without @opentelemetry/api installed the entry fails with `missing_peer`, naming
 * the package to install; a static import would fail first, with Node's bare ERR_MODULE_NOT_FOUND.
 */
import { optionalPeer } from './optionalPeer.js';

export const otelApi: typeof import('@opentelemetry/api') = await optionalPeer(
  '@opentelemetry/api',
  () => import('@opentelemetry/api'),
  'statechart-agent/otel',
);
