/**
 * order_catering: a write that orders food for a booked meeting. The kitchen may refuse (closed that day, too many
 * people): a business failure, returned as a value. The demo's saga: a room booked, then the catering refused, and
 * the booking undone by its compensation.
 */
import { z } from 'zod';
import { type ToolResult, defineTool } from '../src/index.js';
import { bookingMandate, enoughSeats } from './mandates.js';

export const orderCateringInput = z.strictObject({
  booking_id: z.string().min(1).max(32),
  people: z.number().int().min(1).max(200),
});

export const cateringOrderSchema = z.strictObject({
  status: z.literal('ordered'),
  order_id: z.string(),
  booking_id: z.string(),
});

export type CateringOrder = z.infer<typeof cateringOrderSchema>;

export interface CateringService {
  order(
    request: { bookingId: string; people: number; requesterId: string; idempotencyKey: string },
    signal: AbortSignal,
  ): Promise<{ status: 'ordered'; order: CateringOrder } | { status: 'refused'; code: string; detail: string }>;
  findOrderByKey(key: string): Promise<CateringOrder | undefined>;
}

export function orderCatering(service: CateringService, options: { timeoutMs?: number } = {}) {
  return defineTool({
    name: 'order_catering',
    description: 'Orders catering for a booked meeting (by booking_id). Writes: only status "ordered" is success.',
    effect: 'write',
    scopes: ['rooms:book'],
    input: orderCateringInput,
    output: cateringOrderSchema,
    timeoutMs: options.timeoutMs ?? 3_000,
    sameKeyRetrySafe: true,
    confirm: { never: 'catering for the meeting the requester booked, for the people they named' },
    dependsOn: [],
    mandate: bookingMandate.rule((args, terms) => enoughSeats(args.people, terms)),
    async execute(args, ctx): Promise<ToolResult<CateringOrder>> {
      const result = await service.order(
        {
          bookingId: args.booking_id,
          people: args.people,
          requesterId: ctx.principal.userId,
          idempotencyKey: ctx.idempotencyKey,
        },
        ctx.signal,
      );
      if (result.status === 'ordered') return { ok: true, value: result.order };
      return { ok: false, code: result.code, summary: result.detail };
    },
    async lookup(idempotencyKey) {
      const order = await service.findOrderByKey(idempotencyKey);
      return order ? { found: true, value: order } : { found: false };
    },
  });
}
