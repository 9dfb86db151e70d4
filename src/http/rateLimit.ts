/**
 * The service's HTTP rate limit, with `@fastify/rate-limit` (an optional peer, loaded when the service registers):
 * starts and decisions are counted per caller, keyed by the authenticated principal (tenant and user) when the
 * request has one, else by its IP (`request.ip`, which honours `Fastify({ trustProxy })`). A caller over the limit
 * gets `429 rate_limited` with `Retry-After`, before any of the route's work; reads are not limited here.
 *
 * Counters live in this process unless `redis` is given: N instances behind a balancer then allow N times the limit.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../../machines/context.js';
import { optionalPeer } from '../peers/optionalPeer.js';
import { type ServiceError, serviceError } from './serviceError.js';

/** The `rateLimit` option: the limits, or `false` to turn the limit off (an explicit choice). */
export interface RateLimitOptions {
  /** Starts (`POST /api/tasks`) per caller per window (default 20). */
  starts?: number;
  /** Calls of each decision route (confirm, reject, answer, cancel, next) per caller per window (default 60). */
  decisions?: number;
  /** The window in milliseconds (default 60,000). */
  windowMs?: number;
  /** An ioredis client to count in, shared by every instance of the service (default: this process's memory). */
  redis?: unknown;
}

export const RATE_LIMIT_DEFAULTS = { starts: 20, decisions: 60, windowMs: 60_000 } as const;

/** Which limit a route counts against. */
export type RateLimited = 'start' | 'decision';

/** A route's `config.rateLimit` for `@fastify/rate-limit`. */
export type RouteRateLimit = (kind: RateLimited) => Record<string, unknown>;

/**
 * Registers `@fastify/rate-limit` on the service's own context (or uses the host's, when its app already has it)
 * and returns each limited route's config; null when `options` is `false`.
 */
export async function registerRateLimit(
  app: FastifyInstance,
  options: RateLimitOptions | false | undefined,
  principalOf: (request: FastifyRequest) => Promise<Principal | null>,
): Promise<RouteRateLimit | null> {
  if (options === false) return null;
  const settings = { ...RATE_LIMIT_DEFAULTS, ...options };
  // A host that registered the plugin on its app already: its onRoute hook reads our routes' config too.
  if (!app.hasDecorator('rateLimit')) {
    const plugin = await optionalPeer(
      '@fastify/rate-limit',
      () => import('@fastify/rate-limit'),
      "the service's rate limit (or set rateLimit: false)",
    );
    await app.register(plugin.default, {
      global: false,
      ...(settings.redis !== undefined ? { redis: settings.redis, nameSpace: 'statechart-agent-http-' } : {}),
    });
  }
  const keyGenerator = async (request: FastifyRequest): Promise<string> => {
    const principal = await principalOf(request).catch(() => null);
    return principal ? `principal:${JSON.stringify([principal.tenantId, principal.userId])}` : `ip:${request.ip}`;
  };
  const errorResponseBuilder = (
    _request: FastifyRequest,
    context: { max: number; after: string; ttl: number },
  ): ServiceError =>
    serviceError(
      429,
      'rate_limited',
      `more than ${context.max} requests of this kind in ${Math.round(settings.windowMs / 1000)} s from this caller; try again in ${context.after}`,
    );
  return (kind) => ({
    max: kind === 'start' ? settings.starts : settings.decisions,
    timeWindow: settings.windowMs,
    keyGenerator,
    errorResponseBuilder,
  });
}

/** Problems with the `rateLimit` option, or null. */
export function rateLimitProblem(option: unknown): string | null {
  if (option === undefined || option === false) return null;
  if (typeof option !== 'object' || option === null || Array.isArray(option))
    return 'rateLimit is false (off, explicitly) or { starts, decisions, windowMs, redis }';
  for (const field of ['starts', 'decisions', 'windowMs'] as const) {
    const value = (option as Record<string, unknown>)[field];
    if (value !== undefined && !(Number.isInteger(value) && (value as number) > 0))
      return `rateLimit.${field} must be a positive whole number, not ${JSON.stringify(value)}`;
  }
  return null;
}
