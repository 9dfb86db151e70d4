/**
 * Per-tenant, per-tool rate limits, counted right before a call runs. Backed by rate-limiter-flexible: in memory by
 * default (one process), or on Redis so that every worker shares the same counts. Loaded only when a tool declares
 * a `rateLimit`. A limiter that cannot answer (Redis down) refuses the call: a limit that cannot be checked does not
 * let the call through.
 */
import type { CheckVerdict } from '../../machines/actors.js';
import { errorName } from '../../machines/lib/text.js';
import type { RateLimit } from '../tool.js';

/** Where the counts live. `redis`: an ioredis client (or Cluster); every process on it shares the limits. */
export interface RateLimitOptions {
  redis?: unknown;
  /** Key prefix of the counters (default `statechart-agent:rate`). */
  keyPrefix?: string;
}

interface Limiter {
  consume(key: string, points?: number): Promise<unknown>;
}

type Module = typeof import('rate-limiter-flexible');

/** Imported once per process, when the first tool with a limit runs (not once per orchestrator). */
let imported: Promise<Module> | null = null;

export class RateLimits {
  private readonly limiters = new Map<string, Promise<Limiter>>();

  constructor(private readonly options: RateLimitOptions = {}) {}

  /** Takes one point of `tool`'s limit for `tenantId`; a tool without a limit always passes. */
  async consume(tool: { name: string; rateLimit?: RateLimit }, tenantId: string): Promise<CheckVerdict> {
    if (!tool.rateLimit) return { ok: true };
    const { points, perSeconds } = tool.rateLimit;
    try {
      const limiter = await this.limiter(tool.name, tool.rateLimit);
      await limiter.consume(tenantId, 1);
      return { ok: true };
    } catch (error) {
      const res = error as { msBeforeNext?: unknown } | null;
      if (res && typeof res === 'object' && typeof res.msBeforeNext === 'number') {
        const seconds = Math.ceil(res.msBeforeNext / 1000);
        return {
          ok: false,
          code: 'rate_limited',
          summary: `${tool.name} allows ${points} call(s) per ${perSeconds} s for this tenant; try again in ${seconds} s`,
        };
      }
      return {
        ok: false,
        code: 'rate_limited',
        summary: `the rate limit of ${tool.name} could not be checked (${errorName(error)}); the call was not run`,
      };
    }
  }

  private limiter(name: string, limit: RateLimit): Promise<Limiter> {
    const key = `${name}:${limit.points}/${limit.perSeconds}`;
    let limiter = this.limiters.get(key);
    if (!limiter) {
      limiter = this.load().then((m) => {
        const keyPrefix = `${this.options.keyPrefix ?? 'statechart-agent:rate'}:${name}`;
        const base = { keyPrefix, points: limit.points, duration: limit.perSeconds };
        return this.options.redis
          ? new m.RateLimiterRedis({ ...base, storeClient: this.options.redis })
          : new m.RateLimiterMemory(base);
      });
      // A failed load is not kept: the next call tries again.
      limiter.catch(() => this.limiters.delete(key));
      this.limiters.set(key, limiter);
    }
    return limiter;
  }

  private load(): Promise<Module> {
    if (!imported) {
      imported = import('rate-limiter-flexible');
      // A failed import is not kept either.
      imported.catch(() => (imported = null));
    }
    return imported;
  }
}
