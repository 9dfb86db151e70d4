/**
 * A `send_payment` write for tests: it records the idempotency key of every request it is sent, and can hang (until
 * aborted) on chosen attempts, answer with a given confirmation rule or authorization hook, and declare same-key
 * retries safe or not; it runs unconfirmed (a written waiver) unless given a rule. Its lookup never finds anything: a timed-out payment is never known to have happened.
 */
import { z } from 'zod';
import type { ConfirmationRule, ValidationResult, WriteTool } from '../../src/tool.js';
import { defineTool } from '../../src/tool.js';

export interface PaymentOptions {
  /** Idempotency keys of the requests sent, in order. */
  sent?: string[];
  /** Amounts of the requests sent, in order. */
  amounts?: number[];
  /** Which requests (1-based, counted over `sent`) hang until aborted; default none. */
  hang?: (request: number) => boolean;
  sameKeyRetrySafe?: boolean;
  timeoutMs?: number;
  confirm?: ConfirmationRule<{ amount: number }> | unknown;
  authorize?: (() => ValidationResult) | unknown;
}

export function paymentTool(options: PaymentOptions = {}): WriteTool<{ amount: number }, { status: 'sent' }> {
  const sent = options.sent ?? [];
  return defineTool({
    name: 'send_payment',
    description: 'Sends a payment.',
    effect: 'write',
    scopes: [],
    timeoutMs: options.timeoutMs ?? 100,
    sameKeyRetrySafe: options.sameKeyRetrySafe ?? false,
    input: z.strictObject({ amount: z.number() }),
    output: z.strictObject({ status: z.literal('sent') }),
    // Unconfirmed unless a test gives a rule: its tests are about what happens around the payment, not the asking.
    confirm:
      options.confirm === undefined
        ? { never: 'a test payment whose tests are not about confirmation' }
        : (options.confirm as never),
    ...(options.authorize === undefined ? {} : { authorize: options.authorize as never }),
    execute: async (args, ctx) => {
      sent.push(ctx.idempotencyKey);
      options.amounts?.push(args.amount);
      if (options.hang?.(sent.length)) {
        return new Promise<never>((_, reject) =>
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true }),
        );
      }
      return { ok: true, value: { status: 'sent' as const } };
    },
    lookup: async () => ({ found: false as const }),
  });
}
