/**
 * The demo's kitchen: orders catering for a booked meeting, idempotent by key. It can be closed (every order is
 * refused), which is how the demo's saga fails after the room was booked.
 */
import type { CateringOrder, CateringService } from '../../tools/orderCatering.js';

export class CateringDesk implements CateringService {
  readonly orders: (CateringOrder & { requesterId: string; people: number })[] = [];
  /** Why the kitchen refuses every order, or null when it is open. */
  closed: string | null = null;
  private readonly byKey = new Map<string, CateringOrder>();
  private nextNumber = 501;

  async order(request: { bookingId: string; people: number; requesterId: string; idempotencyKey: string }) {
    const earlier = this.byKey.get(request.idempotencyKey);
    if (earlier) return { status: 'ordered' as const, order: earlier };
    if (this.closed) return { status: 'refused' as const, code: 'kitchen_closed', detail: this.closed };
    const order: CateringOrder = {
      status: 'ordered',
      order_id: `C-${this.nextNumber++}`,
      booking_id: request.bookingId,
    };
    this.orders.push({ ...order, requesterId: request.requesterId, people: request.people });
    this.byKey.set(request.idempotencyKey, order);
    return { status: 'ordered' as const, order };
  }

  async findOrderByKey(key: string): Promise<CateringOrder | undefined> {
    return this.byKey.get(key);
  }
}
