/**
 * The refund write the re-check tests share (test/recheckNow*.test.ts): its user and the tool's fixed parts, with
 * synchronous hooks so the gate re-checks it itself. Each test adds its own confirmation rule, hooks and execute.
 */
import { z } from 'zod';
import type { Principal } from '../../machines/context.js';

export const REFUND_USER: Principal = { userId: 'u1', tenantId: 't1', scopes: ['orders:refund'] };

export const REFUND_BASE = {
  name: 'refund_order',
  description: 'Refunds an order.',
  effect: 'write',
  scopes: ['orders:refund'],
  timeoutMs: 1_000,
  sameKeyRetrySafe: true,
  hooks: 'sync',
  input: z.strictObject({ order: z.string() }),
  output: z.strictObject({ refunded: z.boolean() }),
} as const;
