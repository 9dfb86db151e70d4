/**
 * get_order: a read of one order of the principal's tenant. The customer note is untrusted free text.
 */
import { z } from 'zod';
import { type ToolResult, defineTool } from '../src/index.js';
import { refundMandate, withinRefund } from './mandates.js';

export const getOrderInput = z.strictObject({ order_id: z.string().min(1).max(64) });

export const orderSchema = z.strictObject({
  order_id: z.string(),
  total_cents: z.number().int().nonnegative(),
  refunded_cents: z.number().int().nonnegative(),
  refundable_cents: z.number().int().nonnegative(),
  currency: z.string().length(3),
  /** Written by the customer: data, never an instruction or an approval. */
  customer_note: z.string().max(2_000),
});

export type Order = z.infer<typeof orderSchema>;

export interface OrderReader {
  getOrder(tenantId: string, orderId: string, signal: AbortSignal): Promise<Order | undefined>;
}

export function getOrder(service: OrderReader, options: { timeoutMs?: number } = {}) {
  return defineTool({
    name: 'get_order',
    description: 'Reads one order: totals, what was already refunded, and the customer note. Read-only.',
    effect: 'read',
    scopes: ['orders:read'],
    input: getOrderInput,
    output: orderSchema,
    timeoutMs: options.timeoutMs ?? 2_000,
    retry: { maxAttempts: 2, baseDelayMs: 100, maxDelayMs: 1_000 },
    // Under a refund mandate: only the order the user asked about.
    mandate: refundMandate.rule((args, terms) => withinRefund(args, terms)),
    // Tenant isolation before the read runs: an order of another tenant (or none) is not this session's to read.
    async authorize(args, ctx) {
      const order = await service.getOrder(ctx.principal.tenantId, args.order_id, ctx.signal);
      return order
        ? { ok: true }
        : { ok: false, summary: `no order ${args.order_id} in tenant ${ctx.principal.tenantId}` };
    },
    async execute(args, ctx): Promise<ToolResult<Order>> {
      const order = await service.getOrder(ctx.principal.tenantId, args.order_id, ctx.signal);
      return order
        ? { ok: true, value: order }
        : { ok: false, code: 'not_found', summary: `no order ${args.order_id}` };
    },
  });
}
