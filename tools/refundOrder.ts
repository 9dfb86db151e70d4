/**
 * refund_order: a write that moves money. Refunds above a threshold wait for a human confirmation bound to the
 * exact amount, and (optionally) refunds above a second threshold for an approver other than the requester (four
 * eyes); the amount can never exceed what is refundable, nor what the user asked for (the refund mandate), and is
 * debited from the task's money budget before it runs. Idempotent by the host's key.
 */
import { z } from 'zod';
import { type ToolResult, type ValidationResult, defineTool } from '../src/index.js';
import { refundMandate, withinRefund } from './mandates.js';
import type { Order } from './getOrder.js';

export const refundOrderInput = z.strictObject({
  order_id: z.string().min(1).max(64),
  amount_cents: z.number().int().positive().max(100_000_000),
  reason: z.string().min(1).max(200),
});

export const refundSchema = z.strictObject({
  status: z.literal('succeeded'),
  refund_id: z.string(),
  order_id: z.string(),
  amount_cents: z.number().int().positive(),
});

export type RefundOrderInput = z.infer<typeof refundOrderInput>;
export type Refund = z.infer<typeof refundSchema>;

export interface RefundService {
  getOrder(tenantId: string, orderId: string, signal: AbortSignal): Promise<Order | undefined>;
  refund(
    request: RefundOrderInput & { tenantId: string; requestedBy: string; idempotencyKey: string },
    signal: AbortSignal,
  ): Promise<{ status: 'succeeded'; refund: Refund } | { status: 'rejected'; code: string; detail: string }>;
  findByIdempotencyKey(key: string): Promise<Refund | undefined>;
}

const money = (cents: number) => (cents / 100).toFixed(2);

export interface RefundOrderOptions {
  /** Above this, the task's user confirms the exact amount (default 100.00). */
  confirmAboveCents?: number;
  /** Above this, an approver holding `refunds:approve` (not the requester) must approve instead (default: never). */
  approveAboveCents?: number;
  /** How many approvers (default 1). */
  approvals?: number;
  /** A rejected confirmation ends the task instead of going back to the model. */
  cancelOnReject?: boolean;
  timeoutMs?: number;
}

export function refundOrder(service: RefundService, options: RefundOrderOptions = {}) {
  const threshold = options.confirmAboveCents ?? 10_000;
  const approval = options.approveAboveCents;
  return defineTool({
    name: 'refund_order',
    description:
      `Refunds part or all of an order. Moves money. Refunds above ${money(threshold)} need the user's confirmation ` +
      'of the exact amount. Success only with status "succeeded" and a refund_id.',
    effect: 'write',
    scopes: ['refunds:write'],
    input: refundOrderInput,
    output: refundSchema,
    timeoutMs: options.timeoutMs ?? 5_000,
    sameKeyRetrySafe: true,
    // Thresholds on the task's total, so that splitting a refund into small ones does not avoid them.
    confirm: (args, _principal, task) =>
      approval !== undefined && args.amount_cents + task.moneyMoved > approval
        ? { approverScope: 'refunds:approve', approvals: options.approvals ?? 1 }
        : args.amount_cents + task.moneyMoved > threshold,
    ...(options.cancelOnReject ? { confirmation: { onReject: 'cancel' as const } } : {}),
    // Under a refund mandate: the order the user asked about, no more than they asked for.
    mandate: refundMandate.rule((args, terms, task) => withinRefund(args, terms, task)),
    // What the refund moves, debited from the task's money budget before it runs.
    amount: (args) => args.amount_cents,
    describeConfirmation: (args) => `Refund ${money(args.amount_cents)} on order ${args.order_id} (${args.reason})`,
    async validate(args, ctx): Promise<ValidationResult> {
      const order = await service.getOrder(ctx.principal.tenantId, args.order_id, ctx.signal);
      if (!order) return { ok: false, code: 'not_found', summary: `no order ${args.order_id}` };
      if (args.amount_cents > order.refundable_cents) {
        return {
          ok: false,
          code: 'amount_exceeds_refundable',
          summary: `${money(args.amount_cents)} is more than the refundable ${money(order.refundable_cents)}`,
        };
      }
      return { ok: true };
    },
    async execute(args, ctx): Promise<ToolResult<Refund>> {
      const result = await service.refund(
        {
          ...args,
          tenantId: ctx.principal.tenantId,
          requestedBy: ctx.principal.userId,
          idempotencyKey: ctx.idempotencyKey,
        },
        ctx.signal,
      );
      if (result.status === 'succeeded') return { ok: true, value: result.refund };
      return { ok: false, code: result.code, summary: result.detail };
    },
    async lookup(idempotencyKey) {
      const refund = await service.findByIdempotencyKey(idempotencyKey);
      return refund ? { found: true, value: refund } : { found: false };
    },
  });
}

/**
 * What a host loosens to let refunds up to 100.00 (the tool's default threshold) run on its support agents' standing
 * authority, without a confirmation: `createOrchestrator({ ..., loosen: refundDeskAuthority })`. Without it, every
 * refund is confirmed, whatever the tool's rule says (a money-moving write runs unconfirmed only up to the host's
 * `loosen.unconfirmedMoney`, 0 by default). The reason is recorded in the audit of every task.
 */
export const refundDeskAuthority = {
  unconfirmedMoney: {
    upTo: 10_000,
    reason: "refunds up to 100.00 in a task are within a support agent's standing authority",
  },
} as const;
