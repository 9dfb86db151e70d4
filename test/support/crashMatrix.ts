/** Checks shared by the crash tests: what a finished task and the business data must show. */
import { expect } from 'vitest';
import type { AuditEntry } from '../../machines/journal.js';
import type { RedisBookingService } from '../../examples/booking/redisBookingService.js';
import type { TaskEnvelope } from '../../src/store/envelope.js';
import { redisKeys } from '../../src/store/redis/redisKeys.js';
import type { RedisStore } from '../../src/store/redis/redisStore.js';
import { type AckedSave, entryDigest } from './crashProtocol.js';
import { until } from './harness.js';

export interface Outcome {
  state: string;
  code: string | null;
  answer: string | null;
  /** Business rows in short form: "B204 R7 E17", "TX-9001 O-1001 999.00". */
  rows: string[];
}

export interface Business {
  rows: string[];
  /** Bookings + refunds. */
  records: number;
  /** Distinct idempotency keys among them. */
  keys: number;
  /** Reservation + refund requests that reached the service. */
  requests: number;
}

export async function businessOf(services: RedisBookingService): Promise<Business> {
  const [bookings, refunds, requests] = await Promise.all([
    services.bookings(),
    services.refunds(),
    services.requestCounts(),
  ]);
  const keys = new Set([...bookings.map((b) => b.idempotencyKey), ...refunds.map((r) => r.idempotencyKey)]);
  return {
    rows: [
      ...bookings.map((b) => `${b.bookingId} ${b.roomId} ${b.requesterId}`),
      ...refunds.map((r) => `${r.refundId} ${r.orderId} ${(r.amountCents / 100).toFixed(2)}`),
    ],
    records: bookings.length + refunds.length,
    keys: keys.size,
    requests: requests.reserve + requests.refund,
  };
}

export function outcomeOf(envelope: TaskEnvelope, business: Business): Outcome {
  const { outcome } = envelope.snapshot.context;
  return {
    state: envelope.summary.state,
    code: outcome?.reason.code ?? null,
    answer: outcome?.answer ?? null,
    rows: business.rows,
  };
}

export async function auditOf(store: RedisStore, envelope: TaskEnvelope): Promise<AuditEntry[]> {
  return (await store.readJournal(envelope.taskId, 'audit', 0, envelope.journal.audit)) as AuditEntry[];
}

/**
 * Nothing acknowledged was lost: the final revision is past every acknowledged one, and the final audit journal
 * starts with exactly the entries the acknowledged saves appended, in their order. `acked` must be the saves of a
 * process that created the task (revisions 1..n, each appending right after the previous one).
 *
 * Why this is sound: a save appends its entries only if the stored journal length equals the length the envelope
 * expects before them (the save script checks it, all or nothing), so the journal committed at revision r is
 * exactly what revisions 1..r appended, in order. The worker records an entry's digest only after the store
 * acknowledged the save that carried it (`recordingAcks`), and prints it before anything else runs.
 */
export function expectAcknowledgedKept(acked: AckedSave[], final: TaskEnvelope, audit: readonly AuditEntry[]): void {
  expect(acked.length).toBeGreaterThan(0);
  expect(acked.map((a) => a.revision)).toEqual(acked.map((_, i) => i + 1));
  for (const ack of acked) expect(final.revision).toBeGreaterThan(ack.revision);
  const acknowledged = acked.flatMap((a) => a.appended);
  expect(acknowledged.length).toBe(acked.at(-1)!.audit);
  expect(audit.length).toBeGreaterThanOrEqual(acknowledged.length);
  expect(audit.slice(0, acknowledged.length).map(entryDigest)).toEqual(acknowledged);
}

/** Waits until nobody holds the task's lease (the killed holder's lease expired). */
export async function leaseExpired(
  client: { exists(key: string): Promise<number> },
  prefix: string,
  taskId: string,
): Promise<void> {
  const key = redisKeys(prefix).lease(taskId);
  await until(async () => (await client.exists(key)) === 0, 10_000);
}

export function kinds<K extends AuditEntry['kind']>(
  audit: readonly AuditEntry[],
  kind: K,
): Extract<AuditEntry, { kind: K }>[] {
  return audit.filter((e): e is Extract<AuditEntry, { kind: K }> => e.kind === kind);
}
