/** Lease tokens come from a pool of random bytes: each is 16 fresh bytes in hex, none handed out twice. */
import { describe, expect, it } from 'vitest';
import { leaseToken } from '../src/store/redis/redisLeases.js';

describe('lease tokens', () => {
  it('are 32 hex digits, all distinct across several refills of the pool', () => {
    const tokens = Array.from({ length: 1_000 }, () => leaseToken());
    for (const token of tokens) expect(token).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(tokens).size).toBe(tokens.length);
  });
});
