/** The building blocks of the data model's schemas, shared by `context.ts` and `calls.ts`. */
import { z } from 'zod';
import type { Json } from './strictJson.js';

// zod is a peer dependency: the app's copy. zod 3 (or zod 3.25's root export) lacks what the schemas below use.
if (typeof (z as { json?: unknown }).json !== 'function' || typeof z.strictObject !== 'function') {
  throw new Error('statechart-agent needs zod ^4.0.0 (the zod this app resolves is older: install zod@4)');
}

export const SHORT = 256;
export const count = z.number().int().nonnegative();
export const time = z.number().int().nonnegative();

/** The counters of a task's budget, each a whole count (`context.ts` limits, `subtasks.ts` a child's share). */
export const budgetCounterShape = {
  modelTurns: count,
  toolCalls: count,
  writes: count,
  retries: count,
  tokens: count,
  /** Micro-units (1e-6) of the host's currency. */
  costMicros: count,
  /** Money the task's writes may move, in minor units of the host's currency (tools declare what a call moves). */
  money: count,
};
/** Any non-empty id; the host API bounds the ids it hands out further (`startRequestSchema`). */
export const id = z.string().min(1);
export const jsonSchema: z.ZodType<Json> = z.json();

/** The trusted principal of a task, given by the host from its session at task start. Never from model text. */
export const principalSchema = z.strictObject({
  /** Authenticated user id (e.g. "E17"). */
  userId: z.string().min(1).max(SHORT),
  /** Tenant the user acts in. */
  tenantId: z.string().min(1).max(SHORT),
  /** Scopes granted by the host session (e.g. "rooms:book"). */
  scopes: z.array(z.string().min(1)).max(SHORT),
  /**
   * The host's session this principal was authenticated in; recorded in the audit of what the session did, which
   * approvers and operators read. A label for the session (its id in the host's session table, a device name), never
   * the session's bearer token or cookie value: anyone who can read the audit could sign in with that.
   */
  sessionId: z.string().min(1).max(SHORT).optional(),
});
