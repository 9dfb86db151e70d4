/**
 * The four-eyes refund of the demo service: the customer of O-1002 asks for 450.00 back. The scripted assistant
 * reads the order, first proposes the whole order (600.00: refused by the mandate, at most 450.00), then 450.00,
 * which is above what a support agent refunds alone (`APPROVE_ABOVE_CENTS`): a `refunds:approve` holder other than
 * the requester (the demo's M1) approves or rejects it. The approver's inbox shows what changed between the two.
 */
import type { ModelReply } from '../../src/index.js';
import { type ScriptStep, type ScriptView, reply } from '../../src/testing/index.js';
import type { Order } from '../../tools/getOrder.js';
import type { Refund } from '../../tools/refundOrder.js';
import { APPROVAL_REFUND_TERMS } from './requests.js';

export function approvalRefundScript(turns = 8): ScriptStep[] {
  const orderId = APPROVAL_REFUND_TERMS.order_id;
  const step = (view: ScriptView): ModelReply => {
    const refund = view.data<Refund>('refund_order');
    if (refund)
      return reply.answer(
        `Refunded ${(refund.amount_cents / 100).toFixed(2)} on ${refund.order_id} (${refund.refund_id}).`,
      );
    const refused = view.errorCode('refund_order');
    if (refused === 'outside_mandate')
      return reply.call('refund_order', {
        order_id: orderId,
        amount_cents: APPROVAL_REFUND_TERMS.max_amount_cents,
        reason: 'cracked desk top; the customer keeps the desk',
      });
    if (refused) return reply.answer(`The refund was not made (${refused}).`);
    const order = view.data<Order>('get_order');
    if (order)
      return reply.call('refund_order', {
        order_id: order.order_id,
        amount_cents: order.refundable_cents,
        reason: 'damaged on delivery: full refund',
      });
    return reply.call('get_order', { order_id: orderId });
  };
  return Array.from({ length: turns }, () => step);
}
