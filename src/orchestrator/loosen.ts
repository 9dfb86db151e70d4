/**
 * Loosening a safe default: explicit, one option each, always with a reason. What a host loosens is persisted with
 * every task it starts (`policy.loosened`) and recorded in the task's audit at start, so an auditor sees each
 * loosening next to the decisions it allowed. Tightening needs no reason and goes in `policy` as before.
 */
import { z } from 'zod';
import type { Policy } from '../../machines/context.js';
import { HostRequestError } from '../errors.js';

/** A loosening's reason: one sentence an auditor can read ("refunds up to 100.00 are the support desk's own call"). */
const reason = z.string().trim().min(3, 'give the reason for loosening this default').max(1_000);

export const loosenSchema = z.strictObject({
  /**
   * A money-moving write runs unconfirmed (when its tool's rule does not ask) while this task's writes, it included,
   * move at most `upTo` minor units. Default: every money-moving write is confirmed.
   */
  unconfirmedMoney: z.strictObject({ upTo: z.number().int().positive(), reason }).optional(),
  /** The Rule of Two no longer asks for a confirmation of writes after untrusted input reached a task holding sensitive data. */
  ruleOfTwo: z.strictObject({ off: z.literal(true), reason }).optional(),
});

/** Safe defaults the host loosens, each with its reason. */
export type Loosen = z.input<typeof loosenSchema>;

/** A loosening as tasks record it. */
export type Loosened = Policy['loosened'][number];

/** The policy fields only `loosen` may move away from their safe value. */
const GUARDED = {
  unconfirmedMoneyUpTo: (value: unknown) => value !== 0 && value !== undefined,
  ruleOfTwo: (value: unknown) => value !== 'confirm' && value !== undefined,
  loosened: (value: unknown) => value !== undefined,
} as const;

/**
 * The policy fields `loosen` sets, and the record of it. Throws HostRequestError when `policy` itself loosens a
 * guarded field (it would carry no reason), or when a loosening is malformed.
 */
export function loosenedPolicy(
  policy: Partial<Policy> | undefined,
  loosen: Loosen | undefined,
): { fields: Partial<Policy>; loosened: Loosened[] } {
  for (const [field, loosens] of Object.entries(GUARDED)) {
    if (policy && loosens((policy as Record<string, unknown>)[field])) {
      throw new HostRequestError(
        'invalid_request',
        `policy.${field}: this loosens a safe default; say so with the loosen option, which takes a reason (loosen.${field === 'unconfirmedMoneyUpTo' ? 'unconfirmedMoney' : field})`,
      );
    }
  }
  const parsed = loosenSchema.safeParse(loosen ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new HostRequestError('invalid_request', `loosen.${issue.path.join('.')}: ${issue.message}`);
  }
  const { unconfirmedMoney, ruleOfTwo } = parsed.data;
  const fields: Partial<Policy> = {};
  const loosened: Loosened[] = [];
  if (unconfirmedMoney) {
    fields.unconfirmedMoneyUpTo = unconfirmedMoney.upTo;
    loosened.push({ option: `unconfirmedMoney.upTo=${unconfirmedMoney.upTo}`, reason: unconfirmedMoney.reason });
  }
  if (ruleOfTwo) {
    fields.ruleOfTwo = 'off';
    loosened.push({ option: 'ruleOfTwo.off', reason: ruleOfTwo.reason });
  }
  return { fields, loosened };
}
